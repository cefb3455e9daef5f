package perfmodel

import (
	"errors"

	"github.com/gpusched/gpusched/topology"
)

// Extrapolated answers for scale factors a table does not have, assuming
// linear scaling from the nearest measured one: a job's rate at n GPUs is
// its measured rate at s GPUs times n/s, with s the largest measured scale
// factor not above n (or the smallest, when n is below them all). Measured
// keys are answered from the table as they are. Traces such as Philly's
// and ITP's hold jobs of 16 to 128 GPUs, which Gavel never measured; this
// is the simplest assumption that lets them run, and it is optimistic for
// communication-bound models.
//
// An Extrapolated is safe for concurrent use (its Table is immutable).
type Extrapolated struct {
	Table *Table
}

// Throughput implements ThroughputModel.
func (e Extrapolated) Throughput(k JobKey, t topology.GPUType) (float64, error) {
	v, err := e.Table.Throughput(k, t)
	if err == nil || !errors.Is(err, ErrUnknownJob) || k.ScaleFactor < 1 {
		return v, err
	}
	sfs := e.Table.ScaleFactors(k)
	if len(sfs) == 0 {
		return 0, err
	}
	s := sfs[0]
	for _, c := range sfs {
		if c <= k.ScaleFactor {
			s = c
		}
	}
	base, err2 := e.Table.Throughput(k.WithScaleFactor(s), t)
	if err2 != nil {
		return 0, err2
	}
	return base * float64(k.ScaleFactor) / float64(s), nil
}
