package ring

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/topology"
)

// runPrivate is the executor as it was before it ran on cluster.State,
// with its own model of the cluster, kept as the reference RunOn must
// match. It executes the jobs in the order given. est may be nil (Estimates is
// called); else it holds one estimate per job, finite and in [0, MaxSlot].
// A run whose next event lies beyond slot MaxSlot stops with an error
// wrapping ErrNoProgress; a cancelled ctx stops it with ctx's error.
func (e *Executor) runPrivate(ctx context.Context, c *topology.Cluster, jobs []Job, est []float64) (*Schedule, error) {
	if e.Placer == nil {
		return nil, fmt.Errorf("%w: no placer", ErrInvalidSetting)
	}
	if e.Horizon > MaxSlot {
		return nil, fmt.Errorf("%w: horizon %d beyond MaxSlot (%d)", ErrInvalidSetting, e.Horizon, MaxSlot)
	}
	if est == nil {
		var err error
		if est, err = e.Estimates(c, jobs); err != nil {
			return nil, err
		}
	} else {
		if err := validateJobs(jobs, c.NumGPUs()); err != nil {
			return nil, err
		}
		if len(est) != len(jobs) {
			return nil, fmt.Errorf("%w: %d estimates for %d jobs", ErrInvalidSetting, len(est), len(jobs))
		}
		for i, v := range est {
			if !(v >= 0 && v <= MaxSlot) {
				return nil, fmt.Errorf("%w: estimate %v slots for job %d, outside [0, %d]", ErrInvalidSetting, v, jobs[i].ID, MaxSlot)
			}
		}
	}
	ns := len(c.Servers)
	st := &State{Free: make([][]bool, ns), FreeCount: make([]int, ns), Load: make([][]float64, ns), LoadSum: make([]float64, ns), Hosts: make([]int, ns), Spanning: make([]int, ns)}
	for s := range c.Servers {
		n := len(c.Servers[s].GPUs)
		st.Free[s] = make([]bool, n)
		for i := range st.Free[s] {
			st.Free[s][i] = true
		}
		st.FreeCount[s] = n
		st.TotalFree += n
		st.Load[s] = make([]float64, n)
	}
	// Jobs by arrival (stable: the given order among equal arrivals).
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return jobs[a].Arrival - jobs[b].Arrival })
	out := &Schedule{Jobs: make([]Outcome, len(jobs))}
	var queue []int // indices of arrived, waiting jobs, in the given order
	var running []*ringRun
	next := 0 // next arrival in order
	t := 0
	done := 0
	for step := 0; done < len(jobs); step++ {
		if step%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if e.Horizon > 0 && t > e.Horizon {
			return nil, fmt.Errorf("%w: %d of %d jobs left at slot %d (horizon %d)", ErrHorizon, len(jobs)-done, len(jobs), t, e.Horizon)
		}
		changed := false
		// Finish.
		kept := running[:0]
		for _, r := range running {
			if r.left > 1e-9 {
				kept = append(kept, r)
				continue
			}
			out.Jobs[r.job].Finish = t
			done++
			changed = true
			for _, sh := range r.servers {
				st.FreeCount[sh.Server] += sh.GPUs
				st.TotalFree += sh.GPUs
				st.Hosts[sh.Server]--
				if r.spans {
					st.Spanning[sh.Server]--
				}
			}
			for srv, gpus := range out.Jobs[r.job].GPUs {
				for _, g := range gpus {
					st.Free[srv][g] = true
				}
			}
		}
		running = kept
		// Arrive, keeping the given order in the queue.
		arrived := false
		for next < len(order) && jobs[order[next]].Arrival <= t {
			queue = append(queue, order[next])
			next++
			arrived = true
		}
		if arrived {
			slices.Sort(queue)
		}
		// Place.
		st.Now = t
		kq := queue[:0]
		blocked := false
		for _, ji := range queue {
			if blocked {
				kq = append(kq, ji)
				continue
			}
			j := &jobs[ji]
			var set placement.GPUSet
			if j.GPUs <= st.TotalFree {
				var err error
				if set, err = e.Placer.Place(c, st, j, est[ji]); err != nil {
					return nil, fmt.Errorf("job %d: %w", j.ID, err)
				}
			}
			if set == nil {
				kq = append(kq, ji)
				blocked = e.Strict
				continue
			}
			r, err := e.startPrivate(st, set, j, ji, est[ji])
			if err != nil {
				return nil, err
			}
			out.Jobs[ji] = Outcome{ID: j.ID, Start: t, GPUs: set, Servers: len(r.servers), Estimate: est[ji]}
			running = append(running, r)
			changed = true
		}
		queue = kq
		if changed {
			out.Events++
			if err := e.speeds(st, jobs, running, out); err != nil {
				return nil, err
			}
		}
		if len(running) == 0 {
			if done == len(jobs) {
				break
			}
			if next == len(order) {
				return nil, fmt.Errorf("%w: %d jobs wait on an idle cluster at slot %d (first: job %d, %d GPUs)", ErrUnplaceable, len(queue), t, jobs[queue[0]].ID, jobs[queue[0]].GPUs)
			}
			t = jobs[order[next]].Arrival
			continue
		}
		// Advance to the next finish or arrival, computed in float64 so
		// that a job too slow to finish is caught, not wrapped around.
		dt, slowest := math.Inf(1), -1
		for _, r := range running {
			if d := math.Ceil(r.left/r.speed - 1e-9); d < dt || slowest < 0 {
				dt, slowest = d, r.job
			}
		}
		if next < len(order) {
			dt = min(dt, float64(jobs[order[next]].Arrival-t))
		}
		dt = max(dt, 1)
		if float64(t)+dt > MaxSlot {
			return nil, fmt.Errorf("%w: at slot %d the next event is %g slots away (job %d runs %g iterations per slot), beyond MaxSlot (%d)",
				ErrNoProgress, t, dt, jobs[slowest].ID, speedOf(running, slowest), MaxSlot)
		}
		for _, r := range running {
			r.left -= r.speed * dt
		}
		t += int(dt)
	}
	sum := 0.0
	for i, o := range out.Jobs {
		out.Makespan = max(out.Makespan, o.Finish)
		sum += float64(o.Finish - jobs[i].Arrival)
	}
	if len(jobs) > 0 {
		out.MeanJCT = sum / float64(len(jobs))
	}
	return out, nil
}

