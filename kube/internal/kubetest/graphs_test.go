package kubetest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requires reads the module versions a go.mod requires (its require
// lines, in blocks or alone).
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	block := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.SplitN(sc.Text(), "//", 2)[0])
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !block:
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			out[f[0]] = f[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The test binaries kube-apiserver and kube-scheduler (built in this
// module) and kube-controller-manager and kubectl (hack/k8s) share their
// compiled packages in Go's build cache only where both modules select the
// same versions: one differing module low in the graph (go.yaml.in/yaml/v3
// v3.0.5 here, v3.0.4 there) made a cold build of kube-controller-manager
// compile nearly all of Kubernetes again (478 s against 109 s). Every
// module both go.mod files require is at one version.
func TestBuildGraphsAgree(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ours := requires(t, filepath.Join(root, "go.mod"))
	theirs := requires(t, filepath.Join(root, "hack", "k8s", "go.mod"))
	if len(ours) < 50 || len(theirs) < 50 {
		t.Fatalf("read %d and %d requirements: the go.mod files were not parsed", len(ours), len(theirs))
	}
	shared := 0
	for mod, v := range ours {
		if w, ok := theirs[mod]; ok {
			shared++
			if v != w {
				t.Errorf("%s: %s here, %s in hack/k8s/go.mod (require %s@%s there: go get, go mod tidy)", mod, v, w, mod, v)
			}
		}
	}
	if shared < 50 {
		t.Errorf("only %d modules in both go.mod files", shared)
	}
}
