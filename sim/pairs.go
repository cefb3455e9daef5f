package sim

import (
	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
)

// pairCache holds the co-located rates of every class of job in the trace
// (one class per JobKey), looked up once, and hands the policies a view
// over the jobs present in a round.
type pairCache struct {
	table *allocation.TablePairs
	class map[int]int // job ID -> class
}

func newPairCache(cfg Config, jobs []*running) (*pairCache, error) {
	if cfg.Colocation == nil {
		return nil, nil
	}
	index := map[perfmodel.JobKey]int{}
	var keys []perfmodel.JobKey
	pc := &pairCache{class: map[int]int{}}
	for _, r := range jobs {
		c, ok := index[r.rec.Key]
		if !ok {
			c = len(keys)
			index[r.rec.Key] = c
			keys = append(keys, r.rec.Key)
		}
		pc.class[r.rec.ID] = c
	}
	t, err := allocation.NewTablePairs(cfg.Colocation, keys, cfg.Types)
	if err != nil {
		return nil, err
	}
	pc.table = t
	return pc, nil
}

// view returns ClassPairRates over the jobs of a round, in their order.
func (pc *pairCache) view(active []*running) *pairView {
	v := &pairView{table: pc.table, class: make([]int, len(active))}
	for m, r := range active {
		v.class[m] = pc.class[r.rec.ID]
	}
	return v
}

// pairView implements allocation.ClassPairRates.
type pairView struct {
	table *allocation.TablePairs
	class []int
}

func (v *pairView) Classes() int    { return v.table.Classes() }
func (v *pairView) Class(m int) int { return v.class[m] }
func (v *pairView) ClassRates(ca, cb, k int) (float64, float64) {
	return v.table.ClassRates(ca, cb, k)
}
func (v *pairView) Rates(a, b, k int) (float64, float64) {
	return v.table.ClassRates(v.class[a], v.class[b], k)
}
