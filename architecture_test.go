package gpusched_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gpusched/gpusched"

// allowed maps a package (by its path in the module) to the module packages
// it may import, per ARCHITECTURE.md: topology knows nothing of jobs,
// perfmodel knows hardware but no policy, the policy packages never import
// sim, and nothing imports examples. Subpackages inherit the rule of their
// nearest listed ancestor and may import their parent.
var allowed = map[string][]string{
	"topology":   {"internal"},
	"cluster":    {"topology", "internal"},
	"perfmodel":  {"topology", "internal"},
	"allocation": {"perfmodel", "topology", "internal"},
	"placement":  {"cluster", "topology", "internal"},
	// multires splits CPUs and memory beside the GPUs (Synergy); its
	// bound is a linear program.
	"multires": {"allocation/lp", "topology", "internal"},
	// placement/ring needs the ring model; placement itself does not, so a
	// binary that chooses GPUs or admits gangs carries no throughput table.
	"placement/ring": {"placement", "cluster", "perfmodel", "topology", "internal"},
	"gang":           {"placement", "cluster", "topology", "internal"},
	// elastic ranks its queue policies with gang's orders (Tiresias) and
	// solves Sia's integer program with the LP solver (not the Gavel
	// policies of allocation).
	"elastic": {"gang", "allocation/lp", "placement", "cluster", "perfmodel", "topology", "internal"},
	// scheduler composes the policies over the live state; it never
	// imports sim, which drives it.
	"scheduler": {"allocation", "placement", "gang", "elastic", "cluster", "perfmodel", "topology", "internal"},
	"sim":       {"scheduler", "multires", "allocation", "placement", "gang", "elastic", "cluster", "perfmodel", "topology", "internal"},
	// flavor models Kueue's flavor assignment and gpusched's steering of
	// it (allocation policies over ClusterQueues), as gang schedulers for
	// the simulator's event engine and for kube/kueue.
	"flavor": {"allocation", "gang", "perfmodel", "topology", "internal"},
	// compare runs policies side by side on the simulator: the baselines
	// (allocation, flavor) defined once over sim's engines.
	"compare":  {"sim", "flavor", "scheduler", "multires", "allocation", "elastic", "gang", "cluster", "perfmodel", "topology", "internal"},
	"internal": {"internal"},
	"examples": {"compare", "flavor", "sim", "scheduler", "multires", "allocation", "placement", "gang", "elastic", "cluster", "perfmodel", "topology", "internal"},
	".":        {},
	// kube is a module of its own (the only one with Kubernetes
	// dependencies): the scheduler plugin builds on the core, never on sim.
	"kube": {"kube", "flavor", "scheduler", "multires", "allocation", "placement", "gang", "elastic", "cluster", "perfmodel", "topology"},
}

// cgoAllowed are the only packages that may use cgo or import a cgo binding.
var cgoAllowed = map[string]bool{"allocation/lp/clp": true, "topology/nvml": true}

// cgoModules are third-party modules that need cgo.
var cgoModules = []string{"github.com/NVIDIA/go-nvml"}

// rule is the entry of the longest package path in allowed that holds pkg.
func rule(pkg string) []string {
	for p := pkg; ; {
		if r, ok := allowed[p]; ok {
			return r
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return allowed[p]
		}
		p = p[:i]
	}
}

func within(pkg, parent string) bool { return pkg == parent || strings.HasPrefix(pkg, parent+"/") }

func TestImportDirection(t *testing.T) {
	imports := map[string]map[string]bool{} // package dir -> imported paths
	cgo := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			imports[dir][ip] = true
			if ip == "C" {
				cgo[dir] = true
			}
			for _, m := range cgoModules {
				if within(ip, m) {
					cgo[dir] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) < 5 {
		t.Fatalf("found only %d packages; is the test running in the module root?", len(imports))
	}
	for dir, imps := range imports {
		top, _, _ := strings.Cut(dir, "/")
		if _, ok := allowed[top]; !ok {
			t.Errorf("package %s: no import rule for %q; add one to this test and to ARCHITECTURE.md", dir, top)
			continue
		}
		if cgo[dir] && !cgoAllowed[dir] {
			t.Errorf("package %s uses cgo; cgo belongs only in %v", dir, keys(cgoAllowed))
		}
		for ip := range imps {
			rel, ok := strings.CutPrefix(ip, module+"/")
			if !ok {
				continue
			}
			if cgoAllowed[rel] && !cgoAllowed[dir] && !strings.HasPrefix(dir, "examples") {
				t.Errorf("package %s imports the cgo package %s", dir, rel)
			}
			if within(dir, rel) || within(rel, dir) {
				continue // own subpackage or parent
			}
			okImport := false
			for _, a := range rule(dir) {
				if within(rel, a) {
					okImport = true
				}
			}
			if !okImport {
				t.Errorf("package %s may not import %s (allowed: %v)", dir, rel, rule(dir))
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestEveryPackageHasDocGo(t *testing.T) {
	for _, dir := range []string{".", "topology", "cluster", "perfmodel", "allocation", "placement", "gang", "elastic", "sim", "internal"} {
		if _, err := os.Stat(filepath.Join(dir, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go: %v", dir, err)
		}
	}
}
