package ring

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goldenFile holds the schedules of goldenCases as the executor and
// SJF-BCO gave them with their own model of the cluster, before they ran on
// cluster.State (recorded at commit c16c75c; see testdata/README.md).
var goldenFile = filepath.Join("testdata", "private_model.golden")

// goldenCase is one recorded execution: its name and how to run it.
type goldenCase struct {
	name string
	run  func() (string, error)
}

// digest is a schedule's line in the golden file: its makespan, mean JCT
// and events, and a hash of every outcome (start, finish, GPUs, servers,
// contention, estimate) in fmt's %+v (maps print sorted by key).
func digest(s *Schedule, extra string) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%+v", s.Jobs)))
	return fmt.Sprintf("makespan %d mean %.9g events %d%s sha256 %s", s.Makespan, s.MeanJCT, s.Events, extra, hex.EncodeToString(sum[:12]))
}

// goldenCases lists the executions: every placer, strict or not, on
// random instances with arrivals, and SJF-BCO in several settings.
func goldenCases(t testing.TB) []goldenCase {
	var cases []goldenCase
	ctx := context.Background()
	for seed := range seeds(6) {
		c, jobs := randomInstance(t, seed, 7, 50)
		for i := range jobs {
			jobs[i].Arrival = int(seed*31+uint64(i)*17) % 40
		}
		placers := []struct {
			name string
			make func() Placer
		}{
			{"first-fit", func() Placer { return FirstFit{} }},
			{"first-fit-whole", func() Placer { return FirstFit{WholeServer: true} }},
			{"list", func() Placer { return &ListScheduling{} }},
			{"random", func() Placer { return NewRandom(seed) }},
			{"fa-ffp", func() Placer { return &FAFFP{Theta: math.Inf(1)} }},
			{"fa-ffp-theta", func() Placer { return &FAFFP{Theta: 4000} }},
			{"fa-ffp-packed", func() Placer { return &FAFFP{Theta: 4000, Reading: PackedServers} }},
			{"lbsgf", func() Placer { return &LBSGF{Theta: math.Inf(1)} }},
			{"lbsgf-2", func() Placer { return &LBSGF{Theta: 4000, Lambda: 2} }},
		}
		for _, p := range placers {
			for _, strict := range []bool{true, false} {
				cases = append(cases, goldenCase{fmt.Sprintf("run seed %d %s strict %v", seed, p.name, strict), func() (string, error) {
					s, err := (&Executor{Model: paperModel, Placer: p.make(), Strict: strict}).Run(ctx, c, jobs, nil)
					if err != nil {
						return "", err
					}
					return digest(s, ""), nil
				}})
			}
		}
	}
	for seed := range seeds(4) {
		c, jobs := randomInstance(t, 100+seed, 6, 40)
		for _, b := range []struct {
			name string
			b    SJFBCO
		}{
			{"default", SJFBCO{Model: paperModel}},
			{"packed", SJFBCO{Model: paperModel, Reading: PackedServers}},
			{"lambda-2", SJFBCO{Model: paperModel, Lambda: 2}},
			{"kappa-4-horizon", SJFBCO{Model: paperModel, Kappas: []int{4}, Horizon: 3000}},
		} {
			cases = append(cases, goldenCase{fmt.Sprintf("sjf-bco seed %d %s", 100+seed, b.name), func() (string, error) {
				r, err := b.b.Schedule(ctx, c, jobs)
				if err != nil {
					return "", err
				}
				return digest(r.Schedule, fmt.Sprintf(" theta %d kappa %d runs %d", r.Theta, r.Kappa, r.Runs)), nil
			}})
		}
	}
	// Errors are recorded too (their text).
	c, jobs := randomInstance(t, 0, 7, 50)
	cases = append(cases, goldenCase{"run seed 0 list horizon 50", func() (string, error) {
		s, err := (&Executor{Model: paperModel, Placer: &ListScheduling{}, Horizon: 50}).Run(ctx, c, jobs, nil)
		if err != nil {
			return "", err
		}
		return digest(s, ""), nil
	}}, goldenCase{"sjf-bco seed 0 horizon 10", func() (string, error) {
		r, err := SJFBCO{Model: paperModel, Horizon: 10}.Schedule(ctx, c, jobs)
		if err != nil {
			return "", err
		}
		return digest(r.Schedule, ""), nil
	}})
	return cases
}

// readGolden returns the golden file's lines by case name.
func readGolden(t *testing.T) map[string]string {
	data, err := os.ReadFile(goldenFile)
	require.NoError(t, err)
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		name, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		require.True(t, ok, "golden line %q", line)
		out[name] = rest
	}
	return out
}

// The executor and SJF-BCO on cluster.State give, schedule for schedule,
// what they gave with their own model of the cluster (errors included):
// the published SJF-BCO reproductions rest on this.
func TestSchedulesMatchPrivateModel(t *testing.T) {
	want := readGolden(t)
	cases := goldenCases(t)
	if !testing.Short() {
		require.Len(t, want, len(cases), "one golden line per case")
	}
	for _, tc := range cases {
		got, err := tc.run()
		if err != nil {
			got = "error " + err.Error()
		}
		w, ok := want[tc.name]
		require.True(t, ok, "no golden line for %s", tc.name)
		require.Equal(t, w, got, tc.name)
	}
}
