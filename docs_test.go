package gpusched_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pendingPages are pages that other branches write and the docs already
// link to. A link to one of them is skipped while the file is missing;
// once it lands it is checked like any other page. Keep this list short:
// a page stays here only until its branch is merged (none now).
var pendingPages []string

// docFiles are the Markdown files whose links and commands are checked:
// the README, the changelog, every page of docs/ and the Kubernetes
// module's own guides.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "kube/SECURITY.md"}
	for _, glob := range []string{"docs/*.md", "kube/docs/*.md"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// mdLine is one line of a Markdown file outside code blocks, with its
// inline code spans blanked, or one line of a fenced block.
type mdLine struct {
	n     int    // line number, from 1
	text  string // the line; code spans blanked when not in a block
	fence string // the info string of the fenced block holding the line, or ""
	inBlk bool
	spans []string // the line's inline code spans (outside blocks)
}

var codeSpan = regexp.MustCompile("`[^`]*`")

func readMarkdown(t *testing.T, file string) []mdLine {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []mdLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inBlk, info := false, ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if !inBlk {
				inBlk, info = true, strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
			} else {
				inBlk, info = false, ""
			}
			continue
		}
		if inBlk {
			out = append(out, mdLine{n: n, text: line, fence: info, inBlk: true})
			continue
		}
		if strings.Count(line, "`")%2 == 1 {
			t.Errorf("%s:%d: a code span across lines; keep each on one line, so that its command can be checked", file, n)
		}
		var spans []string
		for _, s := range codeSpan.FindAllString(line, -1) {
			spans = append(spans, strings.Trim(s, "`"))
		}
		blank := codeSpan.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) })
		out = append(out, mdLine{n: n, text: blank, spans: spans})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// anchors returns the anchors GitHub makes for a Markdown file's headings
// (lower case, punctuation dropped, spaces to hyphens, -1, -2 ... for
// repeats) and its explicit <a name> anchors.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range readMarkdown(t, file) {
		if l.inBlk {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l.text, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		// The heading's text, code spans included (readMarkdown blanked them).
		raw := strings.TrimSpace(strings.TrimLeft(rawLine(t, file, l.n), "#"))
		slug := slugify(raw)
		if k := seen[slug]; k > 0 {
			out[slug+"-"+strconv.Itoa(k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

var rawCache = map[string][]string{}

func rawLine(t *testing.T, file string, n int) string {
	t.Helper()
	lines, ok := rawCache[file]
	if !ok {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines = strings.Split(string(data), "\n")
		rawCache[file] = lines
	}
	return lines[n-1]
}

// slugify is GitHub's heading anchor: links and emphasis markers dropped
// with the other punctuation, letters lower-cased, spaces turned to
// hyphens.
func slugify(h string) string {
	h = regexp.MustCompile(`\]\([^)]*\)`).ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestDocLinks checks that every relative link of the docs points to a file
// or folder of the repository and, for a Markdown page, to one of its
// headings. Links to other sites are not followed (no network in CI).
func TestDocLinks(t *testing.T) {
	files := docFiles(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(f string) map[string]bool {
		if a, ok := cache[f]; ok {
			return a
		}
		cache[f] = anchors(t, f)
		return cache[f]
	}
	checked := 0
	for _, file := range files {
		for _, l := range readMarkdown(t, file) {
			if l.inBlk {
				continue
			}
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(l.text, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(l.text); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := file + ":" + strconv.Itoa(l.n)
				p, frag, _ := strings.Cut(target, "#")
				dest := file
				if p != "" {
					if path.IsAbs(p) {
						t.Errorf("%s: link %q: use a path relative to the page", where, target)
						continue
					}
					dest = path.Clean(path.Join(path.Dir(file), p))
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s: link %q leaves the repository", where, target)
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						if slices.Contains(pendingPages, dest) {
							t.Logf("%s: link to %s skipped: that page lands with another branch", where, dest)
							continue
						}
						t.Errorf("%s: link %q: no file %s in the repository", where, target, dest)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: link %q: an anchor into a file that is not Markdown", where, target)
					continue
				}
				if !anchorsOf(dest)[frag] {
					t.Errorf("%s: link %q: %s has no heading with anchor #%s", where, target, dest, frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d links checked; is the test reading the docs?", checked)
	}
}

// TestDocCommands checks the commands the docs give: each go run or go
// test names a package of the repository, each flag given to one of the
// example programs is one it defines, and each -run or -bench pattern
// matches a test or benchmark of the package it is run on. Running them
// is CI's job (.ci/run runs the README's two commands); this catches a
// command that a rename or a removal made wrong.
func TestDocCommands(t *testing.T) {
	n := 0
	for _, file := range docFiles(t) {
		home := "." // the folder a page's commands run in; `cd kube` changes it
		if strings.HasPrefix(file, "kube/") {
			home = "kube"
		}
		dir, prev := home, 0
		for _, l := range readMarkdown(t, file) {
			var cmds []string
			if l.inBlk && l.n != prev+1 {
				dir = home // a new block
			}
			prev = l.n
			if l.inBlk {
				if l.fence != "sh" && l.fence != "bash" && l.fence != "" && l.fence != "console" {
					continue
				}
				cmds = append(cmds, shellCommands(l.text)...)
			} else {
				dir = home
				for _, s := range l.spans {
					cmds = append(cmds, shellCommands(s)...)
				}
				// An indented command block (four spaces) in the kube guides.
				if strings.HasPrefix(l.text, "    ") {
					cmds = append(cmds, shellCommands(l.text)...)
				}
			}
			for _, c := range cmds {
				f := strings.Fields(c)
				if len(f) >= 2 && f[0] == "cd" {
					dir = path.Clean(path.Join(dir, f[1]))
					continue
				}
				if len(f) < 2 || f[0] != "go" || (f[1] != "run" && f[1] != "test") {
					continue
				}
				n++
				checkGoCommand(t, file+":"+strconv.Itoa(l.n), dir, f)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d go commands checked; is the test reading the docs?", n)
	}
}

// shellCommands splits a line of shell into commands at &&, ; and |,
// dropping a trailing comment.
func shellCommands(line string) []string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
	var out []string
	for _, part := range regexp.MustCompile(`&&|;|\|`).Split(line, -1) {
		part = strings.TrimSpace(part)
		// Environment assignments before the command (GOCACHE=... go run).
		for {
			f := strings.Fields(part)
			if len(f) > 1 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") {
				part = strings.TrimSpace(strings.TrimPrefix(part, f[0]))
				continue
			}
			break
		}
		if f := strings.Fields(part); len(f) > 2 && f[0] == "nice" {
			part = strings.Join(f[3:], " ")
		}
		out = append(out, part)
	}
	return out
}

func checkGoCommand(t *testing.T, where, dir string, f []string) {
	t.Helper()
	var pkgs []string
	var run, bench string
	var flags []string
	isTest := f[1] == "test"
	pkgSeen := false
	for i := range f {
		f[i] = strings.Trim(f[i], `'"`)
	}
	for i := 2; i < len(f); i++ {
		a := f[i]
		switch {
		case strings.HasPrefix(a, "./") || a == ".":
			pkgs = append(pkgs, a)
			pkgSeen = true
		case strings.HasPrefix(a, "-"):
			name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if pkgSeen && !isTest {
				flags = append(flags, name)
				continue
			}
			takesValue := map[string]bool{"run": true, "bench": true, "tags": true, "timeout": true, "count": true,
				"benchtime": true, "cpuprofile": true, "memprofile": true, "fuzz": true, "fuzztime": true, "cpu": true, "o": true, "skip": true}
			if pkgSeen && isTest && !takesValue[name] && !hasVal {
				// A flag after the package of go test goes to the test binary.
				continue
			}
			if takesValue[name] && !hasVal && i+1 < len(f) {
				val = f[i+1]
				i++
			}
			switch name {
			case "run":
				run = val
			case "bench":
				bench = val
			}
		default:
			if pkgSeen && !isTest {
				continue // a flag's value
			}
		}
	}
	if len(pkgs) == 0 {
		return // prose such as "go test -race -short on every package"
	}
	for _, p := range pkgs {
		full := path.Clean(path.Join(dir, strings.TrimSuffix(p, "/...")))
		st, err := os.Stat(full)
		if err != nil || !st.IsDir() {
			t.Errorf("%s: go %s %s: no package folder %s", where, f[1], p, full)
			continue
		}
		// A package of a nested module (kube/) builds only from inside it.
		for d := full; d != dir && d != "."; d = path.Dir(d) {
			if _, err := os.Stat(path.Join(d, "go.mod")); err == nil {
				t.Errorf("%s: go %s %s: that package is in the module %s; cd %s first", where, f[1], p, d, d)
				break
			}
		}
		if strings.HasSuffix(p, "/...") {
			continue
		}
		if !isTest {
			src := goSource(t, full, false)
			if strings.Contains(src, "compare.Main(") {
				src += goSource(t, "compare", false) // the suite's command
			}
			if strings.Contains(src, "kube/internal/startup") {
				src += goSource(t, filepath.Join("kube", "internal", "startup"), false) // the kube binaries' shared flags
			}
			for _, fl := range flags {
				if fl == "h" || fl == "help" {
					continue
				}
				if !strings.Contains(src, `"`+fl+`"`) {
					t.Errorf("%s: go run %s -%s: the program defines no flag %q", where, p, fl, fl)
				}
			}
			continue
		}
		for _, pat := range []struct{ kind, re string }{{"Test", run}, {"Benchmark", bench}} {
			if pat.re == "" || pat.re == "." || pat.re == "^$" {
				continue
			}
			top, _, _ := strings.Cut(pat.re, "/")
			re, err := regexp.Compile(top)
			if err != nil {
				t.Errorf("%s: -%s %q: %v", where, strings.ToLower(pat.kind), pat.re, err)
				continue
			}
			names := testFuncs(t, full)
			found := false
			for _, name := range names {
				if re.MatchString(name) && (strings.HasPrefix(name, pat.kind) || pat.kind == "Test" && (strings.HasPrefix(name, "Example") || strings.HasPrefix(name, "Fuzz"))) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: go test %s -%s %q matches no %s function there", where, p, map[string]string{"Test": "run", "Benchmark": "bench"}[pat.kind], pat.re, pat.kind)
			}
		}
	}
}

// goSource is the text of the package's Go files (tests included or not).
func goSource(t *testing.T, dir string, tests bool) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range m {
		if !tests && strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// testFuncs lists the top-level functions of a package's test files.
func testFuncs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names
}

// TestREADMESnippet checks that the README's program is examples/embed,
// which go vet compiles and whose Example runs it and checks its output:
// the snippet a newcomer copies cannot rot.
func TestREADMESnippet(t *testing.T) {
	var blocks []string
	var cur []string
	for _, l := range readMarkdown(t, "README.md") {
		if l.inBlk && l.fence == "go" {
			cur = append(cur, l.text)
			continue
		}
		if cur != nil {
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
			cur = nil
		}
	}
	var program []string
	for _, b := range blocks {
		if strings.HasPrefix(b, "package main\n") {
			program = append(program, b)
		}
	}
	if len(program) != 1 {
		t.Fatalf("README.md has %d Go blocks that are a program (package main), want 1", len(program))
	}
	src, err := os.ReadFile("examples/embed/main.go")
	if err != nil {
		t.Fatal(err)
	}
	// The file's package comment is not part of the README's block.
	_, body, ok := strings.Cut(string(src), "\npackage main\n")
	if !ok {
		t.Fatal("examples/embed/main.go: no package clause")
	}
	want := "package main\n" + body
	if program[0] != want {
		t.Errorf("README.md's program differs from examples/embed/main.go (after its package comment); copy one onto the other.\nREADME:\n%s\nexamples/embed/main.go:\n%s", program[0], want)
	}
}

// TestDocNamesEveryPackage checks that docs/architecture.md names every
// package of both modules (a group such as `examples/*` or
// `kube/cmd/*` names its members) and that the root package's
// documentation (doc.go) names every package of the root module by its
// path (examples and internal by their folder), so that a package added
// without its place in the picture fails here (issue #44).
func TestDocNamesEveryPackage(t *testing.T) {
	arch, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != "." && (strings.HasPrefix(name, ".") || name == "testdata" || p == "kube/hack") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && filepath.Dir(p) != "." && !slices.Contains(pkgs, filepath.ToSlash(filepath.Dir(p))) {
			pkgs = append(pkgs, filepath.ToSlash(filepath.Dir(p)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := func(text []byte, pkg string) bool {
		for p := pkg; p != "." && p != ""; p = path.Dir(p) {
			if bytes.Contains(text, []byte("`"+p+"`")) || bytes.Contains(text, []byte("`"+p+"/*`")) {
				return true
			}
		}
		return false
	}
	for _, p := range pkgs {
		if !named(arch, p) {
			t.Errorf("docs/architecture.md does not name package %s", p)
		}
		if strings.HasPrefix(p, "kube/") || strings.HasPrefix(p, "examples/") || strings.HasPrefix(p, "internal/") {
			continue
		}
		if !regexp.MustCompile(`(^|[\s/\[(])` + regexp.QuoteMeta(p) + `([\s\].,;:)]|$)`).Match(doc) {
			t.Errorf("doc.go does not name package %s", p)
		}
	}
	if len(pkgs) < 30 {
		t.Errorf("found %d packages, fewer than the repository holds", len(pkgs))
	}
}
