package allocation

import (
	"fmt"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// ClassPairRates is PairRates for jobs that fall into classes, such as
// Gavel's job types, where the rates of two co-located jobs depend only on
// their classes. Space-sharing policies use it to price all pairs in time
// linear in the number of jobs.
// Implementations must allow concurrent calls as for PairRates.
type ClassPairRates interface {
	PairRates
	// Classes returns the number of classes, and Class the class of job m
	// (an index into Problem.Jobs), in [0, Classes()).
	Classes() int
	Class(m int) int
	// ClassRates returns the rates of a job of class ca sharing GPUs of
	// type k with a job of class cb.
	ClassRates(ca, cb, k int) (ta, tb float64)
}

// CheckedPairRates is a ClassPairRates whose rates were checked when it
// was built: RatesChecked reports that every ClassRates value is 0 or in
// [MinRate, MaxRate], so Problem.Validate does not look them up again on
// every call (it checks a ClassPairRates' classes squared times types
// rates otherwise). TablePairs and the scheduler's class table implement
// it. RatesChecked also promises that the rates mirror (ClassRates(cb, ca,
// k) is ClassRates(ca, cb, k) swapped). An implementation that reports
// true for rates out of range gives the policies values they were not
// written for. Implementations must
// allow concurrent calls as for PairRates.
type CheckedPairRates interface {
	ClassPairRates
	RatesChecked() bool
}

var _ CheckedPairRates = (*TablePairs)(nil)

// MaxPairRates bounds the rates a TablePairs holds (classes squared times
// GPU types): 4 million, 64 MiB; and the co-located rates Problem.Validate
// checks for any other PairRates (job pairs, or classes squared, times GPU
// types).
const MaxPairRates = 1 << 22

// TablePairs gives co-located rates from a perfmodel.ColocationModel (such
// as Gavel's measured table) for jobs identified by their JobKeys. It
// implements ClassPairRates, with one class per distinct JobKey, and caches
// the rates of every class pair and type. It is immutable once built and
// safe for concurrent use.
type TablePairs struct {
	class   []int
	classes int
	types   int
	// rates[(ca*classes+cb)*types+k] = (ta, tb).
	rates [][2]float64
}

// NewTablePairs looks up the co-located rates of every pair of distinct
// job keys among keys (one per job, in the order of Problem.Jobs) on every
// type. Pairs the model does not know (such as jobs of different scale
// factors) get (0, 0); a key or type it does not know is an error. The
// table holds classes x classes x types rates, at most MaxPairRates
// (ErrInvalidProblem beyond), every rate must be 0 or in [MinRate,
// MaxRate], and the rates must mirror (the model's rates of b and a are
// those of a and b swapped; ErrInvalidProblem otherwise).
func NewTablePairs(model perfmodel.ColocationModel, keys []perfmodel.JobKey, types []topology.GPUType) (*TablePairs, error) {
	tp := &TablePairs{class: make([]int, len(keys)), types: len(types)}
	index := map[perfmodel.JobKey]int{}
	var distinct []perfmodel.JobKey
	for m, k := range keys {
		c, ok := index[k]
		if !ok {
			c = len(distinct)
			index[k] = c
			distinct = append(distinct, k)
		}
		tp.class[m] = c
	}
	tp.classes = len(distinct)
	if n := tp.classes; n > 0 && len(types) > 0 && (n > MaxPairRates/n || n*n > MaxPairRates/len(types)) {
		return nil, invalid("co-located rates of %d job classes on %d GPU types: more than %d pairs", n, len(types), MaxPairRates)
	}
	tp.rates = make([][2]float64, tp.classes*tp.classes*tp.types)
	for ca, a := range distinct {
		for cb, b := range distinct {
			for k, t := range types {
				ta, tb, err := model.Colocated(a, b, t)
				if err != nil {
					return nil, fmt.Errorf("allocation: co-located rates: %w", err)
				}
				if badPairRate(ta) || badPairRate(tb) {
					return nil, invalid("co-located rates of %s and %s on %s are %v and %v, outside [%g, %g] steps/s",
						a, b, t, ta, tb, MinRate, MaxRate)
				}
				tp.rates[(ca*tp.classes+cb)*tp.types+k] = [2]float64{ta, tb}
			}
		}
	}
	// The rates mirror (as PairRates requires): policies ask for a pair
	// in either order.
	for ca := range tp.classes {
		for cb := ca; cb < tp.classes; cb++ {
			for k, t := range types {
				r, q := tp.rates[(ca*tp.classes+cb)*tp.types+k], tp.rates[(cb*tp.classes+ca)*tp.types+k]
				if r[0] != q[1] || r[1] != q[0] {
					return nil, invalid("co-located rates of %s and %s on %s are (%v, %v), but (%v, %v) asked the other way",
						distinct[ca], distinct[cb], t, r[0], r[1], q[1], q[0])
				}
			}
		}
	}
	return tp, nil
}

// Classes implements ClassPairRates.
func (tp *TablePairs) Classes() int { return tp.classes }

// Class implements ClassPairRates.
func (tp *TablePairs) Class(m int) int { return tp.class[m] }

// ClassRates implements ClassPairRates.
func (tp *TablePairs) ClassRates(ca, cb, k int) (ta, tb float64) {
	r := tp.rates[(ca*tp.classes+cb)*tp.types+k]
	return r[0], r[1]
}

// RatesChecked implements CheckedPairRates: NewTablePairs checked every
// rate.
func (tp *TablePairs) RatesChecked() bool { return true }

// Rates implements PairRates.
func (tp *TablePairs) Rates(a, b, k int) (ta, tb float64) {
	return tp.ClassRates(tp.class[a], tp.class[b], k)
}
