package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/topology"
)

// FractionRequest asks for a share of one GPU shared by time slicing, sized
// by memory, as KAI scheduler's gpu-fraction and gpu-memory annotations and
// HAMi's gpumem-percentage and gpumem resources do. Give Fraction or
// MemoryMiB, not both.
// It is a plain value, safe for concurrent reads.
type FractionRequest struct {
	// Fraction is the share of the GPU's memory, 0 < Fraction <= 1.
	Fraction float64
	// MemoryMiB is an absolute amount of memory, > 0.
	MemoryMiB int
	// Type restricts the request to GPUs of that type; empty means any.
	Type topology.GPUType
}

// need returns the MiB the request takes on a GPU of mem MiB.
func (r *FractionRequest) need(mem int) int {
	if r.MemoryMiB > 0 {
		return r.MemoryMiB
	}
	return int(math.Ceil(r.Fraction * float64(mem)))
}

// FractionGPU is a GPU that fractional requests may share.
// It is a plain value, safe for concurrent reads.
type FractionGPU struct {
	Ref  GPURef
	Type topology.GPUType
	// MemoryMiB is the GPU's memory, and UsedMiB what is already taken.
	MemoryMiB, UsedMiB int
}

// FractionPolicy chooses the GPU of each request.
// Its values are constants, safe for concurrent use.
type FractionPolicy int

const (
	// BestFitDecreasing places the largest requests first, each on the GPU
	// it leaves with the least free memory (classic bin packing).
	BestFitDecreasing FractionPolicy = iota
	// FragmentationGradient places the requests in the given order, each on
	// the GPU whose fragmentation (see [Fragmentation]) grows least,
	// ties to the tightest GPU: the fragmentation gradient descent of Weng
	// et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads
	// with Fragmentation Gradient Descent", USENIX ATC 2023, section 4, at
	// GPU granularity.
	FragmentationGradient
)

// FractionPlacer packs fractional requests onto GPUs. It is a plain value,
// safe for concurrent use.
type FractionPlacer struct {
	Policy FractionPolicy
}

// FractionResult is a packing.
// It is a plain value, safe for concurrent reads.
type FractionResult struct {
	// GPU holds, per request, the index of its GPU in the input, or -1
	// when it fits nowhere.
	GPU []int
	// UsedMiB is each GPU's memory in use after the packing.
	UsedMiB []int
	// Unplaced counts the requests left out; Shared the GPUs holding more
	// than one request's worth of use (or use before and a request now).
	Unplaced, Shared int
	// Before and After are the fragmentation of the GPUs' free memory
	// (see [Fragmentation]) with the requests as the workload.
	Before, After float64
}

// Limits on the placer's input.
const maxFraction = 1 << 20

// Place packs the requests. Bad input (a fraction of 0 or above 1, both or
// neither of Fraction and MemoryMiB, a GPU without memory or with more in
// use than it has) is an error wrapping ErrBadRequest.
func (fp FractionPlacer) Place(gpus []FractionGPU, reqs []FractionRequest) (*FractionResult, error) {
	if err := checkFractions(gpus, reqs); err != nil {
		return nil, err
	}
	used := make([]int, len(gpus))
	for g := range gpus {
		used[g] = gpus[g].UsedMiB
	}
	res := &FractionResult{GPU: make([]int, len(reqs)), Before: Fragmentation(gpus, used, reqs)}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	if fp.Policy == BestFitDecreasing {
		size := make([]int, len(reqs))
		for i := range reqs {
			size[i] = reqs[i].need(smallest(gpus))
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(size[b], size[a]) })
	}
	hosted := make([]int, len(gpus))
	for _, r := range order {
		g := fp.choose(gpus, used, reqs, r)
		res.GPU[r] = g
		if g < 0 {
			res.Unplaced++
			continue
		}
		used[g] += reqs[r].need(gpus[g].MemoryMiB)
		hosted[g]++
	}
	for g := range gpus {
		if hosted[g] > 1 || hosted[g] == 1 && gpus[g].UsedMiB > 0 {
			res.Shared++
		}
	}
	res.UsedMiB = used
	res.After = Fragmentation(gpus, used, reqs)
	return res, nil
}

