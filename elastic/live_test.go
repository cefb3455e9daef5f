package elastic

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/cluster"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maker builds a training cluster of n servers of g GPUs, as NewCluster.
type maker func(n, g int) (*Cluster, error)

// onLive builds the cluster on a fresh live state of n servers of g GPUs.
func onLive(n, g int) (*Cluster, error) {
	shape := topology.ServerTemplate{Type: topology.V100, GPUs: g}
	if n == 0 {
		live, err := cluster.New(nil)
		if err != nil {
			return nil, err
		}
		return NewClusterOn(live, nil, shape)
	}
	topo, err := topology.Homogeneous(n, shape)
	if err != nil {
		return nil, err
	}
	live, err := cluster.New(topo)
	if err != nil {
		return nil, err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = topo.Servers[i].ID
	}
	return NewClusterOn(live, ids, shape)
}

// bothModes runs a cluster test on a state of the cluster's own
// (NewCluster) and on a shared one (NewClusterOn): the cluster decides the
// same way on both.
func bothModes(t *testing.T, test func(*testing.T, maker)) {
	t.Run("own state", func(t *testing.T) { test(t, NewCluster) })
	t.Run("shared state", func(t *testing.T) { test(t, onLive) })
}

// On a shared live state, GPUs held by others or failed are not free to
// the cluster: it places around them, sees them come back, and never
// touches them.
func TestClusterOnSharedState(t *testing.T) {
	topo, err := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	require.NoError(t, err)
	live, err := cluster.New(topo)
	require.NoError(t, err)
	c, err := NewClusterOn(live, []string{topo.Servers[0].ID, topo.Servers[1].ID}, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	require.NoError(t, err)
	require.NoError(t, live.Bind("inference", []cluster.GPURef{{Server: 0, GPU: 0}, {Server: 0, GPU: 1}, {Server: 0, GPU: 2}}))
	_, err = live.Fail(cluster.GPURef{Server: 1, GPU: 3})
	require.NoError(t, err)

	j := &Job{ID: 1, MinWorkers: 2, MaxWorkers: 8, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	n, err := c.Place(j, 8)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "1 free on server 0, 3 on server 1")
	assert.ElementsMatch(t, []Part{{Server: 1, Workers: 2}, {Server: 1, Workers: 1, Flexible: true}, {Server: 0, Workers: 1, Flexible: true}}, c.Parts(1))
	require.NoError(t, c.Check())
	for _, r := range live.Held(HolderKey(1)) {
		assert.NotEqual(t, "inference", live.Holder(r))
		assert.False(t, live.Failed(r))
	}
	total, free := c.GPUs()
	assert.Equal(t, [2]int{8, 0}, [2]int{total, free})

	// Inference lets go and the GPU recovers: the job grows into them.
	live.Release("inference")
	require.NoError(t, live.Recover(cluster.GPURef{Server: 1, GPU: 3}))
	n, err = c.Resize(j, 8)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	require.NoError(t, c.Check())
	assert.Equal(t, 0, live.Free(topology.V100))

	// A GPU of the job fails: the job keeps it until released, and
	// FailedJobs names it.
	assert.Empty(t, c.FailedJobs())
	private, err := NewCluster(1, 4)
	require.NoError(t, err)
	assert.Nil(t, private.FailedJobs())
	require.NotNil(t, private.State())
	assert.Equal(t, 4, private.State().Free(TrainGPUType))
	hit := live.Held(HolderKey(1))[0]
	holders, err := live.Fail(hit)
	require.NoError(t, err)
	assert.Equal(t, []string{HolderKey(1)}, holders)
	assert.Equal(t, []int{1}, c.FailedJobs())
	require.NoError(t, c.Check())
	c.Release(1)
	assert.Equal(t, 7, live.Free(topology.V100), "the failed GPU stays out")
	require.NoError(t, live.Recover(hit))
	assert.Empty(t, c.FailedJobs())
	assert.Equal(t, 8, live.Free(topology.V100))
	assert.Equal(t, 0, live.NumHolders())
	require.NoError(t, c.Check())
}

// Others bind GPUs between the cluster's calls, then a job is released:
// the cluster still sees those GPUs as others' (Release used to mark its
// counts in sync without reading the change, so it counted them free and
// the next Place failed with ErrInconsistent instead of placing around
// them).
func TestClusterOnReleaseReadsOthersChanges(t *testing.T) {
	shape := topology.ServerTemplate{Type: topology.V100, GPUs: 4}
	topo, err := topology.Homogeneous(2, shape)
	require.NoError(t, err)
	live, err := cluster.New(topo)
	require.NoError(t, err)
	c, err := NewClusterOn(live, []string{topo.Servers[0].ID, topo.Servers[1].ID}, shape)
	require.NoError(t, err)
	_, err = c.Place(&Job{ID: 1, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}, 1)
	require.NoError(t, err)
	require.NoError(t, live.Bind("inference", []cluster.GPURef{{Server: 1, GPU: 0}, {Server: 1, GPU: 1}, {Server: 1, GPU: 2}}))
	total, free := c.GPUs()
	assert.Equal(t, [2]int{8, 4}, [2]int{total, free}, "a query reads the change too")
	c.Release(1)
	total, free = c.GPUs()
	assert.Equal(t, [2]int{8, 5}, [2]int{total, free}, "3 of the 8 are inference's")
	n, err := c.Place(&Job{ID: 2, MinWorkers: 1, MaxWorkers: 8, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}, 8)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	require.NoError(t, c.Check())
	assert.Equal(t, 0, live.Free(topology.V100))
}

// Bad input and a live state changed behind the cluster's back give typed
// errors.
func TestClusterOnErrors(t *testing.T) {
	topo, err := topology.Homogeneous(2, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	require.NoError(t, err)
	other, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.A100, GPUs: 8})
	require.NoError(t, err)
	topo.Servers = append(topo.Servers, other.Servers...)
	live, err := cluster.New(topo)
	require.NoError(t, err)
	ids := []string{topo.Servers[0].ID, topo.Servers[1].ID}

	v100 := topology.ServerTemplate{Type: topology.V100, GPUs: 4}
	for name, training := range map[string][]string{
		"unknown": {"nope"}, "twice": {ids[0], ids[0]}, "sizes": {ids[0], topo.Servers[2].ID},
	} {
		_, err := NewClusterOn(live, training, v100)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	_, err = NewClusterOn(live, ids, topology.ServerTemplate{Type: topology.V100})
	require.ErrorIs(t, err, ErrInvalid)
	// Training servers of the shape's size and another type.
	_, err = NewClusterOn(live, ids, topology.ServerTemplate{Type: topology.A100, GPUs: 4})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `training server "v100-0" has GPU 0 of type "v100", the cluster's servers are of type "a100"`)
	_, err = NewClusterOn(live, ids, topology.ServerTemplate{Type: "", GPUs: 4})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, err, topology.ErrInvalidGPUType)
	c, err := NewClusterOn(live, ids, v100)
	require.NoError(t, err)
	// A loaned server of the wrong size, or one the state already has.
	_, err = c.LoanServers([]topology.Server{topo.Servers[2]})
	require.ErrorIs(t, err, ErrInvalid)
	// Or one of the right size and another GPU type.
	a100, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.A100, GPUs: 4})
	require.NoError(t, err)
	a100.Servers[0].ID = "a100-loan"
	_, err = c.LoanServers([]topology.Server{a100.Servers[0]})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `loaned server "a100-loan" has GPU 0 of type "a100", the cluster's servers are of type "v100"`)
	assert.Equal(t, 3, live.NumServers(), "nothing added")
	_, err = c.LoanServers([]topology.Server{c.loanShape(9), topo.Servers[0]})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, err, cluster.ErrDuplicateServer)
	assert.Equal(t, 3, live.NumServers(), "nothing added")
	_, err = c.Loan(MaxLiveGPUs / 4)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, 3, live.NumServers(), "nothing added")
	// A holder key in use.
	require.NoError(t, live.Bind(HolderKey(5), []cluster.GPURef{{Server: 2, GPU: 0}}))
	_, err = c.Place(&Job{ID: 5, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}, 1)
	require.ErrorIs(t, err, ErrInvalid)
	// Someone releases the cluster's GPUs, or removes its server.
	j := &Job{ID: 6, MinWorkers: 2, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	_, err = c.Place(j, 2)
	require.NoError(t, err)
	live.Release(HolderKey(6))
	require.ErrorIs(t, c.Check(), ErrInconsistent)
	_, err = c.Resize(j, 2)
	require.ErrorIs(t, err, ErrInconsistent)
	_, err = live.RemoveServer(ids[1])
	require.NoError(t, err)
	_, err = c.Loan(1)
	require.ErrorIs(t, err, ErrInconsistent)
}

