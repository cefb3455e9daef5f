package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func allFree(n int) []bool {
	f := make([]bool, n)
	for i := range f {
		f[i] = true
	}
	return f
}

func server(t testing.TB, tmpl topology.ServerTemplate) *topology.Server {
	c, err := topology.Homogeneous(1, tmpl)
	require.NoError(t, err)
	return &c.Servers[0]
}

// bruteForce returns the best quality over all k-subsets of the free GPUs.
func bruteForce(s *topology.Server, free []bool, k int) quality {
	var cand []int
	for i, f := range free {
		if f {
			cand = append(cand, i)
		}
	}
	w := scoreMatrix(s, cand)
	best := quality{-1, -1}
	for mask := uint64(0); mask < 1<<len(cand); mask++ {
		n := 0
		for m := mask; m != 0; m &= m - 1 {
			n++
		}
		if n != k {
			continue
		}
		var q quality
		for a := range cand {
			for b := a + 1; b < len(cand); b++ {
				inA, inB := mask>>a&1 == 1, mask>>b&1 == 1
				switch {
				case inA && inB:
					q.own += int(w[a][b])
				case !inA && !inB:
					q.rest += int(w[a][b])
				}
			}
		}
		if q.better(best) {
			best = q
		}
	}
	return best
}

func qualityOf(s *topology.Server, free []bool, chosen []int) quality {
	var rest []int
	for i, f := range free {
		if f && !slices.Contains(chosen, i) {
			rest = append(rest, i)
		}
	}
	return quality{Score(s, chosen), Score(s, rest)}
}

// randomServer has a random symmetric link matrix over all classes.
func randomServer(rng *rand.Rand, n int) *topology.Server {
	s := &topology.Server{ID: "r", GPUs: make([]topology.GPU, n), Links: make([][]topology.Link, n)}
	classes := []topology.Link{{Class: topology.LinkCrossSocket}, {Class: topology.LinkSameNUMA}, {Class: topology.LinkHostBridge},
		{Class: topology.LinkMultiSwitch}, {Class: topology.LinkSingleSwitch}, {Class: topology.LinkSameBoard},
		{Class: topology.LinkNVLink, NVLinks: 1}, {Class: topology.LinkNVLink, NVLinks: 2}, {Class: topology.LinkNVSwitch, NVLinks: 6}}
	for i := range n {
		s.GPUs[i] = topology.GPU{Index: i, Type: topology.V100, MemoryMiB: 16384}
		s.Links[i] = make([]topology.Link, n)
	}
	for i := range n {
		s.Links[i][i] = topology.Link{Class: topology.LinkSelf}
		for j := i + 1; j < n; j++ {
			l := classes[rng.IntN(len(classes))]
			s.Links[i][j], s.Links[j][i] = l, l
		}
	}
	return s
}

// The choice is optimal (same quality as trying every subset) on random
// servers of up to 10 GPUs, never returns a busy or repeated GPU, and is
// deterministic.
func TestChooseMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := 1 + rng.IntN(10)
		s := randomServer(rng, n)
		free := make([]bool, n)
		nfree := 0
		for i := range free {
			free[i] = rng.IntN(4) > 0
			if free[i] {
				nfree++
			}
		}
		if nfree == 0 {
			continue
		}
		k := 1 + rng.IntN(nfree)
		got, err := GPUChooser{}.Choose(s, free, k)
		require.NoError(t, err)
		require.Len(t, got, k)
		require.True(t, slices.IsSorted(got))
		for i, g := range got {
			require.True(t, free[g], "busy GPU %d chosen", g)
			require.False(t, i > 0 && got[i-1] == g, "GPU %d twice", g)
		}
		assert.Equal(t, bruteForce(s, free, k), qualityOf(s, free, got))
		again, _ := GPUChooser{}.Choose(s, free, k)
		assert.Equal(t, got, again)
	}
}

