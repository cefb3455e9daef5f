package scheduler

import (
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// classTable holds the co-located rates of every class of job seen (one
// class per model key, in order of first submission), looked up once per
// new class and type: O(classes x types) lookups for a new class.
type classTable struct {
	model perfmodel.ColocationModel
	types []topology.GPUType
	index map[perfmodel.JobKey]int
	keys  []perfmodel.JobKey
	// rates[ca][cb][k] = (ta, tb).
	rates [][][][2]float64
}

func newClassTable(m perfmodel.ColocationModel) *classTable {
	return &classTable{model: m, index: map[perfmodel.JobKey]int{}}
}

// setTypes follows a change of the scheduler's types: every rate is looked
// up again, and every key keeps its class (jobs remember theirs). A pair
// the model cannot rate on a type, or rates out of range, leave that pair
// unable to share GPUs of that type: its jobs were accepted for the old
// types, and a new type the model does not know (an H100 added to a
// cluster rated by Gavel's table) must not drop their classes.
func (ct *classTable) setTypes(types []topology.GPUType) {
	ct.types = types
	keys := ct.keys
	ct.index = map[perfmodel.JobKey]int{}
	ct.keys, ct.rates = nil, nil
	for _, k := range keys {
		_, _ = ct.add(k, true)
	}
}

// classOf returns the class of a key, adding it with its rates. A pair the
// model cannot rate on a type (an error) cannot share GPUs of that type,
// as in setTypes; rates neither 0 nor in [allocation.MinRate,
// allocation.MaxRate] are an error and the key is not added.
func (ct *classTable) classOf(k perfmodel.JobKey) (int, error) {
	if c, ok := ct.index[k]; ok {
		return c, nil
	}
	return ct.add(k, false)
}

// add adds key k as the next class. A pair's rates are 0 on a type where
// the model fails (it cannot share GPUs of that type); rates out of range,
// or different rates for two jobs of one key (which would not mirror), are
// an error, or also 0 when lenient. The other pairs mirror by
// construction.
func (ct *classTable) add(k perfmodel.JobKey, lenient bool) (int, error) {
	c := len(ct.keys)
	row := make([][][2]float64, c+1)
	for cb := range c + 1 {
		row[cb] = make([][2]float64, len(ct.types))
	}
	for cb := range c + 1 {
		other := k
		if cb < c {
			other = ct.keys[cb]
		}
		for t, typ := range ct.types {
			ta, tb, err := ct.model.Colocated(k, other, typ)
			if err != nil {
				continue // this pair cannot share GPUs of this type
			}
			if !allocation.ValidRate(ta) || !allocation.ValidRate(tb) {
				if lenient {
					continue
				}
				return 0, fmt.Errorf("co-located rates of %s and %s on %s are %v and %v, outside [%g, %g] steps/s (0 means they cannot share)",
					k, other, typ, ta, tb, allocation.MinRate, allocation.MaxRate)
			}
			if cb == c && ta != tb {
				// Two jobs of one key: which is which cannot matter.
				if lenient {
					continue
				}
				return 0, fmt.Errorf("co-located rates of %s with itself on %s are %v and %v: two jobs of one key must get the same rate",
					k, typ, ta, tb)
			}
			row[cb][t] = [2]float64{ta, tb}
		}
	}
	ct.index[k] = c
	ct.keys = append(ct.keys, k)
	ct.rates = append(ct.rates, row)
	// The column: (ca, c) is the mirror of (c, ca).
	for ca := range c {
		col := make([][2]float64, len(ct.types))
		for t := range ct.types {
			r := row[ca][t]
			col[t] = [2]float64{r[1], r[0]}
		}
		ct.rates[ca] = append(ct.rates[ca], col)
	}
	return c, nil
}

// view returns the class rates over a tier's jobs, reusing v. Jobs
// without a model key share one extra class that pairs with nobody.
func (ct *classTable) view(jobs []*job, v *pairView) *pairView {
	if v == nil {
		v = &pairView{}
	}
	v.table = ct
	v.keys = len(ct.keys)
	v.classes = v.keys
	v.class = resize(v.class, len(jobs))
	for m, j := range jobs {
		if j.class < 0 {
			v.class[m] = v.keys
			v.classes = v.keys + 1
			continue
		}
		v.class[m] = j.class
	}
	return v
}

// pairView implements allocation.ClassPairRates over a problem's jobs.
type pairView struct {
	table         *classTable
	class         []int
	keys, classes int
}

var _ allocation.CheckedPairRates = (*pairView)(nil)

// RatesChecked implements allocation.CheckedPairRates: the class table
// checks every rate when it adds a class (classOf refuses a key with rates
// out of range, setTypes keeps such a pair at 0).
func (v *pairView) RatesChecked() bool { return true }

func (v *pairView) Classes() int { return v.classes }

func (v *pairView) Class(m int) int { return v.class[m] }

func (v *pairView) ClassRates(ca, cb, k int) (float64, float64) {
	if ca >= v.keys || cb >= v.keys {
		return 0, 0
	}
	r := v.table.rates[ca][cb][k]
	return r[0], r[1]
}

func (v *pairView) Rates(a, b, k int) (float64, float64) {
	return v.ClassRates(v.class[a], v.class[b], k)
}