// On a live state the cluster knows the topology inside a server: on a
// DGX-1 (hybrid cube mesh) where others hold GPUs 1 to 4, GPU 0 reaches
// the free 5, 6 and 7 only across sockets, so a 2-GPU worker takes an
// NVLinked pair among 5, 6, 7, not the lowest free positions 0 and 5.
func TestClusterOnTopologyAware(t *testing.T) {
	shape := topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh}
	topo, err := topology.Homogeneous(1, shape)
	require.NoError(t, err)
	live, err := cluster.New(topo)
	require.NoError(t, err)
	require.Equal(t, topology.LinkCrossSocket, topo.Servers[0].Link(0, 5).Class)
	var others []cluster.GPURef
	for g := 1; g <= 4; g++ {
		others = append(others, cluster.GPURef{Server: 0, GPU: g})
	}
	require.NoError(t, live.Bind("others", others))
	c, err := NewClusterOn(live, []string{topo.Servers[0].ID}, shape)
	require.NoError(t, err)
	j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 2, Work: 1, Curve: Linear{1}}
	_, err = c.Place(j, 1)
	require.NoError(t, err)
	held := live.Held(HolderKey(1))
	require.Len(t, held, 2)
	assert.NotEqual(t, 0, held[0].GPU)
	assert.NotEqual(t, 0, held[1].GPU)
	assert.Equal(t, topology.LinkNVLink, topo.Servers[0].Link(held[0].GPU, held[1].GPU).Class)
	require.NoError(t, c.Check())
}

