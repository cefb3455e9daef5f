package elastic

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/require"
)

// goldenFile holds, for every trial of traceTrial, a hash of the answers
// the cluster gave before it ran on cluster.State, with servers of its own
// (recorded at commit c16c75c; see testdata/README.md).
var goldenFile = filepath.Join("testdata", "cluster_trace.golden")

// goldenTrials is the number of recorded trials.
const goldenTrials = 40

// clusterOps is what a trial calls.
type clusterOps interface {
	SetPacking(bool)
	Loan(int) ([]int, error)
	Place(*Job, int) (int, error)
	Resize(*Job, int) (int, error)
	Release(int)
	Reclaim(int) (*ReclaimResult, error)
	Jobs() []int
	Parts(int) []Part
	GPUs() (int, int)
	LoanedGPUs() (int, int)
	Loaned() int
	Span(int, []int) ([]int, int)
	Check() error
}

// traceTrial runs trial's 150 seeded random operations (loans, places,
// resizes, releases, reclaims; packing in odd trials) on a cluster of 0 to
// 3 training servers of 8 GPUs built by build, and returns the text of
// every answer: results and errors, then every job's parts and span and
// the GPU counts after each step. check runs after every step.
func traceTrial(t testing.TB, trial int, build func(n int) (clusterOps, func(where string))) string {
	rng := rand.New(rand.NewPCG(11, uint64(trial)))
	n := rng.IntN(4)
	c, check := build(n)
	c.SetPacking(trial%2 == 1)
	var b strings.Builder
	fmt.Fprintf(&b, "servers %d packing %v\n", n, trial%2 == 1)
	status := func(err error) string {
		if err == nil {
			return "ok"
		}
		return "error " + err.Error()
	}
	jobs := map[int]*Job{}
	pick := func() *Job {
		if len(jobs) == 0 {
			return nil
		}
		ids := make([]int, 0, len(jobs))
		for id := range jobs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return jobs[ids[rng.IntN(len(ids))]]
	}
	for step := range 150 {
		fmt.Fprintf(&b, "%d: ", step)
		switch rng.IntN(6) {
		case 0:
			k := rng.IntN(3)
			ids, err := c.Loan(k)
			fmt.Fprintf(&b, "loan %d: %v %s", k, ids, status(err))
		case 1, 2:
			wMin := 1 + rng.IntN(4)
			j := &Job{ID: step, MinWorkers: wMin, MaxWorkers: wMin + rng.IntN(6), GPUsPerWorker: 1 + rng.IntN(4), Work: 1, Curve: Linear{1}}
			w := j.MinWorkers + rng.IntN(j.MaxWorkers-j.MinWorkers+1)
			got, err := c.Place(j, w)
			fmt.Fprintf(&b, "place %d (%d to %d of %d GPUs) with %d: %d %s", j.ID, j.MinWorkers, j.MaxWorkers, j.GPUsPerWorker, w, got, status(err))
			if err == nil {
				jobs[j.ID] = j
			}
		case 3:
			if j := pick(); j != nil {
				w := j.MinWorkers + rng.IntN(j.MaxWorkers-j.MinWorkers+1)
				got, err := c.Resize(j, w)
				fmt.Fprintf(&b, "resize %d to %d: %d %s", j.ID, w, got, status(err))
			}
		case 4:
			if j := pick(); j != nil {
				c.Release(j.ID)
				delete(jobs, j.ID)
				fmt.Fprintf(&b, "release %d", j.ID)
			}
		case 5:
			k := rng.IntN(c.Loaned() + 2)
			r, err := c.Reclaim(k)
			fmt.Fprintf(&b, "reclaim %d: %+v %s", k, r, status(err))
		}
		for _, id := range c.Jobs() {
			s, l := c.Span(id, nil)
			fmt.Fprintf(&b, "; job %d %+v span %v %d", id, c.Parts(id), s, l)
		}
		total, free := c.GPUs()
		lt, lb := c.LoanedGPUs()
		fmt.Fprintf(&b, "; gpus %d free %d loaned %d busy %d\n", total, free, lt, lb)
		where := fmt.Sprintf("trial %d step %d", trial, step)
		require.NoError(t, c.Check(), where)
		if check != nil {
			check(where)
		}
	}
	return b.String()
}

// traceLine is a trial's line in the golden file.
func traceLine(trace string) string {
	sum := sha256.Sum256([]byte(trace))
	return fmt.Sprintf("%d bytes sha256 %s", len(trace), hex.EncodeToString(sum[:16]))
}

// The cluster, on a state of its own (NewCluster) or on a shared one
// (NewClusterOn), gives at every step of the recorded trials the answers
// it gave with its own model of the servers, errors included, and the
// state holds exactly the servers held and the GPUs the jobs' parts count.
func TestClusterMatchesPrivateModel(t *testing.T) {
	data, err := os.ReadFile(goldenFile)
	require.NoError(t, err)
	want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	require.Len(t, want, goldenTrials)
	trials := goldenTrials
	if testing.Short() {
		trials = 4
	}
	for _, mode := range []struct {
		name string
		make maker
		gpu  topology.GPUType
	}{{"own state", NewCluster, TrainGPUType}, {"shared state", onLive, topology.V100}} {
		for trial := range trials {
			trace := traceTrial(t, trial, func(n int) (clusterOps, func(string)) {
				c, err := mode.make(n, 8)
				require.NoError(t, err)
				return c, func(where string) {
					// The state has exactly the servers held now, and
					// its free GPUs are the cluster's.
					_, free := c.GPUs()
					require.Equal(t, len(c.live), c.State().NumServers(), where)
					require.Equal(t, free, c.State().Free(mode.gpu), where)
				}
			})
			require.Equal(t, want[trial], fmt.Sprintf("trial %d: %s", trial, traceLine(trace)), "%s, trial %d", mode.name, trial)
		}
	}
}