// A DGX-1: two GPUs sharing two NVLinks, and four GPUs of one socket (all
// linked: 900); the remaining socket stays whole for the next job.
func TestChooseDGX1(t *testing.T) {
	s := server(t, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	got, err := GPUChooser{}.Choose(s, allFree(8), 2)
	require.NoError(t, err)
	assert.Equal(t, "NV2", s.Link(got[0], got[1]).String())
	got, err = GPUChooser{}.Choose(s, allFree(8), 4)
	require.NoError(t, err)
	assert.Equal(t, 900, Score(s, got))
	assert.Equal(t, []int{0, 1, 2, 3}, got)
	// With GPU 1 busy, three GPUs of the second socket beat a mixed set.
	free := allFree(8)
	free[1] = false
	got, err = GPUChooser{}.Choose(s, free, 3)
	require.NoError(t, err)
	assert.Equal(t, bruteForce(s, free, 3), qualityOf(s, free, got))
}

// Anti-fragmentation: on a PCIe server of two sockets with two switches of
// four GPUs each, a 2-GPU job takes two GPUs of a switch whose other GPUs
// are already split, keeping whole switches for 4-GPU jobs.
func TestChooseKeepsGroupsWhole(t *testing.T) {
	n := 16
	s := &topology.Server{ID: "pcie16", GPUs: make([]topology.GPU, n), Links: make([][]topology.Link, n)}
	for i := range n {
		s.GPUs[i] = topology.GPU{Index: i, Type: topology.T4, MemoryMiB: 16384}
		s.Links[i] = make([]topology.Link, n)
		for j := range n {
			switch {
			case i == j:
				s.Links[i][j] = topology.Link{Class: topology.LinkSelf}
			case i/4 == j/4:
				s.Links[i][j] = topology.Link{Class: topology.LinkSingleSwitch}
			case i/8 == j/8:
				s.Links[i][j] = topology.Link{Class: topology.LinkHostBridge}
			default:
				s.Links[i][j] = topology.Link{Class: topology.LinkCrossSocket}
			}
		}
	}
	c := &topology.Cluster{Servers: []topology.Server{*s}}
	require.NoError(t, c.Validate())
	free := allFree(n)
	free[9], free[10] = false, false // switch 2 already holds a job
	got, err := GPUChooser{}.Choose(s, free, 2)
	require.NoError(t, err)
	assert.Equal(t, []int{8, 11}, got, "the half-used switch")
	// Four GPUs: any whole switch scores 300; taking switch 3, on the socket
	// already in use, leaves socket 0 whole (remainder 1,290 against 1,130).
	got, err = GPUChooser{}.Choose(s, free, 4)
	require.NoError(t, err)
	assert.Equal(t, []int{12, 13, 14, 15}, got)
}

// An NVL72-like domain: every pair behind NVSwitches scores the same, so
// the choice is the lowest free GPUs, found without search.
func TestChooseNVSwitchDomain(t *testing.T) {
	s := server(t, topology.ServerTemplate{Type: topology.B200, GPUs: 72, Interconnect: topology.NVSwitch})
	free := allFree(72)
	for _, b := range []int{0, 5, 40} {
		free[b] = false
	}
	got, err := GPUChooser{}.Choose(s, free, 8)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4, 6, 7, 8, 9}, got)
	assert.Equal(t, 28*1800, Score(s, got))
}

// Above the exact limit the local search is checked against the exact
// search on random 24-GPU servers.
func TestLocalSearchQuality(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	worst := 1.0
	for range 20 {
		s := randomServer(rng, 20)
		free := allFree(20)
		k := 2 + rng.IntN(6)
		exact, err := GPUChooser{}.Choose(s, free, k)
		require.NoError(t, err)
		local, err := GPUChooser{ExactLimit: 1}.Choose(s, free, k)
		require.NoError(t, err)
		e, l := Score(s, exact), Score(s, local)
		require.LessOrEqual(t, l, e)
		worst = min(worst, float64(l)/float64(e))
	}
	assert.Greater(t, worst, 0.9)
	t.Logf("local search: worst score ratio to the exact optimum %.3f", worst)
}

// Choosing more than half the free GPUs is the complement problem: the
// local search grows the set left free. It is exact when one GPU is left
// (every GPU is tried), and within 10% of the optimum (in the chosen set's
// score above the worst set's) otherwise, on random servers of 12 to 16
// GPUs checked against every subset.
func TestLocalSearchComplement(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	worst := 1.0
	for range 60 {
		n := 12 + rng.IntN(5)
		s := randomServer(rng, n)
		free := allFree(n)
		for _, k := range []int{n - 1, n - 2, n - 1 - rng.IntN(n/2-1)} {
			local, err := GPUChooser{ExactLimit: 1}.Choose(s, free, k)
			require.NoError(t, err)
			require.Len(t, local, k)
			require.True(t, slices.IsSorted(local))
			got, want := qualityOf(s, free, local), bruteForce(s, free, k)
			if k == n-1 {
				require.Equal(t, want, got, "n %d k %d", n, k)
			}
			require.False(t, got.better(want))
			worst = min(worst, float64(got.own)/float64(want.own))
		}
	}
	assert.Greater(t, worst, 0.9)
	t.Logf("complement local search: worst score ratio to the exact optimum %.3f", worst)
	// All pairs alike: the lowest positions, as the exact search gives.
	nvl := server(t, topology.ServerTemplate{Type: topology.B200, GPUs: 72, Interconnect: topology.NVSwitch})
	got, err := GPUChooser{}.Choose(nvl, allFree(72), 70)
	require.NoError(t, err)
	assert.Equal(t, 70, got[69]+1)
}

// At 1,024 GPUs the local search bounds its work (it used to take 7 s to
// choose 1,023 of 1,024, tens of seconds under load): choosing leaves the
// least connected GPU free, and every answer is a set of k distinct free
// GPUs.
func TestChooseLargeServer(t *testing.T) {
	if testing.Short() {
		t.Skip("1,024 GPUs")
	}
	s := server(t, topology.ServerTemplate{Type: topology.B200, GPUs: 1024, Interconnect: topology.NVSwitch})
	free := allFree(1024)
	free[3] = false
	for _, k := range []int{1, 8, 511, 512, 1021, 1022} {
		got, err := GPUChooser{}.Choose(s, free, k)
		require.NoError(t, err)
		require.Len(t, got, k)
		want := make([]int, 0, k) // all pairs alike: the lowest free positions
		for i := 0; len(want) < k; i++ {
			if free[i] {
				want = append(want, i)
			}
		}
		assert.Equal(t, want, got, "k %d", k)
	}
	// One GPU linked worse than the others is the one left out.
	r := randomServer(rand.New(rand.NewPCG(1, 1)), 1024)
	weak := 700
	for j := range r.GPUs {
		if j != weak {
			r.Links[weak][j] = topology.Link{Class: topology.LinkCrossSocket}
			r.Links[j][weak] = r.Links[weak][j]
		}
	}
	got, err := GPUChooser{}.Choose(r, allFree(1024), 1023)
	require.NoError(t, err)
	assert.NotContains(t, got, weak)
}

// A hand-built server that does not validate is an error, never a panic
// (a ragged link matrix used to index out of range) or a wrong answer (a
// negative or huge NVLink count made scores negative or overflow).
func TestChooseMalformedServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(s *topology.Server)
		msg    string
	}{
		{"ragged links", func(s *topology.Server) { s.Links[2] = s.Links[2][:3] }, "link matrix is not 8x8"},
		{"short links", func(s *topology.Server) { s.Links = s.Links[:7] }, "link matrix is not 8x8"},
		{"NVLinks -5", func(s *topology.Server) {
			s.Links[0][1] = topology.Link{Class: topology.LinkNVLink, NVLinks: -5}
			s.Links[1][0] = s.Links[0][1]
		}, "links (want 1 to 64)"},
		{"NVLinks 1<<40", func(s *topology.Server) {
			s.Links[0][1] = topology.Link{Class: topology.LinkNVLink, NVLinks: 1 << 40}
			s.Links[1][0] = s.Links[0][1]
		}, "links (want 1 to 64)"},
		{"asymmetric", func(s *topology.Server) { s.Links[0][1] = topology.Link{Class: topology.LinkCrossSocket} }, "asymmetric"},
		{"no type", func(s *topology.Server) { s.GPUs[4].Type = "" }, "gpus[4]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := randomServer(rand.New(rand.NewPCG(5, 6)), 8)
			tc.break_(s)
			for _, limit := range []int{0, 1} { // exact and local
				got, err := GPUChooser{ExactLimit: limit}.Choose(s, allFree(8), 3)
				require.ErrorIs(t, err, ErrBadRequest, "chose %v", got)
				assert.ErrorContains(t, err, tc.msg)
			}
		})
	}
	big := &topology.Server{ID: "big", GPUs: make([]topology.GPU, topology.MaxGPUsPerServer+1)}
	for i := range big.GPUs {
		big.GPUs[i] = topology.GPU{Index: i, Type: topology.V100, MemoryMiB: 16384}
	}
	_, err := GPUChooser{}.Choose(big, allFree(len(big.GPUs)), 2)
	require.ErrorIs(t, err, ErrBadRequest)
	assert.ErrorIs(t, err, topology.ErrInvalidCount)
}

