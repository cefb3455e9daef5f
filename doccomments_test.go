package gpusched_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docWord is a word of a doc comment that may name code: an identifier,
// or a file name ending in .go.
var docWord = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(\.go\b)?`)

// TestDocCommentsNameExportedOnly checks that the doc comments a reader of
// go doc or pkg.go.dev sees (packages, exported names, their fields and
// methods) send them only to what they can see: no source file names and
// no unexported functions, types, variables or constants of the package
// (a camelCase or snake_case name; plain words such as "round" that happen
// to name a function are not flagged). The kube module is checked too.
func TestDocCommentsNameExportedOnly(t *testing.T) {
	dirs := map[string][]string{} // folder -> its non-test Go files
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, names := range dirs {
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range names {
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		hidden := unexportedNames(files)
		check := func(what string, doc *ast.CommentGroup) {
			if doc == nil {
				return
			}
			checked++
			for _, w := range docWord.FindAllString(doc.Text(), -1) {
				switch {
				case strings.HasSuffix(w, ".go"):
					t.Errorf("%s: doc of %s names the file %s; name an exported identifier or say it in words", fset.Position(doc.Pos()), what, w)
				case hidden[w] && strings.ContainsAny(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"):
					t.Errorf("%s: doc of %s names %s, which is not exported", fset.Position(doc.Pos()), what, w)
				}
			}
		}
		for _, f := range files {
			check("package "+f.Name.Name, f.Doc)
			for _, decl := range f.Decls {
				checkDecl(decl, check)
			}
		}
	}
	if checked < 500 {
		t.Errorf("only %d doc comments checked; is the test running in the module root?", checked)
	}
}

// unexportedNames are the package's unexported top-level names and methods.
func unexportedNames(files []*ast.File) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					out[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							out[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() && n.Name != "_" {
								out[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

// checkDecl calls check on the doc comments of a declaration that go doc
// shows: exported functions and methods of exported types, exported types
// with their exported fields and interface methods, exported values.
func checkDecl(decl ast.Decl, check func(what string, doc *ast.CommentGroup)) {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		if d.Recv != nil && len(d.Recv.List) == 1 && !ast.IsExported(receiverType(d.Recv.List[0].Type)) {
			return
		}
		check(d.Name.Name, d.Doc)
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				doc := s.Doc
				if doc == nil {
					doc = d.Doc
				}
				check(s.Name.Name, doc)
				var fields *ast.FieldList
				switch ty := s.Type.(type) {
				case *ast.StructType:
					fields = ty.Fields
				case *ast.InterfaceType:
					fields = ty.Methods
				}
				if fields == nil {
					continue
				}
				for _, fl := range fields.List {
					for _, n := range fl.Names {
						if n.IsExported() {
							check(s.Name.Name+"."+n.Name, fl.Doc)
						}
					}
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					doc := s.Doc
					if doc == nil {
						doc = d.Doc
					}
					check(n.Name, doc)
				}
			}
		}
	}
}

// receiverType is the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
