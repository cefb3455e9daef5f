package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mixed: 2 servers of 4 V100, 1 of 8 K80, 1 server with 2 A100 + 2 T4.
func mixed(t *testing.T) *State {
	t.Helper()
	c, err := topology.ParseCompact("v100:8:4,k80:8:8", 4)
	require.NoError(t, err)
	c.Servers = append(c.Servers, topology.Server{ID: "mix", GPUs: []topology.GPU{
		{Index: 0, Type: topology.A100, MemoryMiB: 40960}, {Index: 1, Type: topology.A100, MemoryMiB: 40960},
		{Index: 2, Type: topology.T4, MemoryMiB: 16384}, {Index: 3, Type: topology.T4, MemoryMiB: 16384},
	}})
	st, err := New(c)
	require.NoError(t, err)
	require.NoError(t, st.Check())
	return st
}

func TestNewCounts(t *testing.T) {
	st := mixed(t)
	assert.Equal(t, []topology.GPUType{topology.A100, topology.K80, topology.T4, topology.V100}, st.Types())
	assert.Equal(t, 8, st.Free(topology.V100))
	assert.Equal(t, 8, st.Capacity(topology.K80))
	assert.Equal(t, 2, st.Total(topology.T4))
	assert.Equal(t, 0, st.Free("h100"))
	assert.Equal(t, []int{8, 8, 0}, st.FreeCounts([]topology.GPUType{topology.V100, topology.K80, topology.H100}, nil))
	s, ok := st.ServerIndex("mix")
	require.True(t, ok)
	assert.Equal(t, 3, s)
	assert.Equal(t, 4, st.ServerFree(s))
	assert.Equal(t, 2, st.ServerFreeOf(s, topology.T4))
	assert.Equal(t, 0, st.ServerFreeOf(s, topology.V100))
	assert.Equal(t, 4, st.NumServers())
	assert.Equal(t, "mix", st.Server(s).ID)
	r, err := st.Lookup("mix", 2)
	require.NoError(t, err)
	assert.Equal(t, GPURef{3, 2}, r)
	_, err = st.Lookup("mix", 9)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = st.Lookup("nope", 0)
	assert.ErrorIs(t, err, ErrUnknownServer)

	empty, err := New(nil)
	require.NoError(t, err)
	assert.Empty(t, empty.Types())
	assert.Equal(t, 0, empty.Free(topology.V100))
	require.NoError(t, empty.Check())
	_, ok = empty.BestFit(topology.V100, 1)
	assert.False(t, ok)

	_, err = New(&topology.Cluster{Servers: []topology.Server{{ID: "x"}}})
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, topology.ErrInvalidCount, "the topology kind comes through")
}

// Bind is all or nothing: any bad GPU leaves the state as it was.
func TestBindAllOrNothing(t *testing.T) {
	st := mixed(t)
	require.NoError(t, st.Bind("a", []GPURef{{0, 0}, {0, 1}}))
	_, err := st.Fail(GPURef{1, 0})
	require.NoError(t, err)
	gen := st.Generation()
	for _, tc := range []struct {
		name   string
		holder string
		gpus   []GPURef
		kind   error
	}{
		{"busy", "b", []GPURef{{0, 2}, {0, 1}}, ErrBusy},
		{"busy by itself", "a", []GPURef{{0, 1}}, ErrBusy},
		{"failed", "b", []GPURef{{0, 2}, {1, 0}}, ErrFailed},
		{"server out of range", "b", []GPURef{{0, 2}, {9, 0}}, ErrInvalid},
		{"gpu out of range", "b", []GPURef{{0, 2}, {0, 4}}, ErrInvalid},
		{"negative", "b", []GPURef{{-1, 0}}, ErrInvalid},
		{"twice", "b", []GPURef{{0, 2}, {0, 2}}, ErrInvalid},
		{"empty holder", "", []GPURef{{0, 2}}, ErrInvalid},
		{"long holder", string(make([]byte, MaxHolderLen+1)), []GPURef{{0, 2}}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := st.Bind(tc.holder, tc.gpus)
			require.ErrorIs(t, err, tc.kind)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "bind", e.Op)
			assert.Equal(t, gen, st.Generation(), "nothing changed")
			assert.Equal(t, 5, st.Free(topology.V100))
			assert.Empty(t, st.Held("b"))
			require.NoError(t, st.Check())
		})
	}
	err = st.Bind("b", []GPURef{{0, 1}})
	assert.Contains(t, err.Error(), `server "v100-0" gpu 1`)
	assert.Contains(t, err.Error(), `held by "a"`)
}

