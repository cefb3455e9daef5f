package cluster

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
)

// 1,024 GPUs: 128 servers of 8 in three types.
func benchState(b *testing.B) *State {
	c, err := topology.ParseCompact("v100:344:8,a100:344:8,k80:336:8", 8)
	if err != nil {
		b.Fatal(err)
	}
	st, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// One consolidated placement of a 4-GPU job and its release.
func BenchmarkBindRelease(b *testing.B) {
	st := benchState(b)
	refs := make([]GPURef, 4)
	for b.Loop() {
		s, ok := st.BestFit(topology.A100, 4)
		if !ok {
			b.Fatal("no server")
		}
		n := 0
		for i, free := range st.FreeMask(s) {
			if free && n < 4 {
				refs[n] = GPURef{s, i}
				n++
			}
		}
		if err := st.Bind("job", refs); err != nil {
			b.Fatal(err)
		}
		st.Release("job")
	}
}

// BestFit on a cluster whose servers are all partly taken.
func BenchmarkBestFit(b *testing.B) {
	st := benchState(b)
	for s := range st.NumServers() {
		if err := st.Bind(st.Server(s).ID, []GPURef{{s, 0}, {s, 1}, {s, 2}}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, ok := st.BestFit(topology.V100, 5); !ok {
			b.Fatal("no server")
		}
	}
}
