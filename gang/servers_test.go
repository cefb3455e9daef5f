package gang

import (
	"testing"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func twoServers(t *testing.T) *topology.Cluster {
	c, err := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	require.NoError(t, err)
	return c
}

func waitingJob(id, sf int) JobView {
	return JobView{ID: id, Arrival: float64(id), ScaleFactor: sf, Throughput: []float64{1}, Type: -1, Remaining: 100, Steps: 100}
}

func TestConsolidatedPlacement(t *testing.T) {
	c := twoServers(t)
	o := &OnServers{Inner: Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Greedy}, Cluster: c}
	assert.Equal(t, []topology.GPUType{topology.V100}, o.Types())
	assert.Equal(t, []int{8}, o.Capacity())
	d := decided(t)(o.Decide(0, []int{8}, []JobView{waitingJob(1, 2), waitingJob(2, 2), waitingJob(3, 4)}, nil))
	require.Len(t, d.Start, 3)
	// Best fit: jobs 1 and 2 fill server 0, job 3 takes server 1.
	assert.Equal(t, GPUSet{0: {0, 1}}, o.Placement(1))
	assert.Equal(t, GPUSet{0: {2, 3}}, o.Placement(2))
	assert.Equal(t, GPUSet{1: {0, 1, 2, 3}}, o.Placement(3))
	// Job 2 finishes: its GPUs come back at the next event.
	running := []JobView{{ID: 1, ScaleFactor: 2, Type: 0, Throughput: []float64{1}}, {ID: 3, ScaleFactor: 4, Type: 0, Throughput: []float64{1}}}
	d = decided(t)(o.Decide(10, []int{2}, []JobView{waitingJob(4, 2)}, running))
	require.Len(t, d.Start, 1)
	assert.Equal(t, GPUSet{0: {2, 3}}, o.Placement(4))
}

// All or nothing: with two GPUs free on each server, a strict consolidated
// placer cannot place a 4-GPU job, so it is rolled back (not started) and
// a 2-GPU job behind it runs.
func TestGangRollback(t *testing.T) {
	c := twoServers(t)
	o := &OnServers{Inner: Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Greedy}, Cluster: c, Placer: Consolidated{Strict: true}}
	d := decided(t)(o.Decide(0, []int{8}, []JobView{waitingJob(1, 2), waitingJob(2, 2), waitingJob(3, 2)}, nil))
	require.Len(t, d.Start, 3)
	// Jobs 1 and 2 on server 0, job 3 on server 1: two GPUs free on server 1.
	running := []JobView{
		{ID: 1, ScaleFactor: 2, Type: 0, Throughput: []float64{1}},
		{ID: 3, ScaleFactor: 2, Type: 0, Throughput: []float64{1}},
	}
	// Job 2 finished: 2 free on each server.
	d = decided(t)(o.Decide(5, []int{4}, []JobView{waitingJob(4, 4), waitingJob(5, 2)}, running))
	require.Len(t, d.Start, 1, "job 4 rolled back, job 5 started")
	assert.Equal(t, 5, d.Start[0].JobID)
	assert.Nil(t, o.Placement(4))
	// Without Strict the 4-GPU job spreads over both servers.
	o2 := &OnServers{Inner: Priority{Order: ByArrival{}, NoPreemption: true, Backfill: NoBackfill}, Cluster: c}
	decided(t)(o2.Decide(0, []int{8}, []JobView{waitingJob(1, 2), waitingJob(2, 2), waitingJob(3, 2)}, nil))
	d = decided(t)(o2.Decide(5, []int{4}, []JobView{waitingJob(4, 4)}, running))
	require.Len(t, d.Start, 1)
	assert.Len(t, o2.Placement(4), 2)
}

// A placer that returns busy or wrong GPUs is refused, not trusted.
type badPlacer struct{ set GPUSet }

func (b badPlacer) Place(*topology.Cluster, [][]bool, topology.GPUType, int) (GPUSet, error) {
	return b.set, nil
}

func TestBadPlacerRolledBack(t *testing.T) {
	c := twoServers(t)
	for _, set := range []GPUSet{{0: {0, 0}}, {0: {7, 1}}, {5: {0, 1}}, {0: {0}}} {
		o := &OnServers{Inner: Priority{Order: ByArrival{}, NoPreemption: true, Backfill: NoBackfill}, Cluster: c, Placer: badPlacer{set}}
		d := decided(t)(o.Decide(0, []int{8}, []JobView{waitingJob(1, 2)}, nil))
		assert.Empty(t, d.Start, "%v", set)
	}
}

