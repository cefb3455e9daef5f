package allocation

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// PartitionedCapacity lists the GPU types of a cluster and how many units
// of each it has, as allocation policies see a cluster whose GPUs are
// partitioned: a GPU in MIG mode counts as its GPU instances, one unit of
// [topology.MIGSliceType] per instance ("h100-80gb-3g.40gb"); a GPU of a
// type that share maps to n > 1 is time-sliced into n equal shares, n units
// of [topology.FractionType] with fraction 1/n ("a100-frac0.5"); every
// other GPU counts whole under its type. Types are sorted by name. With it
// heterogeneity-aware policies treat slices and shares as types of their
// own, so that max-min fairness can give a job, say, 0.6 of its time on
// 3g.40gb slices.
func PartitionedCapacity(c *topology.Cluster, share map[topology.GPUType]int) (types []topology.GPUType, capacity []int, err error) {
	count := map[topology.GPUType]int{}
	for si := range c.Servers {
		for gi := range c.Servers[si].GPUs {
			g := &c.Servers[si].GPUs[gi]
			switch n := share[g.Type]; {
			case g.MIG != nil:
				p, err := g.MIGProduct()
				if err != nil {
					return nil, nil, invalid("server %q GPU %d: %v", c.Servers[si].ID, gi, err)
				}
				for _, in := range g.MIG.Instances {
					count[topology.MIGSliceType(p, in.Profile)]++
				}
			case n < 0 || n > maxShares:
				return nil, nil, invalid("share of %s is %d (want 1 to %d)", g.Type, n, maxShares)
			case n > 1:
				t, err := topology.FractionType(g.Type, 1/float64(n))
				if err != nil {
					return nil, nil, invalid("share of %s: %v", g.Type, err)
				}
				count[t] += n
			default:
				count[g.Type]++
			}
		}
	}
	for t := range count {
		types = append(types, t)
	}
	slices.Sort(types)
	capacity = make([]int, len(types))
	for i, t := range types {
		capacity[i] = count[t]
	}
	return types, capacity, nil
}

// maxShares bounds the time-slicing factor.
const maxShares = 1024

// PartitionedProblem builds the Problem of jobs on a partitioned cluster
// (see PartitionedCapacity): each job's throughput on each type comes from
// model with the job's key (keys[i] for jobs[i]; a key's scale factor is
// replaced by the job's). A type the model does not know gives 0 (the job
// cannot run there); an unknown job is an error. Jobs of more than one GPU
// get 0 on MIG slices and time-sliced shares: MIG instances have no
// peer-to-peer path between them, and a gang of shares would time-slice
// against itself. Jobs' Throughput fields are overwritten; the other
// fields are kept.
func PartitionedProblem(c *topology.Cluster, share map[topology.GPUType]int, jobs []Job, keys []perfmodel.JobKey, model perfmodel.ThroughputModel) (*Problem, error) {
	if len(keys) != len(jobs) {
		return nil, invalid("%d jobs but %d job keys", len(jobs), len(keys))
	}
	types, capacity, err := PartitionedCapacity(c, share)
	if err != nil {
		return nil, err
	}
	p := &Problem{Types: types, Capacity: capacity, Jobs: slices.Clone(jobs)}
	for m := range p.Jobs {
		j := &p.Jobs[m]
		j.Throughput = make([]float64, len(types))
		for k, t := range types {
			_, _, slice := topology.ParseMIGSliceType(t)
			_, _, frac := topology.ParseFractionType(t)
			if j.ScaleFactor > 1 && (slice || frac) {
				continue
			}
			r, err := model.Throughput(keys[m].WithScaleFactor(j.ScaleFactor), t)
			switch {
			case errors.Is(err, perfmodel.ErrUnknownGPUType):
			case err != nil:
				return nil, fmt.Errorf("allocation: job %d: %w", j.ID, err)
			default:
				j.Throughput[k] = r
			}
		}
	}
	return p, p.Validate()
}