func TestBindRelease(t *testing.T) {
	st := mixed(t)
	require.NoError(t, st.Bind("a", []GPURef{{0, 0}, {0, 1}}))
	require.NoError(t, st.Bind("a", []GPURef{{1, 3}}))
	require.NoError(t, st.Bind("a", nil), "an empty bind is a no-op")
	assert.Equal(t, []GPURef{{0, 0}, {0, 1}, {1, 3}}, st.Held("a"))
	assert.Equal(t, "a", st.Holder(GPURef{1, 3}))
	assert.Equal(t, 5, st.Free(topology.V100))
	assert.Equal(t, 2, st.ServerFree(0))
	assert.Equal(t, 1, st.NumHolders())
	assert.False(t, st.FreeMasks()[0][0])

	assert.ErrorIs(t, st.ReleaseGPUs("a", []GPURef{{0, 2}}), ErrNotHeld)
	assert.ErrorIs(t, st.ReleaseGPUs("a", []GPURef{{0, 0}, {0, 0}}), ErrInvalid)
	assert.ErrorIs(t, st.ReleaseGPUs("a", []GPURef{{0, 0}, {7, 0}}), ErrInvalid)
	assert.Equal(t, 5, st.Free(topology.V100), "failed releases change nothing")
	require.NoError(t, st.ReleaseGPUs("a", []GPURef{{0, 1}}))
	assert.Equal(t, []GPURef{{0, 0}, {1, 3}}, st.Held("a"))
	assert.Equal(t, 6, st.Free(topology.V100))
	require.NoError(t, st.Check())

	assert.Equal(t, 2, st.Release("a"))
	assert.Equal(t, 0, st.Release("a"))
	assert.Nil(t, st.Held("a"))
	assert.Equal(t, 8, st.Free(topology.V100))
	require.NoError(t, st.ReleaseGPUs("b", nil))
	require.NoError(t, st.Bind("b", []GPURef{{2, 0}}))
	require.NoError(t, st.ReleaseGPUs("b", []GPURef{{2, 0}}))
	assert.Equal(t, 0, st.NumHolders(), "a holder left with nothing is forgotten")
	require.NoError(t, st.Check())
}

// A failed GPU stays with its holder; released, it stays out of the pool
// until it recovers.
func TestFailRecover(t *testing.T) {
	st := mixed(t)
	require.NoError(t, st.Bind("a", []GPURef{{0, 0}, {0, 1}}))
	require.NoError(t, st.Bind("b", []GPURef{{0, 2}}))
	cg := st.CapacityGeneration()
	affected, err := st.Fail(GPURef{0, 1}, GPURef{0, 2}, GPURef{0, 3})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, affected)
	assert.Equal(t, cg+1, st.CapacityGeneration())
	assert.Equal(t, 5, st.Capacity(topology.V100))
	assert.Equal(t, 4, st.Free(topology.V100))
	assert.Equal(t, "a", st.Holder(GPURef{0, 1}), "still held")
	assert.True(t, st.Failed(GPURef{0, 1}))
	affected, err = st.Fail(GPURef{0, 1})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, affected)
	assert.Equal(t, cg+1, st.CapacityGeneration(), "failing a failed GPU changes nothing")
	_, err = st.Fail(GPURef{0, 9})
	assert.ErrorIs(t, err, ErrInvalid)

	st.Release("a")
	assert.Equal(t, 5, st.Free(topology.V100), "GPU 0 is free again, GPU 1 is failed")
	require.NoError(t, st.Recover(GPURef{0, 1}, GPURef{0, 2}, GPURef{0, 3}))
	assert.Equal(t, 7, st.Free(topology.V100), "GPU 2 is still held by b")
	assert.Equal(t, 8, st.Capacity(topology.V100))
	require.NoError(t, st.Check())

	affected, err = st.FailServer("v100-0")
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, affected)
	assert.Equal(t, 4, st.Capacity(topology.V100))
	require.NoError(t, st.RecoverServer("v100-0"))
	_, err = st.FailServer("x")
	assert.ErrorIs(t, err, ErrUnknownServer)
	assert.ErrorIs(t, st.RecoverServer("x"), ErrUnknownServer)
	require.NoError(t, st.Check())
}

