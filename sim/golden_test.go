package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

var updateGolden = flag.Bool("update-golden", false, "record the whole-trace results in testdata/golden/traces.txt")

// The whole public traces of the simulation table of docs/benchmarks.md (BenchmarkTraces:
// Philly and ITP cluster04 on 700 V100 + 650 P100 + 650 K80, FIFO and
// heterogeneity-aware max-min) give, job for job, the results recorded in
// testdata/golden/traces.txt: a SHA-256 of every record, dropped job and
// utilisation sample printed exactly (shortest round-trip floats), with
// the rounds and LP solves. A change that moves any per-job result by one
// bit fails here; one that is meant to change results is recorded again
// with -update-golden and says so in its commit. The values were recorded
// on amd64 at GOAMD64=v1 or v2: elsewhere the compiler may fuse
// multiply-adds (other architectures, and amd64 from v3), which moves the
// last bits, so the test is skipped. About 13 s: skipped with -short.
func TestTraceResultsGolden(t *testing.T) {
	if testing.Short() && !*updateGolden {
		t.Skip("whole traces: about 13 s")
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("golden results recorded on amd64, not %s (fused multiply-adds change the last bits)", runtime.GOARCH)
	}
	if goldenFMA {
		t.Skip("golden results recorded at GOAMD64=v1, not v3 or higher (fused multiply-adds change the last bits)")
	}
	path := filepath.Join("testdata", "golden", "traces.txt")
	want := map[string]string{}
	if !*updateGolden {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if name, rest, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				want[name] = rest
			}
		}
	}
	traces := []struct {
		name string
		path string
		read func(io.Reader, string) ([]Job, error)
	}{
		{"itp-cluster04", filepath.Join("testdata", "itp", "cluster04.csv"), ReadITP},
		{"philly", filepath.Join("testdata", "philly", "philly-jobs.csv"), ReadPhilly},
	}
	var got []string
	for _, tr := range traces {
		jobs := loadTrace(t, tr.path, tr.read)
		for _, pol := range []struct {
			name string
			make func() allocation.Policy
		}{
			{"fifo", func() allocation.Policy { return &allocation.FIFO{Perf: true} }},
			{"gavel", func() allocation.Policy { return &allocation.MaxMinFairness{} }},
		} {
			name := tr.name + "/" + pol.name
			cfg := Config{Types: []topology.GPUType{topology.V100, topology.P100, topology.K80}, Capacity: []int{700, 650, 650},
				Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()}, Policy: pol.make()}
			res, err := Run(context.Background(), cfg, jobs)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			line := resultDigest(res)
			got = append(got, name+" "+line)
			if *updateGolden {
				continue
			}
			if w, ok := want[name]; !ok {
				t.Errorf("%s: no golden result in %s (record it with -update-golden)", name, path)
			} else if w != line {
				t.Errorf("%s: results moved:\n got  %s\n want %s\n(a change meant to move them records them again with go test ./sim -run TestTraceResultsGolden -update-golden)", name, line, w)
			}
		}
	}
	if *updateGolden {
		text := "# name records dropped rounds solves sha256 (see TestTraceResultsGolden)\n" + strings.Join(got, "\n") + "\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// resultDigest prints the counts of a result and a SHA-256 of everything
// it recorded, every float in its shortest exact form.
func resultDigest(res *Result) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "end %v rounds %d solves %d\n", res.End, res.Rounds, res.Allocations)
	for i := range res.Records {
		_, _ = fmt.Fprintf(h, "%+v\n", res.Records[i])
	}
	for i := range res.Dropped {
		_, _ = fmt.Fprintf(h, "dropped %+v\n", res.Dropped[i])
	}
	for _, s := range res.Utilisation {
		_, _ = fmt.Fprintf(h, "u %v %v\n", s.Time, s.Value)
	}
	return fmt.Sprintf("%d %d %d %d %s", len(res.Records), len(res.Dropped), res.Rounds, res.Allocations, sum(h))
}

func sum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }
