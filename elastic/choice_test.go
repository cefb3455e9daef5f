package elastic

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Table 1 of Sia's paper (SOSP 2023, section 3.3): a node of 2 GPUs of
// type A and one of 4 of type B, configurations (1,1,A), (1,2,A), (1,1,B),
// (1,2,B), (1,4,B), and the normalised goodputs of J1 and J2. The maximum
// of J1 + J2 is J1 on (1,4,B) and J2 on (1,2,A) (the paper's bold
// entries): 3.5 + 2.1.
func TestSolveChoiceSiaTable1(t *testing.T) {
	configs := []struct{ pool, gpus int }{{0, 1}, {0, 2}, {1, 1}, {1, 2}, {1, 4}}
	g := [][]float64{{1, 1.5, 1.5, 2.5, 3.5}, {1.2, 2.1, 1, 1.9, 3.6}}
	p := &ChoiceProblem{Capacity: []int{2, 4}}
	for _, row := range g {
		var opts []Option
		for j, c := range configs {
			opts = append(opts, Option{Pool: c.pool, GPUs: c.gpus, Value: row[j]})
		}
		p.Groups = append(p.Groups, opts)
	}
	choice, st, err := SolveChoice(context.Background(), p, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{4, 1}, choice)
	assert.True(t, st.Optimal)
	assert.InDelta(t, 5.6, value(p, choice), 1e-12)
	assert.GreaterOrEqual(t, st.Bound, 5.6-1e-9)
}

// value sums the chosen options, or -Inf when the choice is infeasible.
func value(p *ChoiceProblem, choice []int) float64 {
	used := make([]int, len(p.Capacity))
	v := 0.0
	for g, o := range choice {
		if o < 0 {
			continue
		}
		x := p.Groups[g][o]
		used[x.Pool] += x.GPUs
		v += x.Value
	}
	for k, u := range used {
		if u > p.Capacity[k] {
			return math.Inf(-1)
		}
	}
	return v
}

// bruteChoice enumerates every choice.
func bruteChoice(p *ChoiceProblem) float64 {
	best := 0.0
	choice := make([]int, len(p.Groups))
	var rec func(g int)
	rec = func(g int) {
		if g == len(p.Groups) {
			best = math.Max(best, value(p, choice))
			return
		}
		for o := -1; o < len(p.Groups[g]); o++ {
			choice[g] = o
			rec(g + 1)
		}
	}
	rec(0)
	return best
}

// randomChoice draws a problem of groups with Sia-like options: on each of
// pools pools, 1, 2, 4, ... GPUs up to the pool, values growing with the
// GPUs at a random rate, some negative (never worth choosing).
func randomChoice(rng *rand.Rand, groups, pools, capacity int) *ChoiceProblem {
	p := &ChoiceProblem{Capacity: make([]int, pools)}
	for k := range p.Capacity {
		p.Capacity[k] = 1 + rng.IntN(capacity)
	}
	for range groups {
		var opts []Option
		for k := range pools {
			if rng.IntN(5) == 0 {
				continue // cannot run on this pool
			}
			speed := 0.5 + rng.Float64()
			for g := 1; g <= p.Capacity[k]+1; g *= 2 {
				opts = append(opts, Option{Pool: k, GPUs: g, Value: speed*math.Pow(float64(g), 0.3+0.6*rng.Float64()) - 0.2*rng.Float64()})
			}
		}
		p.Groups = append(p.Groups, opts)
	}
	return p
}

// On 300 random problems of up to 5 jobs on up to 3 pools, the branch and
// bound finds the optimum that enumerating every choice finds.
func TestSolveChoiceMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	for trial := range 300 {
		p := randomChoice(rng, 1+rng.IntN(5), 1+rng.IntN(3), 8)
		choice, st, err := SolveChoice(context.Background(), p, 0, 0)
		require.NoError(t, err, "trial %d", trial)
		require.True(t, st.Optimal)
		got, want := value(p, choice), bruteChoice(p)
		require.InDelta(t, want, got, 1e-7*math.Max(1, want), "trial %d: %+v", trial, p)
		require.GreaterOrEqual(t, st.Bound+1e-7, want)
	}
}

// dpChoice is the exact dynamic program over the free GPUs of each pool
// (a reference for problems too big to enumerate).
func dpChoice(p *ChoiceProblem) float64 {
	size := 1
	for _, c := range p.Capacity {
		size *= c + 1
	}
	f := make([]float64, size)
	next := make([]float64, size)
	stride := make([]int, len(p.Capacity))
	s := 1
	for k := range stride {
		stride[k] = s
		s *= p.Capacity[k] + 1
	}
	for _, opts := range p.Groups {
		copy(next, f)
		for state := range f {
			for _, o := range opts {
				if o.Value <= 0 {
					continue
				}
				room := state / stride[o.Pool] % (p.Capacity[o.Pool] + 1)
				if room >= o.GPUs {
					next[state] = math.Max(next[state], f[state-o.GPUs*stride[o.Pool]]+o.Value)
				}
			}
		}
		f, next = next, f
	}
	return f[size-1]
}

// On 40 random problems of 10 to 40 jobs on 3 pools of up to 24 GPUs,
// the branch and bound's optimum equals the dynamic program's.
func TestSolveChoiceMatchesDP(t *testing.T) {
	if testing.Short() {
		t.Skip("40 branch-and-bound solves")
	}
	rng := rand.New(rand.NewPCG(29, 2))
	nodes := 0
	for trial := range 40 {
		p := randomChoice(rng, 10+rng.IntN(31), 3, 24)
		choice, st, err := SolveChoice(context.Background(), p, 0, 0)
		require.NoError(t, err, "trial %d", trial)
		require.True(t, st.Optimal)
		got, want := value(p, choice), dpChoice(p)
		require.InDelta(t, want, got, 1e-7*math.Max(1, want), "trial %d", trial)
		nodes += st.Nodes
	}
	t.Logf("%d LPs in all (%.1f per problem)", nodes, float64(nodes)/40)
}

func TestSolveChoiceErrors(t *testing.T) {
	for name, p := range map[string]*ChoiceProblem{
		"negative capacity": {Capacity: []int{-1}},
		"pool out of range": {Capacity: []int{2}, Groups: [][]Option{{{Pool: 1, GPUs: 1, Value: 1}}}},
		"NaN value":         {Capacity: []int{2}, Groups: [][]Option{{{Pool: 0, GPUs: 1, Value: math.NaN()}}}},
		"negative GPUs":     {Capacity: []int{2}, Groups: [][]Option{{{Pool: 0, GPUs: -1, Value: 1}}}},
	} {
		_, _, err := SolveChoice(context.Background(), p, 0, 0)
		assert.ErrorIs(t, err, ErrInvalid, name)
	}
	_, _, err := SolveChoice(context.Background(), &ChoiceProblem{Capacity: []int{1}}, 0, math.NaN())
	assert.ErrorIs(t, err, ErrInvalid)
	// Nothing worth choosing, or nothing that fits: every group takes none.
	choice, st, err := SolveChoice(context.Background(), &ChoiceProblem{Capacity: []int{1}, Groups: [][]Option{{{Pool: 0, GPUs: 2, Value: 5}}, {{Pool: 0, GPUs: 1, Value: -1}}}}, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []int{-1, -1}, choice)
	assert.True(t, st.Optimal)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = SolveChoice(ctx, randomChoice(rand.New(rand.NewPCG(1, 1)), 20, 3, 24), 0, 0)
	assert.ErrorIs(t, err, context.Canceled)
}
