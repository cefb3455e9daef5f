package multires

import (
	"slices"
)

// Split divides one server's CPUs and memory among jobs whose GPUs there
// are already chosen (by the core's placement, or by a Kubernetes
// scheduler): Tune's rule on a fixed placement. Each job's Job.GPUs is its
// number of GPUs on this server (a job on several servers is split on each
// with its GPUs there), the jobs in the queue policy's order. Every job
// gets its best case (capped at the server and at its Max) when all best
// cases fit; otherwise jobs drop to their fallback (the proportional share,
// or less where their best case is less, raised to their Min up to the
// proportional share) one by one, those with most CPUs and then memory
// per GPU first and, among equals, the later in the order first, until
// the rest fit. No job ends below the share a GPU-proportional split
// would give it (unless its Max says so), so a job's best case is never
// taken from another's proportional share.
//
// The plan has one Placement per job, with one Part on server 0. Split
// is safe for concurrent use.
func Split(server Server, jobs []Job) (*Plan, error) {
	if err := check([]Server{server}, jobs); err != nil {
		return nil, err
	}
	used := 0
	for _, j := range jobs {
		used += j.GPUs
	}
	if used > server.GPUs {
		return nil, errorf(ErrInvalidJob, "jobs", "%d GPUs on a server of %d", used, server.GPUs)
	}
	st := newState([]Server{server})
	shares := make([]Share, len(jobs))
	var cpus, mem float64
	for i, j := range jobs {
		n := float64(j.GPUs)
		best, _ := st.ideal(j)
		shares[i] = best(0)
		cpus += shares[i].CPUs * n
		mem += shares[i].MemGB * n
	}
	demoted := make([]bool, len(jobs))
	if cpus > server.CPUs+eps || mem > server.MemGB+eps {
		order := make([]int, len(jobs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return splitOrder(shares, a, b) })
		for _, i := range order {
			fb := st.fallback(jobs[i])(0)
			if fb != shares[i] {
				n := float64(jobs[i].GPUs)
				cpus -= (shares[i].CPUs - fb.CPUs) * n
				mem -= (shares[i].MemGB - fb.MemGB) * n
				shares[i], demoted[i] = fb, true
			}
			if cpus <= server.CPUs+eps && mem <= server.MemGB+eps {
				break
			}
		}
	}
	if cpus > server.CPUs+1e-6 || mem > server.MemGB+1e-6 {
		// Every fallback is within the proportional share, so the jobs
		// fit once all have dropped; a check, not an overcommit.
		return nil, errorf(ErrNoSolution, "server", "%g CPUs and %g GB split on a server of %g and %g", cpus, mem, server.CPUs, server.MemGB)
	}
	return splitPlan(jobs, shares, demoted), nil
}

func splitPlan(jobs []Job, shares []Share, demoted []bool) *Plan {
	plan := &Plan{Placements: make([]Placement, len(jobs))}
	for i, j := range jobs {
		n := float64(j.GPUs)
		part := Part{Server: 0, GPUs: j.GPUs, CPUs: shares[i].CPUs * n, MemGB: shares[i].MemGB * n}
		plan.Placements[i] = Placement{Parts: []Part{part}, Placed: true, Rate: j.Profile.Surface.At(shares[i]), Demoted: demoted[i]}
		plan.Placed++
		if demoted[i] {
			plan.Demoted++
		}
	}
	return plan
}

// splitOrder ranks the jobs Split takes from: most CPUs, then memory, per
// GPU first; among equals the later job first.
func splitOrder(shares []Share, a, b int) int {
	switch {
	case shares[a].CPUs != shares[b].CPUs:
		if shares[a].CPUs > shares[b].CPUs {
			return -1
		}
		return 1
	case shares[a].MemGB != shares[b].MemGB:
		if shares[a].MemGB > shares[b].MemGB {
			return -1
		}
		return 1
	}
	return b - a
}
