package placement

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/topology"
)

func product(t testing.TB, name string) *topology.MIGProduct {
	p, err := topology.LookupMIGProduct(name)
	require.NoError(t, err)
	return p
}

func slot(profile string, start int, busy bool) MIGSlot {
	return MIGSlot{MIGInstance: topology.MIGInstance{Profile: profile, Start: start}, Busy: busy, Demand: -1}
}

// plans runs the exact planner and the heuristic.
func plans(t *testing.T, gpus []MIGGPU, demands []MIGDemand) (exact, heur *MIGPlan) {
	t.Helper()
	exact, err := (&MIGPlanner{}).Plan(context.Background(), gpus, demands)
	require.NoError(t, err)
	require.True(t, exact.Exact)
	heur, err = (&MIGPlanner{Heuristic: true}).Plan(context.Background(), gpus, demands)
	require.NoError(t, err)
	require.False(t, heur.Exact)
	return exact, heur
}

func TestMIGPlanHandChecked(t *testing.T) {
	h100 := product(t, "h100-80gb")
	empty := func(n int) []MIGGPU {
		out := make([]MIGGPU, n)
		for i := range out {
			out[i] = MIGGPU{Ref: GPURef{0, i}, Product: h100}
		}
		return out
	}
	t.Run("a 3g.40gb starts at 4, leaving room for a 4g.40gb", func(t *testing.T) {
		e, h := plans(t, empty(1), []MIGDemand{{Profile: "3g.40gb", Count: 1}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Equal(t, []MIGSlot{{MIGInstance: topology.MIGInstance{Profile: "3g.40gb", Start: 4}, New: true}}, p.Layouts[0])
			assert.Equal(t, MIGCost{GPUs: 1, Reconfigured: 1}, p.Cost)
		}
	})
	t.Run("ten compute slices need two GPUs", func(t *testing.T) {
		e, h := plans(t, empty(3), []MIGDemand{{Profile: "3g.40gb", Count: 2}, {Profile: "2g.20gb", Count: 1}, {Profile: "1g.10gb", Count: 2}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Equal(t, 0, p.Cost.Unplaced)
			assert.Equal(t, 2, p.Cost.GPUs)
			assert.Equal(t, []int{2, 1, 2}, p.Placed)
		}
		// 3+3 on one GPU (no slice stranded), 2+1+1 on the other with a 3g
		// still free: 0 stranded in all.
		assert.Equal(t, MIGCost{GPUs: 2, Reconfigured: 2}, e.Cost)
	})
	t.Run("an idle instance is reused, not recreated", func(t *testing.T) {
		gpus := empty(2)
		gpus[1].Instances = []MIGSlot{slot("3g.40gb", 4, false)}
		e, h := plans(t, gpus, []MIGDemand{{Profile: "3g.40gb", Count: 1}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Equal(t, MIGCost{GPUs: 1}, p.Cost)
			assert.Equal(t, 0, p.Layouts[1][0].Demand)
			assert.False(t, p.Changed[1])
		}
	})
	t.Run("fewer GPUs come before leaving busy GPUs alone", func(t *testing.T) {
		gpus := empty(2)
		gpus[0].Instances = []MIGSlot{slot("3g.40gb", 4, true)}
		e, h := plans(t, gpus, []MIGDemand{{Profile: "3g.40gb", Count: 1}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Equal(t, MIGCost{GPUs: 1, BusyReconfigured: 1, Reconfigured: 1, Stranded: 1}, p.Cost)
			assert.Contains(t, p.Layouts[0], MIGSlot{MIGInstance: topology.MIGInstance{Profile: "3g.40gb", Start: 0}, New: true})
			assert.Empty(t, p.Layouts[1])
		}
	})
	t.Run("a busy 1g at slice 0 blocks the only 4g placement", func(t *testing.T) {
		gpus := empty(1)
		gpus[0].Instances = []MIGSlot{slot("1g.10gb", 0, true)}
		e, h := plans(t, gpus, []MIGDemand{{Profile: "4g.40gb", Count: 1}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Equal(t, 1, p.Cost.Unplaced)
			assert.Equal(t, []int{0}, p.Placed)
			assert.False(t, p.Changed[0])
		}
	})
	t.Run("unused idle instances are destroyed to make room", func(t *testing.T) {
		gpus := empty(1)
		gpus[0].Instances = []MIGSlot{slot("1g.10gb", 0, false), slot("1g.10gb", 4, false)}
		e, h := plans(t, gpus, []MIGDemand{{Profile: "7g.80gb", Count: 1}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Equal(t, MIGCost{GPUs: 1, Reconfigured: 1}, p.Cost)
			assert.Len(t, p.Layouts[0], 1)
		}
	})
	t.Run("products restrict demands", func(t *testing.T) {
		gpus := []MIGGPU{{Product: product(t, "a100-80gb")}, {Product: h100}}
		e, h := plans(t, gpus, []MIGDemand{{Profile: "3g.40gb", Product: "h100-80gb", Count: 2}})
		for _, p := range []*MIGPlan{e, h} {
			assert.Empty(t, p.Layouts[0])
			assert.Len(t, p.Layouts[1], 2)
		}
	})
}

func TestMIGPlanErrors(t *testing.T) {
	h100 := product(t, "h100-80gb")
	ok := []MIGGPU{{Product: h100}}
	for _, c := range []struct {
		gpus    []MIGGPU
		demands []MIGDemand
		kinds   []error
		msg     string
	}{
		{ok, []MIGDemand{{Profile: "9g.99gb", Count: 1}}, []error{ErrBadRequest, topology.ErrUnknownProfile}, `no MIG product has a profile "9g.99gb"`},
		{ok, []MIGDemand{{Profile: "3g.20gb", Product: "h100-80gb", Count: 1}}, []error{ErrBadRequest, topology.ErrUnknownProfile}, `h100-80gb has no MIG profile "3g.20gb"`},
		{ok, []MIGDemand{{Profile: "3g.40gb", Count: -1}}, []error{ErrBadRequest}, "count -1"},
		{ok, []MIGDemand{{Profile: "3g.40gb", Count: 1}, {Profile: "3g.40gb", Product: "h100-80gb", Count: 1}}, []error{ErrBadRequest}, "both ask for 3g.40gb"},
		{[]MIGGPU{{}}, nil, []error{ErrBadRequest}, "no MIG product"},
		{[]MIGGPU{{Product: h100, Instances: []MIGSlot{slot("4g.40gb", 4, true)}}}, nil, []error{ErrBadRequest, topology.ErrInvalidPlacement}, "gpus[0] (h100-80gb)"},
	} {
		_, err := (&MIGPlanner{}).Plan(context.Background(), c.gpus, c.demands)
		for _, k := range c.kinds {
			require.ErrorIs(t, err, k)
		}
		assert.ErrorContains(t, err, c.msg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&MIGPlanner{}).Plan(ctx, ok, []MIGDemand{{Profile: "1g.10gb", Count: 1}})
	assert.ErrorIs(t, err, context.Canceled)
}

// randomMIG draws GPUs with random valid layouts (half the instances busy)
// and random demands.
func randomMIG(rng *rand.Rand, nGPUs int, products []*topology.MIGProduct) ([]MIGGPU, []MIGDemand) {
	gpus := make([]MIGGPU, nGPUs)
	for g := range gpus {
		p := products[rng.IntN(len(products))]
		gpus[g] = MIGGPU{Ref: GPURef{g / 4, g % 4}, Product: p}
		if rng.IntN(3) == 0 {
			continue
		}
		var used uint32
		count := make([]int, len(p.Profiles))
		for s := 0; s < p.MemorySlices; s++ {
			pi := rng.IntN(len(p.Profiles))
			if rng.IntN(2) == 0 && p.Placeable(used, count, pi, s) {
				used |= p.Profiles[pi].Mask(s)
				count[pi]++
				gpus[g].Instances = append(gpus[g].Instances, slot(p.Profiles[pi].Name, s, rng.IntN(2) == 0))
			}
		}
	}
	var demands []MIGDemand
	seen := map[string]bool{}
	for range 1 + rng.IntN(3) {
		p := products[rng.IntN(len(products))]
		name := p.Profiles[rng.IntN(len(p.Profiles))].Name
		if !seen[name] {
			seen[name] = true
			demands = append(demands, MIGDemand{Profile: name, Count: 1 + rng.IntN(4)})
		}
	}
	return gpus, demands
}

// checkPlan re-checks a plan independently of Plan's own checks.
func checkPlan(t *testing.T, gpus []MIGGPU, demands []MIGDemand, p *MIGPlan) {
	t.Helper()
	require.Len(t, p.Layouts, len(gpus))
	placed := make([]int, len(demands))
	for g, layout := range p.Layouts {
		inst := make([]topology.MIGInstance, len(layout))
		for i, s := range layout {
			inst[i] = s.MIGInstance
			if s.Demand >= 0 {
				placed[s.Demand]++
				require.Equal(t, demands[s.Demand].Profile, s.Profile)
				require.False(t, s.Busy)
			}
		}
		_, _, err := gpus[g].Product.Check(inst)
		require.NoError(t, err, "gpus[%d]", g)
		for _, s := range gpus[g].Instances {
			if s.Busy {
				require.Contains(t, layout, MIGSlot{MIGInstance: s.MIGInstance, Busy: true, Demand: -1})
			}
		}
	}
	for d := range demands {
		require.LessOrEqual(t, placed[d], demands[d].Count)
	}
	require.Equal(t, placed, p.Placed)
}

// The planner never produces an invalid layout, never moves or drops a
// busy instance, and the exact plan is never worse than the heuristic's.
func TestMIGPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	products := topology.MIGProducts()
	for range 300 {
		gpus, demands := randomMIG(rng, 1+rng.IntN(5), products)
		e, h := plans(t, gpus, demands)
		checkPlan(t, gpus, demands, e)
		checkPlan(t, gpus, demands, h)
		require.False(t, h.Cost.Less(e.Cost), "heuristic %+v beats exact %+v", h.Cost, e.Cost)
	}
}

// migBruteForce is the cheapest plan over every combination of valid layouts
// (each keeping the busy instances) and every set of GPUs to use.
func migBruteForce(gpus []MIGGPU, demands []MIGDemand) MIGCost {
	layouts := make([][][]MIGSlot, len(gpus))
	for g, m := range gpus {
		p := m.Product
		check := func(layout []MIGSlot) bool {
			inst := make([]topology.MIGInstance, len(layout))
			for i := range layout {
				inst[i] = layout[i].MIGInstance
			}
			_, _, err := p.Check(inst)
			return err == nil
		}
		covered := func(layout []MIGSlot, s int) bool {
			for _, o := range layout {
				pi, _ := p.Profile(o.Profile)
				if p.Profiles[pi].Mask(o.Start)>>s&1 == 1 {
					return true
				}
			}
			return false
		}
		var rec func(s int, cur []MIGSlot)
		rec = func(s int, cur []MIGSlot) {
			for s < p.MemorySlices && covered(cur, s) {
				s++
			}
			if s == p.MemorySlices {
				layouts[g] = append(layouts[g], slices.Clone(cur))
				return
			}
			rec(s+1, cur)
			for _, pf := range p.Profiles {
				next := append(slices.Clone(cur), MIGSlot{MIGInstance: topology.MIGInstance{Profile: pf.Name, Start: s}, Demand: -1})
				if check(next) {
					rec(s+1, next)
				}
			}
		}
		var busy []MIGSlot
		for _, b := range m.Instances {
			if b.Busy {
				busy = append(busy, b)
			}
		}
		rec(0, busy)
	}
	best := MIGCost{Unplaced: 1 << 30}
	pick := make([]int, len(gpus))
	var comb func(g int)
	comb = func(g int) {
		if g < len(gpus) {
			for i := range layouts[g] {
				pick[g] = i
				comb(g + 1)
			}
			return
		}
		best = bestUse(gpus, demands, layouts, pick, best)
	}
	comb(0)
	return best
}

func bestUse(gpus []MIGGPU, demands []MIGDemand, layouts [][][]MIGSlot, pick []int, best MIGCost) MIGCost {
	var fixed MIGCost
	avail := make([][]int, len(gpus))
	must := make([]bool, len(gpus))
	newCount := make([]int, len(demands))
	for g, m := range gpus {
		layout := layouts[g][pick[g]]
		p := m.Product
		avail[g] = make([]int, len(demands))
		changed := len(layout) != len(m.Instances)
		busy := false
		var used uint32
		count := make([]int, len(p.Profiles))
		for _, s := range layout {
			pi, _ := p.Profile(s.Profile)
			used |= p.Profiles[pi].Mask(s.Start)
			count[pi]++
			busy = busy || s.Busy
			existing := slices.ContainsFunc(m.Instances, func(o MIGSlot) bool { return o.MIGInstance == s.MIGInstance && o.Busy == s.Busy })
			changed = changed || !existing
			if s.Busy {
				continue
			}
			d := slices.IndexFunc(demands, func(dm MIGDemand) bool {
				return dm.Profile == s.Profile && (dm.Product == "" || dm.Product == p.Name)
			})
			if d < 0 {
				if !existing {
					return best // a new instance nobody asked for
				}
				continue
			}
			avail[g][d]++
			if !existing {
				newCount[d]++
				must[g] = true
			}
		}
		must[g] = must[g] || busy
		if changed {
			fixed.Reconfigured++
			if busy {
				fixed.BusyReconfigured++
			}
		}
		fixed.Stranded += p.Stranded(used, count)
	}
	for d := range demands {
		if newCount[d] > demands[d].Count {
			return best
		}
	}
	for set := range 1 << len(gpus) {
		c := fixed
		total := make([]int, len(demands))
		for g := range gpus {
			if set>>g&1 == 0 {
				if must[g] {
					c.Unplaced = -1
				}
				continue
			}
			c.GPUs++
			for d := range demands {
				total[d] += avail[g][d]
			}
		}
		if c.Unplaced < 0 {
			continue
		}
		for d := range demands {
			c.Unplaced += demands[d].Count - min(demands[d].Count, total[d])
		}
		if c.Less(best) {
			best = c
		}
	}
	return best
}

// The exact planner's cost equals brute force's on small instances (A30s
// and an A100, up to three GPUs).
func TestMIGPlanExactIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	small := []*topology.MIGProduct{product(t, "a30-24gb")}
	for i := range 60 {
		products := small
		n := 1 + rng.IntN(3)
		if i%4 == 0 {
			products, n = []*topology.MIGProduct{product(t, "a100-40gb")}, 1
		}
		gpus, demands := randomMIG(rng, n, products)
		e, _ := plans(t, gpus, demands)
		assert.Equal(t, migBruteForce(gpus, demands), e.Cost, "gpus %+v demands %+v", gpus, demands)
	}
}

// TestMIGPlanGap measures the heuristic against the exact planner on random
// clusters of 2 to 8 GPUs of A100 and H100 products (go test -v -run Gap).
func TestMIGPlanGap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	products := []*topology.MIGProduct{product(t, "a100-40gb"), product(t, "a100-80gb"), product(t, "h100-80gb")}
	const n = 400
	var sameCost, sameGPUs, extraGPUs, extraUnplaced, extraReconf, extraStranded, gpusUsed, demanded int
	for range n {
		gpus, demands := randomMIG(rng, 2+rng.IntN(7), products)
		for _, d := range demands {
			demanded += d.Count
		}
		e, h := plans(t, gpus, demands)
		if e.Cost == h.Cost {
			sameCost++
		}
		if e.Cost.Unplaced == h.Cost.Unplaced && e.Cost.GPUs == h.Cost.GPUs {
			sameGPUs++
		}
		extraUnplaced += h.Cost.Unplaced - e.Cost.Unplaced
		extraGPUs += h.Cost.GPUs - e.Cost.GPUs
		extraReconf += h.Cost.Reconfigured - e.Cost.Reconfigured
		extraStranded += h.Cost.Stranded - e.Cost.Stranded
		gpusUsed += e.Cost.GPUs
	}
	t.Logf("heuristic vs exact on %d random clusters: same cost %d (%.0f%%), same placed and GPUs %d (%.0f%%); "+
		"extra over all: %d unplaced instances (of %d demanded), %d GPUs (exact used %d), %d reconfigurations, %d stranded slices",
		n, sameCost, 100*float64(sameCost)/n, sameGPUs, 100*float64(sameGPUs)/n, extraUnplaced, demanded, extraGPUs, gpusUsed, extraReconf, extraStranded)
	assert.GreaterOrEqual(t, sameGPUs, n*85/100, "the heuristic's GPU count regressed")
}

func TestMIGGPUs(t *testing.T) {
	c, err := topology.ParseJSON([]byte(`{"servers": [
	  {"id": "a", "gpu_type": "a100", "gpus": 2, "memory_mib": 81920, "mig": {"instances": [{"profile": "7g.80gb", "start": 0}]}},
	  {"id": "h", "gpu_type": "h100", "gpus": 1},
	  {"id": "v", "gpu_type": "v100", "gpus": 1}]}`))
	require.NoError(t, err)
	gpus, err := MIGGPUs(c, false)
	require.NoError(t, err)
	require.Len(t, gpus, 2)
	assert.Equal(t, "a100-80gb", gpus[1].Product.Name)
	assert.Equal(t, GPURef{0, 1}, gpus[1].Ref)
	assert.Equal(t, []MIGSlot{slot("7g.80gb", 0, false)}, gpus[1].Instances)
	gpus, err = MIGGPUs(c, true)
	require.NoError(t, err)
	require.Len(t, gpus, 3)
	assert.Empty(t, gpus[2].Instances)
	assert.Equal(t, "h100-80gb", gpus[2].Product.Name)
}

func BenchmarkMIGPlan(b *testing.B) {
	h100 := product(b, "h100-80gb")
	demands := []MIGDemand{{Profile: "1g.10gb", Count: 9}, {Profile: "2g.20gb", Count: 5}, {Profile: "3g.40gb", Count: 4}, {Profile: "4g.40gb", Count: 2}}
	for _, c := range []struct {
		name string
		n    int
		heur bool
	}{{"exact/gpus=8", 8, false}, {"heuristic/gpus=8", 8, true}, {"heuristic/gpus=1024", 1024, true}} {
		gpus := make([]MIGGPU, c.n)
		for i := range gpus {
			gpus[i] = MIGGPU{Product: h100}
			if i%2 == 1 {
				gpus[i].Instances = []MIGSlot{slot("3g.40gb", 4, true)}
			}
		}
		ds := demands
		if c.n > 8 {
			ds = nil
			for _, d := range demands {
				ds = append(ds, MIGDemand{Profile: d.Profile, Count: d.Count * c.n / 8})
			}
		}
		b.Run(c.name, func(b *testing.B) {
			pl := &MIGPlanner{Heuristic: c.heur}
			for b.Loop() {
				p, err := pl.Plan(context.Background(), gpus, ds)
				if err != nil || p.Exact == c.heur {
					b.Fatal(err, p.Exact)
				}
			}
		})
	}
}

// One planner serves concurrent calls (go test -race).
func TestMIGPlannerConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	gpus, demands := randomMIG(rng, 4, topology.MIGProducts())
	pl := &MIGPlanner{}
	want, err := pl.Plan(context.Background(), gpus, demands)
	require.NoError(t, err)
	done := make(chan *MIGPlan, 4)
	for range 4 {
		go func() {
			p, err := pl.Plan(context.Background(), gpus, demands)
			if err != nil {
				p = nil
			}
			done <- p
		}()
	}
	for range 4 {
		assert.Equal(t, want, <-done)
	}
}