func TestAddRemoveServer(t *testing.T) {
	st := mixed(t)
	require.NoError(t, st.Bind("a", []GPURef{{0, 0}, {2, 0}}))
	require.NoError(t, st.Bind("b", []GPURef{{1, 0}}))
	require.NoError(t, st.Bind("c", []GPURef{{3, 0}}))
	cg := st.CapacityGeneration()

	affected, err := st.RemoveServer("v100-1")
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, affected)
	assert.Nil(t, st.Held("b"), "b held only GPUs of the removed server")
	assert.Equal(t, []GPURef{{0, 0}, {1, 0}}, st.Held("a"), "a's K80 moved down one position")
	assert.Equal(t, []GPURef{{2, 0}}, st.Held("c"))
	assert.Equal(t, 4, st.Total(topology.V100))
	assert.Equal(t, 3, st.Free(topology.V100))
	assert.Equal(t, cg+1, st.CapacityGeneration())
	_, ok := st.ServerIndex("v100-1")
	assert.False(t, ok)
	require.NoError(t, st.Check())
	_, err = st.RemoveServer("v100-1")
	assert.ErrorIs(t, err, ErrUnknownServer)

	// The only T4 server goes: the type disappears from Types.
	_, err = st.RemoveServer("mix")
	require.NoError(t, err)
	assert.Equal(t, []topology.GPUType{topology.K80, topology.V100}, st.Types())
	require.NoError(t, st.Check())

	// A larger server of a new type, and a larger server of a known one.
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.H100, GPUs: 8, Interconnect: topology.NVSwitch})
	require.NoError(t, err)
	p, err := st.AddServer(c.Servers[0])
	require.NoError(t, err)
	assert.Equal(t, 2, p)
	big := topology.Server{ID: "v100-big"}
	for i := range 16 {
		big.GPUs = append(big.GPUs, topology.GPU{Index: i, Type: topology.V100, MemoryMiB: 16384, UUID: fmt.Sprintf("GPU-%d", i)})
	}
	p, err = st.AddServer(big)
	require.NoError(t, err)
	assert.Equal(t, 3, p)
	assert.Equal(t, 19, st.Free(topology.V100))
	assert.Equal(t, 16, st.LargestServer(topology.V100))
	assert.Equal(t, 0, st.LargestServer(topology.T4))
	s, ok := st.BestFit(topology.V100, 12)
	require.True(t, ok)
	assert.Equal(t, 3, s)
	assert.Equal(t, []topology.GPUType{topology.H100, topology.K80, topology.V100}, st.Types())
	require.NoError(t, st.Check())

	_, err = st.AddServer(big)
	assert.ErrorIs(t, err, ErrDuplicateServer)
	big.ID = "other"
	_, err = st.AddServer(big)
	assert.ErrorIs(t, err, ErrDuplicateServer, "UUIDs must be new")
	_, err = st.AddServer(topology.Server{ID: "bad", GPUs: []topology.GPU{{Type: "V 100", MemoryMiB: 1}}})
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, topology.ErrInvalidGPUType)
	require.NoError(t, st.Check())
}