// On a server whose GPU pairs all score alike, a worker's GPUs are the
// lowest free positions, as placement.GPUChooser picks them worker by
// worker (its tie-break), so the shortcut changes no GPU a job gets; other
// servers go through the chooser.
func TestUniformServersTakeLowestFree(t *testing.T) {
	shape := func(ty topology.GPUType, n int, ic topology.Interconnect) *topology.Server {
		c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: ty, GPUs: n, Interconnect: ic})
		require.NoError(t, err)
		return &c.Servers[0]
	}
	bare := *shape(topology.V100, 8, "")
	bare.Links = nil
	for _, tc := range []struct {
		name    string
		s       *topology.Server
		uniform bool
	}{
		{"no links", &bare, true},
		{"pcie", shape(topology.V100, 8, topology.PCIe), true},
		{"pcie 16", shape(topology.A100, 16, topology.PCIe), true},
		{"nvswitch", shape(topology.A100, 8, topology.NVSwitch), true},
		{"nvlink:2", shape(topology.V100, 4, "nvlink:2"), true},
		{"one GPU", shape(topology.V100, 1, ""), true},
		{"dgx-1", shape(topology.V100, 8, topology.HybridCubeMesh), false},
		{"k80 boards", shape(topology.K80, 8, topology.PCIe), false},
		{"dual socket", shape(topology.V100, 8, topology.PCIeDualSocket), false},
	} {
		require.Equal(t, tc.uniform, uniformLinks(tc.s), tc.name)
		if !tc.uniform {
			continue
		}
		n := len(tc.s.GPUs)
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		for range 200 {
			mask := make([]bool, n)
			nfree := 0
			for i := range mask {
				mask[i] = rng.IntN(3) > 0
				if mask[i] {
					nfree++
				}
			}
			gpw := 1 + rng.IntN(n)
			workers := nfree / gpw
			if workers == 0 {
				continue
			}
			var want []int
			chooser := slices.Clone(mask)
			for range workers {
				gpus, err := placement.GPUChooser{}.Choose(tc.s, chooser, gpw)
				require.NoError(t, err)
				for _, g := range gpus {
					chooser[g] = false
				}
				want = append(want, gpus...)
			}
			slices.Sort(want)
			var got []int
			for g, free := range mask {
				if free && len(got) < workers*gpw {
					got = append(got, g)
				}
			}
			require.Equal(t, want, got, "%s: %d workers of %d on %v", tc.name, workers, gpw, mask)
		}
	}
}