// Two gangs that each fit only a whole server, with one GPU free on each
// server: neither holds part of the cluster while it waits (so neither
// blocks the other), and each starts whole as a server empties.
func TestCompetingGangsNoDeadlock(t *testing.T) {
	c := twoServers(t)
	o := &OnServers{Inner: Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Greedy}, Cluster: c, Placer: Consolidated{Strict: true}}
	d := decided(t)(o.Decide(0, []int{8}, []JobView{waitingJob(1, 3), waitingJob(2, 3)}, nil))
	require.Len(t, d.Start, 2)
	run := func(ids ...int) []JobView {
		var r []JobView
		for _, id := range ids {
			r = append(r, JobView{ID: id, ScaleFactor: 3, Type: 0, Throughput: []float64{1}})
		}
		return r
	}
	d = decided(t)(o.Decide(1, []int{2}, []JobView{waitingJob(3, 2), waitingJob(4, 2)}, run(1, 2)))
	assert.Empty(t, d.Start, "two free GPUs on different servers hold neither gang")
	assert.Nil(t, o.Placement(3))
	assert.Nil(t, o.Placement(4))
	// Job 1 ends: its server has 4 free GPUs, and both gangs start whole
	// there.
	d = decided(t)(o.Decide(2, []int{5}, []JobView{waitingJob(3, 2), waitingJob(4, 2)}, run(2)))
	require.Len(t, d.Start, 2)
	for _, id := range []int{3, 4} {
		p := o.Placement(id)
		require.Len(t, p, 1, "gang %d on one server", id)
		for _, gpus := range p {
			assert.Len(t, gpus, 2)
		}
	}
}

// With a shared live state, GPUs that others hold or that failed are not
// free to OnServers, and its jobs show up in the state under their IDs.
func TestOnServersSharedState(t *testing.T) {
	st, err := cluster.New(twoServers(t))
	require.NoError(t, err)
	require.NoError(t, st.Bind("pod-x", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}}))
	_, err = st.Fail(cluster.GPURef{Server: 1, GPU: 3})
	require.NoError(t, err)
	o := &OnServers{Inner: Priority{Order: ByArrival{}, NoPreemption: true, Backfill: Greedy}, State: st, Placer: Consolidated{Strict: true}}
	assert.Equal(t, []int{7}, o.Capacity())
	d := decided(t)(o.Decide(0, []int{7}, []JobView{waitingJob(1, 4), waitingJob(2, 3), waitingJob(3, 2)}, nil))
	// Job 1 (4 GPUs) fits no server whole; job 2 takes server 1's three
	// healthy GPUs; job 3 takes the two left on server 0.
	require.Len(t, d.Start, 2)
	assert.Equal(t, GPUSet{1: {0, 1, 2}}, o.Placement(2))
	assert.Equal(t, GPUSet{0: {2, 3}}, o.Placement(3))
	assert.Len(t, st.Held("2"), 3)
	assert.Equal(t, 0, st.Free(topology.V100))
	require.NoError(t, st.Check())
	// Job 2 ends: its GPUs return to the shared state.
	d = decided(t)(o.Decide(1, []int{3}, nil, []JobView{{ID: 3, ScaleFactor: 2, Type: 0, Throughput: []float64{1}}}))
	assert.Empty(t, d.Start)
	assert.Equal(t, 3, st.Free(topology.V100))
	assert.Nil(t, o.Placement(2))

	bad := &OnServers{Inner: Priority{Order: ByArrival{}, Backfill: NoBackfill}, Cluster: &topology.Cluster{Servers: []topology.Server{{ID: "x"}}}}
	require.ErrorIs(t, bad.Err(), ErrInvalid)
	_, err = bad.Decide(0, []int{0}, []JobView{waitingJob(1, 1)}, nil)
	require.ErrorIs(t, err, ErrInvalid)
}

// waking starts the waiting jobs (FIFO) and asks to be woken at wake.
type waking struct{ wake float64 }

func (w waking) Decide(now float64, free []int, waiting, running []JobView) (Decision, error) {
	d, err := FIFO{}.Decide(now, free, waiting, running)
	d.Wake = w.wake
	return d, err
}

// OnServers passes its inner scheduler's wake on (Decision.Wake).
func TestOnServersWake(t *testing.T) {
	o := &OnServers{Inner: waking{wake: 500}, Cluster: twoServers(t)}
	d, err := o.Decide(10, []int{8}, []JobView{waitingJob(1, 2)}, nil)
	require.NoError(t, err)
	assert.Len(t, d.Start, 1)
	assert.Equal(t, 500.0, d.Wake)
}
