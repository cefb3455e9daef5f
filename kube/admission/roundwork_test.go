package admission

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// A round selects the Jobs' pods once, whatever the number of Jobs and
// of recorded pods: the memory a round's read of the workloads allocates
// for 4,000 recorded pod UIDs beside 1,000 suspended Jobs (no pods) is
// that of one set of them (0.2 MB), not one per Job. Before the fix each
// Job's selection rebuilt the set from every record, Jobs x UIDs map
// inserts under the controller's lock: here 4e6, 437 MB allocated and
// 1.0 s a round (now 0.2 MB more than without records, and 3 ms); at the
// review's 20,000 suspended Jobs and 8,000 admitted pods, 1.6e8 inserts:
// 17.5 GB and 61 s a round (now 0.4 MB more, and 0.11 s in all), on
// this test's machine.
func TestRoundWorkLinearInJobsAndRecords(t *testing.T) {
	if raceEnabled {
		t.Skip("counts the memory a call allocates: one goroutine, and -race's own allocations would blur it")
	}
	const jobs, uids = 1000, 4000
	objs := []runtime.Object{gpuNode("n1", "Tesla-V100-SXM2-16GB", 4)}
	for i := range jobs {
		objs = append(objs, apiJob("att", fmt.Sprintf("j-%d", i), 1, 1))
	}
	ten, err := tenancy.Parse([]byte(attackTenancy))
	require.NoError(t, err)
	c := newController(t, fake.NewClientset(objs...), &testClock{}, func(cfg *Config) { cfg.Tenancy = ten })
	require.NoError(t, c.SyncCaches(context.Background()))
	records := map[string]*record{}
	for i := range uids / 4 {
		r := &record{Type: topology.V100, NS: "v1"}
		for k := range 4 {
			r.UIDs = append(r.UIDs, types.UID(fmt.Sprintf("pod-%d-%d", i, k)))
		}
		records[fmt.Sprintf("group/v1/g-%d", i)] = r
	}
	alloc := func(recs map[string]*record) (uint64, time.Duration) {
		c.state.Admitted = recs
		goruntime.GC()
		var a, b goruntime.MemStats
		goruntime.ReadMemStats(&a)
		start := time.Now()
		ws, err := c.workloads()
		d := time.Since(start)
		goruntime.ReadMemStats(&b)
		require.NoError(t, err)
		require.Len(t, ws, jobs)
		return b.TotalAlloc - a.TotalAlloc, d
	}
	base, baseTime := alloc(map[string]*record{})
	with, withTime := alloc(records)
	extra := int64(with) - int64(base)
	t.Logf("%d Jobs: %d bytes (%v) with no records, %d bytes (%v) with %d recorded UIDs: %d bytes more",
		jobs, base, baseTime, with, withTime, uids, extra)
	// One set of 4,000 UIDs (string headers and the map's slots) is well
	// under 1 MB; one per Job was hundreds.
	assert.Less(t, extra, int64(1<<20), "the recorded UIDs cost once a round, not once per Job")
}
