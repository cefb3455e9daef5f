package elastic

import (
	"fmt"
	"math"
)

// Item is one choice within a group: its weight (GPUs) and value. It is a
// plain value, safe for concurrent use.
type Item struct {
	Weight int
	Value  float64
}

// MultipleChoiceKnapsack chooses at most one item from each group so that
// the weights sum to at most capacity and the values are as large as
// possible; it returns the chosen item's index in every group (-1 for
// none) and the total value. It is the dynamic program of Lyra's second
// phase (Li et al., "Lyra: Elastic Scheduling for Deep Learning Clusters",
// EuroSys 2023, section 5.2): O(capacity x items) time, O(groups x
// capacity) memory for the choices. Ties go to the smaller total weight,
// then to the earlier item. Weights must be in [0, MaxGPUs]; with the
// capacity cut to what the groups can weigh together, groups x (capacity
// + 1) must stay within MaxKnapsackCells and items x (capacity + 1) within
// MaxKnapsackWork (errors wrap ErrInvalid).
func MultipleChoiceKnapsack(groups [][]Item, capacity int) ([]int, float64, error) {
	if capacity < 0 {
		return nil, 0, fmt.Errorf("%w: capacity %d", ErrInvalid, capacity)
	}
	reach, items := 0, 0 // the most all groups can weigh together; the items
	for g, its := range groups {
		heaviest := 0
		for i, it := range its {
			if it.Weight < 0 || it.Weight > MaxGPUs || math.IsNaN(it.Value) || math.IsInf(it.Value, 0) {
				return nil, 0, fmt.Errorf("%w: group %d item %d has weight %d (want 0 to %d) and value %v", ErrInvalid, g, i, it.Weight, MaxGPUs, it.Value)
			}
			heaviest = max(heaviest, it.Weight)
		}
		reach += heaviest
		items += len(its)
	}
	// Capacity beyond what the groups can use changes nothing.
	capacity = min(capacity, reach)
	if n := len(groups); n > 0 && capacity+1 > MaxKnapsackCells/n || items > 0 && capacity+1 > MaxKnapsackWork/items {
		return nil, 0, fmt.Errorf("%w: knapsack of %d groups, %d items and %d GPUs: more than %d cells or %d steps",
			ErrInvalid, len(groups), items, capacity, MaxKnapsackCells, MaxKnapsackWork)
	}
	// best[c]: the best value of weight at most c over the groups so far.
	best := make([]float64, capacity+1)
	next := make([]float64, capacity+1)
	choice := make([][]int32, len(groups))
	for g, its := range groups {
		ch := make([]int32, capacity+1)
		copy(next, best)
		for c := range ch {
			ch[c] = -1
		}
		// Item by item over every capacity: for each capacity the items
		// are tried in order, as in a loop over items inside one over
		// capacities, so the choices (ties to the earlier item) are the
		// same; the inner loop is a plain pass over two arrays.
		for i, it := range its {
			if it.Weight > capacity || it.Value <= 0 && it.Weight > 0 {
				continue
			}
			v, dst, dch := it.Value, next[it.Weight:], ch[it.Weight:]
			for c, b := range best[:len(dst)] {
				if x := b + v; x > dst[c] {
					dst[c], dch[c] = x, int32(i)
				}
			}
		}
		choice[g] = ch
		best, next = next, best
	}
	// The smallest capacity reaching the best value, then walk back.
	c := 0
	for k := range best {
		if best[k] > best[c] {
			c = k
		}
	}
	out := make([]int, len(groups))
	total := best[c]
	for g := len(groups) - 1; g >= 0; g-- {
		i := int(choice[g][c])
		out[g] = i
		if i >= 0 {
			c -= groups[g][i].Weight
		}
	}
	return out, total, nil
}

// ScalingItems returns the knapsack group of an elastic job under Lyra's
// linear scaling (section 5.2): with T(w) = tMin * wMax / w the running time
// on w workers (tMin on wMax), item k (k = 1 .. wMax - wMin) gives the job
// k extra workers of gpusPerWorker GPUs each and is worth
// T(wMin) - T(wMin + k), the running time it saves. Lyra's worked example,
// wMin 2, wMax 6, tMin 20, has values 20, 30, 36, 40. wMax is at most
// MaxWorkers and gpusPerWorker at most MaxGPUsPerServer (errors wrap
// ErrInvalid).
func ScalingItems(wMin, wMax, gpusPerWorker int, tMin float64) ([]Item, error) {
	if wMin < 1 || wMax < wMin || wMax > MaxWorkers || gpusPerWorker < 1 || gpusPerWorker > MaxGPUsPerServer || !(tMin > 0) || math.IsInf(tMin, 0) {
		return nil, fmt.Errorf("%w: workers %d to %d (at most %d), %d GPUs each (at most %d), running time %v",
			ErrInvalid, wMin, wMax, MaxWorkers, gpusPerWorker, MaxGPUsPerServer, tMin)
	}
	t := func(w int) float64 { return tMin * float64(wMax) / float64(w) }
	items := make([]Item, 0, wMax-wMin)
	for k := 1; k <= wMax-wMin; k++ {
		items = append(items, Item{Weight: k * gpusPerWorker, Value: t(wMin) - t(wMin+k)})
	}
	return items, nil
}