// startPrivate checks a placement and takes its GPUs.
func (e *Executor) startPrivate(st *State, set placement.GPUSet, j *Job, ji int, est float64) (*ringRun, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: job %d: %s", ErrBadPlacement, j.ID, fmt.Sprintf(format, args...))
	}
	if n := set.Count(); n != j.GPUs {
		return nil, bad("%d GPUs for a job of %d", n, j.GPUs)
	}
	r := &ringRun{job: ji, left: float64(j.Iterations)}
	for srv, gpus := range set {
		if srv < 0 || srv >= len(st.Free) {
			return nil, bad("server %d out of range", srv)
		}
		for k, g := range gpus {
			if g < 0 || g >= len(st.Free[srv]) || !st.Free[srv][g] || slices.Contains(gpus[:k], g) {
				return nil, bad("GPU %d of server %d is not idle", g, srv)
			}
		}
		if len(gpus) > 0 {
			r.servers = append(r.servers, perfmodel.ServerShare{Server: srv, GPUs: len(gpus)})
		}
	}
	slices.SortFunc(r.servers, func(a, b perfmodel.ServerShare) int { return a.Server - b.Server })
	r.spans = len(r.servers) > 1
	for srv, gpus := range set {
		for _, g := range gpus {
			st.Free[srv][g] = false
			st.Load[srv][g] += est
		}
		st.LoadSum[srv] += est * float64(len(gpus))
	}
	for _, sh := range r.servers {
		st.FreeCount[sh.Server] -= sh.GPUs
		st.TotalFree -= sh.GPUs
		st.Hosts[sh.Server]++
		if r.spans {
			st.Spanning[sh.Server]++
		}
	}
	return r, nil
}