// A long random sequence of operations against brute-force recounts; the
// index agrees with a sort of the servers after every step.
func TestRandomOperations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []topology.GPUType{topology.V100, topology.A100, topology.K80}
	newServer := func(id string) topology.Server {
		s := topology.Server{ID: id}
		n := 1 + rng.IntN(8)
		for i := range n {
			typ := types[rng.IntN(len(types))]
			if rng.IntN(4) > 0 && i > 0 {
				typ = s.GPUs[0].Type
			}
			s.GPUs = append(s.GPUs, topology.GPU{Index: i, Type: typ, MemoryMiB: 1024})
		}
		return s
	}
	st, err := New(nil)
	require.NoError(t, err)
	next := 0
	for range 40 {
		_, err := st.AddServer(newServer(fmt.Sprint("s", next)))
		require.NoError(t, err)
		next++
	}
	randomRef := func() GPURef {
		s := rng.IntN(st.NumServers())
		return GPURef{s, rng.IntN(len(st.Server(s).GPUs))}
	}
	for step := range 3000 {
		gen := st.Generation()
		switch op := rng.IntN(10); {
		case op < 4:
			var refs []GPURef
			for range 1 + rng.IntN(4) {
				refs = append(refs, randomRef())
			}
			holder := fmt.Sprint("h", rng.IntN(30))
			ok := true
			for i, r := range refs {
				ok = ok && st.Holder(r) == "" && !st.Failed(r) && !slices.Contains(refs[:i], r)
			}
			err := st.Bind(holder, refs)
			require.Equal(t, ok, err == nil, "step %d: %v", step, err)
			if !ok {
				require.Equal(t, gen, st.Generation())
			}
		case op < 6:
			st.Release(fmt.Sprint("h", rng.IntN(30)))
		case op < 7:
			h := fmt.Sprint("h", rng.IntN(30))
			if held := st.Held(h); len(held) > 0 {
				require.NoError(t, st.ReleaseGPUs(h, []GPURef{held[rng.IntN(len(held))]}))
			}
		case op < 8:
			r := randomRef()
			affected, err := st.Fail(r)
			require.NoError(t, err)
			if h := st.Holder(r); h != "" {
				require.Equal(t, []string{h}, affected)
			}
		case op < 9:
			require.NoError(t, st.Recover(randomRef()))
		default:
			if rng.IntN(2) == 0 && st.NumServers() > 1 {
				id := st.Server(rng.IntN(st.NumServers())).ID
				_, err := st.RemoveServer(id)
				require.NoError(t, err)
			} else {
				_, err := st.AddServer(newServer(fmt.Sprint("s", next)))
				require.NoError(t, err)
				next++
			}
		}
		require.NoError(t, st.Check(), "step %d", step)
		checkIndex(t, st)
	}
}

// checkIndex compares BestFit and ByFree with brute force.
func checkIndex(t *testing.T, st *State) {
	t.Helper()
	for _, typ := range st.Types() {
		type sf struct{ s, f int }
		var all []sf
		total := 0
		for s := range st.NumServers() {
			f := 0
			for i, g := range st.Server(s).GPUs {
				if g.Type == typ && st.FreeMask(s)[i] {
					f++
				}
			}
			require.Equal(t, f, st.ServerFreeOf(s, typ))
			if f > 0 {
				all = append(all, sf{s, f})
				total += f
			}
		}
		require.Equal(t, total, st.Free(typ))
		slices.SortStableFunc(all, func(a, b sf) int { return cmp.Compare(b.f, a.f) })
		var got []sf
		for s, f := range st.ByFree(typ) {
			got = append(got, sf{s, f})
		}
		require.Equal(t, len(all), len(got))
		if len(all) > 0 {
			require.Equal(t, all, got)
		}
		var fits []sf
		for s, f := range st.FitAtLeast(typ, 3) {
			fits = append(fits, sf{s, f})
		}
		var wantFits []sf
		for _, x := range all {
			if x.f >= 3 {
				wantFits = append(wantFits, x)
			}
		}
		slices.SortStableFunc(wantFits, func(a, b sf) int { return cmp.Or(cmp.Compare(a.f, b.f), cmp.Compare(a.s, b.s)) })
		require.Equal(t, wantFits, fits)
		for n := 1; n <= 9; n++ {
			want, found := -1, false
			for _, x := range all {
				if x.f >= n && (!found || x.f < all[want].f || x.f == all[want].f && x.s < all[want].s) {
					want, found = slices.Index(all, x), true
				}
			}
			s, ok := st.BestFit(typ, n)
			require.Equal(t, found, ok, "type %s n %d", typ, n)
			if found {
				require.Equal(t, all[want].s, s, "type %s n %d", typ, n)
			}
		}
	}
}

// The claim of the type's documentation: readers may run together while
// nothing writes. Run with -race.
func TestConcurrentReaders(t *testing.T) {
	st := mixed(t)
	require.NoError(t, st.Bind("a", []GPURef{{0, 0}}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				_ = st.Free(topology.V100)
				_, _ = st.BestFit(topology.V100, 2)
				for range st.ByFree(topology.K80) {
				}
				_ = st.Held("a")
				_ = st.Types()
				_ = st.FreeMasks()[0][0]
				_ = st.Check()
			}
		})
	}
	wg.Wait()
}

func TestErrorText(t *testing.T) {
	err := error(&Error{Op: "bind", Server: "s", GPU: 2, Holder: "h", Msg: "held by \"x\"", Kind: ErrBusy})
	assert.Equal(t, `cluster: bind server "s" gpu 2 holder "h": GPU already held: held by "x"`, err.Error())
	assert.True(t, errors.Is(err, ErrBusy))
}