func TestChooseErrors(t *testing.T) {
	s := server(t, topology.ServerTemplate{Type: topology.V100, GPUs: 4})
	_, err := GPUChooser{}.Choose(s, allFree(4), 5)
	assert.True(t, errors.Is(err, ErrNotEnoughGPUs))
	_, err = GPUChooser{}.Choose(s, allFree(4), 0)
	assert.ErrorIs(t, err, ErrBadRequest)
	_, err = GPUChooser{}.Choose(s, allFree(3), 1)
	assert.ErrorIs(t, err, ErrBadRequest)
	// An exact search over 64 GPUs would not end: refused.
	_, err = GPUChooser{ExactLimit: 64}.Choose(s, allFree(4), 2)
	assert.ErrorIs(t, err, ErrBadRequest)
	assert.ErrorContains(t, err, "exact limit 64, want 0 to 26")
	free := allFree(4)
	free[0], free[1] = false, false
	_, err = GPUChooser{}.Choose(s, free, 3)
	assert.ErrorContains(t, err, "3 asked for, 2 free")
}

func FuzzChoose(f *testing.F) {
	f.Add(uint64(1), uint8(8), uint16(0xff), uint8(3))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, freeBits uint16, k uint8) {
		rng := rand.New(rand.NewPCG(seed, 0))
		size := int(n%16) + 1
		s := randomServer(rng, size)
		free := make([]bool, size)
		for i := range free {
			free[i] = freeBits>>i&1 == 1
		}
		got, err := GPUChooser{}.Choose(s, free, int(k%17))
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, g := range got {
			if !free[g] || seen[g] {
				t.Fatalf("bad choice %v", got)
			}
			seen[g] = true
		}
	})
}

func BenchmarkChoose(b *testing.B) {
	dgx1 := server(b, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	rng := rand.New(rand.NewPCG(3, 4))
	pcie16 := randomServer(rng, 16)
	nvl72 := server(b, topology.ServerTemplate{Type: topology.B200, GPUs: 72, Interconnect: topology.NVSwitch})
	mixed72 := randomServer(rng, 72)
	for _, c := range []struct {
		name string
		s    *topology.Server
		ks   []int
	}{{"dgx1-8", dgx1, []int{2, 4}}, {"random-16", pcie16, []int{2, 3, 4, 8}}, {"random-24", randomServer(rng, 24), []int{12}},
		{"nvl72", nvl72, []int{4, 8}}, {"random-72", mixed72, []int{4, 8, 36, 71}},
		{"nvswitch-1024", server(b, topology.ServerTemplate{Type: topology.B200, GPUs: 1024, Interconnect: topology.NVSwitch}), []int{8, 512, 1023}},
		{"random-1024", randomServer(rng, 1024), []int{8, 512, 1023}}} {
		free := allFree(len(c.s.GPUs))
		for _, k := range c.ks {
			b.Run(fmt.Sprintf("%s/k=%d", c.name, k), func(b *testing.B) {
				for b.Loop() {
					if _, err := (GPUChooser{}).Choose(c.s, free, k); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