// A GPU of a job fails and the job lets go of it (Release, or a Resize that
// shrinks off it): the failed GPU is neither free nor the job's, so the
// cluster counts it as others' (it counted it free: GPUs() said 4 free of
// 4 with 3 free in the state, and the next Place of 4 GPUs failed with
// ErrInconsistent, while one of 3 went on and left the counts 1 above the
// state's with Check silent).
func TestClusterFailedGPUReleased(t *testing.T) {
	one := func(id, gpw int) *Job {
		return &Job{ID: id, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: gpw, Work: 1, Curve: Linear{1}}
	}
	t.Run("release", func(t *testing.T) {
		c, err := NewCluster(1, 4)
		require.NoError(t, err)
		st := c.State()
		_, err = c.Place(one(1, 4), 1)
		require.NoError(t, err)
		_, err = st.Fail(cluster.GPURef{Server: 0, GPU: 0})
		require.NoError(t, err)
		total, free := c.GPUs()
		assert.Equal(t, [2]int{4, 0}, [2]int{total, free})
		assert.Equal(t, []int{1}, c.FailedJobs())
		c.Release(1)
		total, free = c.GPUs()
		assert.Equal(t, [2]int{4, 3}, [2]int{total, free}, "the failed GPU is not free")
		assert.Equal(t, 3, st.Free(TrainGPUType))
		require.NoError(t, c.Check())
		_, err = c.Place(one(2, 4), 1)
		require.ErrorIs(t, err, ErrUnplaceable, "3 GPUs free, not 4")
		_, err = c.Place(one(3, 3), 1)
		require.NoError(t, err)
		total, free = c.GPUs()
		assert.Equal(t, [2]int{4, 0}, [2]int{total, free})
		require.NoError(t, c.Check())
		// The GPU recovers: free again.
		require.NoError(t, st.Recover(cluster.GPURef{Server: 0, GPU: 0}))
		_, free = c.GPUs()
		assert.Equal(t, 1, free)
		require.NoError(t, c.Check())
	})
	t.Run("resize", func(t *testing.T) {
		c, err := NewCluster(1, 4)
		require.NoError(t, err)
		st := c.State()
		j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 4, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
		_, err = c.Place(j, 4)
		require.NoError(t, err)
		// Shrinking releases the job's last bound GPUs first: fail one of them.
		held := st.Held(HolderKey(1))
		_, err = st.Fail(held[len(held)-1])
		require.NoError(t, err)
		n, err := c.Resize(j, 2)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		_, free := c.GPUs()
		assert.Equal(t, 1, free, "of the 2 let go, one failed")
		assert.Equal(t, 1, st.Free(TrainGPUType))
		require.NoError(t, c.Check())
		_, err = c.Place(one(2, 2), 1)
		require.ErrorIs(t, err, ErrUnplaceable)
		_, err = c.Place(one(3, 1), 1)
		require.NoError(t, err)
		require.NoError(t, c.Check())
	})
	t.Run("shared state", func(t *testing.T) {
		shape := topology.ServerTemplate{Type: topology.V100, GPUs: 4}
		topo, err := topology.Homogeneous(2, shape)
		require.NoError(t, err)
		live, err := cluster.New(topo)
		require.NoError(t, err)
		require.NoError(t, live.Bind("inference", []cluster.GPURef{{Server: 0, GPU: 0}}))
		c, err := NewClusterOn(live, []string{topo.Servers[0].ID, topo.Servers[1].ID}, shape)
		require.NoError(t, err)
		j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 3, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
		_, err = c.Place(&Job{ID: 9, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 4, Work: 1, Curve: Linear{1}}, 1)
		require.NoError(t, err) // server 1 whole
		n, err := c.Place(j, 3)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		held := live.Held(HolderKey(1))
		_, err = live.Fail(held[len(held)-1], held[0])
		require.NoError(t, err)
		n, err = c.Resize(j, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, free := c.GPUs()
		assert.Equal(t, 1, free, "server 0: inference 1, failed 1 let go, job 1, free 1")
		require.NoError(t, c.Check())
		c.Release(1) // its last GPU failed too
		_, free = c.GPUs()
		assert.Equal(t, 1, free)
		assert.Equal(t, 1, live.Free(topology.V100))
		require.NoError(t, c.Check())
		_, err = c.Place(&Job{ID: 2, MinWorkers: 2, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}, 2)
		require.ErrorIs(t, err, ErrUnplaceable)
	})
}

// Check compares the counts with the live state, so that drift between
// them is caught (it only checked the counts against one another).
func TestClusterCheckComparesLiveState(t *testing.T) {
	c, err := NewCluster(2, 4)
	require.NoError(t, err)
	_, err = c.Place(&Job{ID: 1, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 2, Work: 1, Curve: Linear{1}}, 1)
	require.NoError(t, err)
	require.NoError(t, c.Check())
	// Counts that agree with one another, not with the state.
	c.servers[1].free--
	c.servers[1].other++
	require.ErrorIs(t, c.Check(), ErrInconsistent)
	c.servers[1].free++
	c.servers[1].other--
	require.NoError(t, c.Check())
	// A training server removed behind the cluster's back.
	_, err = c.State().RemoveServer(c.ServerID(1))
	require.NoError(t, err)
	require.ErrorIs(t, c.Check(), ErrInconsistent)
}