func smallest(gpus []FractionGPU) int {
	m := 0
	for _, g := range gpus {
		if m == 0 || g.MemoryMiB < m {
			m = g.MemoryMiB
		}
	}
	return m
}

func checkFractions(gpus []FractionGPU, reqs []FractionRequest) error {
	if len(gpus) > maxFraction || len(reqs) > maxFraction {
		return fmt.Errorf("%w: %d GPUs and %d requests (at most %d each)", ErrBadRequest, len(gpus), len(reqs), maxFraction)
	}
	for g, x := range gpus {
		if x.MemoryMiB <= 0 || x.UsedMiB < 0 || x.UsedMiB > x.MemoryMiB {
			return fmt.Errorf("%w: gpus[%d]: %d MiB used of %d (want 0 <= used <= memory, memory > 0)", ErrBadRequest, g, x.UsedMiB, x.MemoryMiB)
		}
	}
	for i, r := range reqs {
		switch {
		case r.MemoryMiB != 0 && r.Fraction != 0:
			return fmt.Errorf("%w: requests[%d]: give a fraction or an amount of memory, not both", ErrBadRequest, i)
		case r.MemoryMiB < 0:
			return fmt.Errorf("%w: requests[%d]: memory %d MiB (want > 0)", ErrBadRequest, i, r.MemoryMiB)
		case r.MemoryMiB == 0 && !(r.Fraction > 0 && r.Fraction <= 1):
			return fmt.Errorf("%w: requests[%d]: GPU fraction %v (want 0 < fraction <= 1)", ErrBadRequest, i, r.Fraction)
		}
	}
	return nil
}

// fits reports whether request r fits on GPU g with used MiB taken.
func fits(g *FractionGPU, used int, r *FractionRequest) bool {
	return (r.Type == "" || r.Type == g.Type) && used+r.need(g.MemoryMiB) <= g.MemoryMiB
}

// choose returns the GPU of request r, or -1.
func (fp FractionPlacer) choose(gpus []FractionGPU, used []int, reqs []FractionRequest, r int) int {
	best, bestKey := -1, [2]float64{}
	for g := range gpus {
		if !fits(&gpus[g], used[g], &reqs[r]) {
			continue
		}
		left := gpus[g].MemoryMiB - used[g] - reqs[r].need(gpus[g].MemoryMiB)
		key := [2]float64{0, float64(left)}
		if fp.Policy == FragmentationGradient {
			before := gpuFragmentation(&gpus[g], used[g], reqs)
			after := gpuFragmentation(&gpus[g], used[g]+reqs[r].need(gpus[g].MemoryMiB), reqs)
			key[0] = after - before
		}
		if best < 0 || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = g, key
		}
	}
	return best
}

// Fragmentation returns the share of the GPUs' free memory that a request
// drawn from the workload (each request equally likely) cannot use, in
// expectation: on each GPU, the free memory counts as fragmented for a
// request that does not fit in it or may not run on its type (Weng et al.,
// USENIX ATC 2023, section 3.2, equations 1 and 2, with the GPU's memory as
// the one resource). It is
// 0 when every request fits in the free memory of every GPU that has some,
// and 1 when none fits anywhere; 0 without free memory or workload. used
// gives each GPU's memory in use.
func Fragmentation(gpus []FractionGPU, used []int, workload []FractionRequest) float64 {
	var frag, free float64
	for g := range gpus {
		frag += gpuFragmentation(&gpus[g], used[g], workload)
		free += float64(gpus[g].MemoryMiB - used[g])
	}
	if free == 0 {
		return 0
	}
	return frag / free
}

// gpuFragmentation is the expected free memory of one GPU that a request
// of the workload cannot use.
func gpuFragmentation(g *FractionGPU, used int, workload []FractionRequest) float64 {
	if len(workload) == 0 {
		return 0
	}
	free := float64(g.MemoryMiB - used)
	var f float64
	for i := range workload {
		if !fits(g, used, &workload[i]) {
			f += free
		}
	}
	return f / float64(len(workload))
}
