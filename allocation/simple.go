package allocation

import "context"

// Proportional is Gavel's proportional baseline (proportional.py): every
// job gets the same share of each type, X_mk = (n_k / M) / r, where r is
// the largest row sum, so X_mk = n_k / N with N = sum_j n_j. Gavel ignores
// scale factors here, which oversubscribes the cluster when the jobs ask
// for more than N GPUs; as a policy it is therefore scaled to
// X_mk = n_k / max(N, sum_m sf_m), which is feasible and equals Gavel's
// whenever Gavel's is. Max-min fairness normalises by Gavel's unscaled
// rates, as Gavel does.
// It holds no state and is safe for concurrent use.
type Proportional struct{}

// Allocate implements Policy.
func (Proportional) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := newAllocation(p)
	share := proportionalShare(p)
	total, demand := 0, 0
	for _, n := range p.Capacity {
		total += n
	}
	for m := range p.Jobs {
		demand += p.Jobs[m].ScaleFactor
	}
	scale := 1.0
	if demand > total {
		scale = float64(total) / float64(demand)
	}
	for m := range p.Jobs {
		for k, x := range share {
			a.X[m][k] = x * scale
		}
	}
	return a, nil
}

// proportionalShare returns n_k / sum_j n_j (all zero without GPUs).
func proportionalShare(p *Problem) []float64 {
	total := 0
	for _, n := range p.Capacity {
		total += n
	}
	share := make([]float64, len(p.Types))
	if total == 0 || len(p.Jobs) == 0 {
		return share
	}
	for k, n := range p.Capacity {
		share[k] = float64(n) / float64(total)
	}
	return share
}

// proportionalRates returns each job's rate under Proportional, with the
// throughput matrix tput.
func proportionalRates(p *Problem, tput [][]float64) []float64 {
	share := proportionalShare(p)
	out := make([]float64, len(p.Jobs))
	for m := range p.Jobs {
		for k, x := range share {
			out[m] += x * tput[m][k]
		}
	}
	return out
}

// Isolated is Gavel's isolated baseline (isolated.py): each job gets an
// equal 1/M share of every type, X_mk = n_k / (M sf_m), with a job's row
// scaled down to sum to 1 when it would exceed it. Finish-time fairness
// measures against it.
// It holds no state and is safe for concurrent use.
type Isolated struct{}

// Allocate implements Policy.
func (Isolated) Allocate(_ context.Context, p *Problem) (*Allocation, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return isolated(p), nil
}

func isolated(p *Problem) *Allocation {
	a := newAllocation(p)
	n := float64(len(p.Jobs))
	for m := range p.Jobs {
		sum := 0.0
		for k, c := range p.Capacity {
			a.X[m][k] = float64(c) / n / float64(p.Jobs[m].ScaleFactor)
			sum += a.X[m][k]
		}
		if sum > 1 {
			for k := range a.X[m] {
				a.X[m][k] /= sum
			}
		}
	}
	return a
}

// rates returns every job's rate sum_k T_mk X_mk under a, with tput.
func rates(a *Allocation, tput [][]float64) []float64 {
	out := make([]float64, len(a.X))
	for m, row := range a.X {
		for k, x := range row {
			out[m] += x * tput[m][k]
		}
	}
	return out
}
