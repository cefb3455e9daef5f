package sim

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/topology"
)

// GavelRounds runs Gavel (Narayanan et al., OSDI 2020: a policy's
// allocation over GPU types, turned into rounds by its mechanism,
// allocation.Rounds) as an elastic.TypedPolicy on a heterogeneous
// cluster, as Sia's evaluation runs it (SOSP 2023, section 4.3: jobs
// rigid at their tuned GPUs and batch sizes, the max-sum-throughput
// policy, 360 s rounds). Each call is one round: the jobs present become
// an allocation.Problem (each at its base demand, MinWorkers x
// GPUsPerWorker GPUs, its rate on each pool the curve's there, 0 where it
// has none), and the round's assignments are the answer: a job scheduled
// on a pool runs its base demand there, the others wait. Call it every
// Rounds.RoundLength seconds (HeteroConfig.Interval, EveryInterval): the
// mechanism credits each round in full. Rounds must be set, with its
// Policy (allocation.MaxThroughput is Sia's choice); the pools' types must
// be distinct. It keeps the mechanism's state: not safe for concurrent
// use.
type GavelRounds struct {
	Rounds *allocation.Rounds
}

// AllocateTyped implements elastic.TypedPolicy.
func (g *GavelRounds) AllocateTyped(jobs []elastic.State, pools []elastic.Pool) ([]elastic.Assignment, error) {
	if g.Rounds == nil || g.Rounds.Policy == nil {
		return nil, fmt.Errorf("%w: GavelRounds needs Rounds and its Policy", elastic.ErrInvalid)
	}
	p := &allocation.Problem{Types: make([]topology.GPUType, len(pools)), Capacity: make([]int, len(pools))}
	for k, pool := range pools {
		p.Types[k], p.Capacity[k] = pool.Type, pool.GPUs()
	}
	out := make([]elastic.Assignment, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	now := jobs[0].Arrival + jobs[0].Age
	index := make(map[int]int, len(jobs))
	for i := range jobs {
		s := &jobs[i]
		index[s.ID] = i
		rates := make([]float64, len(pools))
		for k := range pools {
			if c := s.On(k); c != nil {
				rates[k] = c.Throughput(s.MinWorkers)
			}
		}
		p.Jobs = append(p.Jobs, allocation.Job{ID: s.ID, ScaleFactor: s.MinWorkers * s.GPUsPerWorker, RemainingSteps: s.Remaining,
			Throughput: rates, Arrival: s.Arrival})
	}
	round, err := g.Rounds.Next(context.Background(), p, now)
	if err != nil {
		return nil, fmt.Errorf("sim: Gavel's round at %v s: %w", now, err)
	}
	for _, a := range round.Assignments {
		for _, id := range a.JobIDs {
			i, ok := index[id]
			if !ok {
				return nil, fmt.Errorf("%w: Gavel's round assigns job %d, which is not present", elastic.ErrInvalid, id)
			}
			out[i] = elastic.Assignment{Pool: a.TypeIndex, Workers: jobs[i].MinWorkers}
		}
	}
	return out, nil
}
