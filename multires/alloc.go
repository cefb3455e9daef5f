package multires

import (
	"context"
	"fmt"
	"slices"
)

// Job is one job asking for GPUs this round, with the profile that says
// how its speed depends on CPUs and memory. A Job is a plain value, safe
// for concurrent use.
type Job struct {
	// ID identifies the job in errors; IDs need not be unique.
	ID int
	// GPUs is the number of GPUs it runs on, from 1 to the cluster's.
	GPUs int
	// Profile is its kind's profile; required.
	Profile *Profile
	// Min and Max bound its share per GPU (a component 0: no bound):
	// Max caps its best case and every share it gets; Min raises every
	// share it gets, but never above the proportional share (a floor
	// above it would take from others' proportional shares; with
	// servers of different shapes, the smallest server's). Max must not
	// be below Min.
	Min, Max Share
}

// floor raises sh to j.Min, at most to p.
func (j Job) floor(sh, p Share) Share {
	sh.CPUs = max(sh.CPUs, min(j.Min.CPUs, p.CPUs))
	sh.MemGB = max(sh.MemGB, min(j.Min.MemGB, p.MemGB))
	return sh
}

// bound caps sh at j.Max.
func (j Job) bound(sh Share) Share {
	if j.Max.CPUs > 0 {
		sh.CPUs = min(sh.CPUs, j.Max.CPUs)
	}
	if j.Max.MemGB > 0 {
		sh.MemGB = min(sh.MemGB, j.Max.MemGB)
	}
	return sh
}

func (j Job) checkBounds(where string) error {
	for _, b := range []struct {
		name string
		v, w float64
	}{{"min.cpus", j.Min.CPUs, MaxCPUs}, {"min.mem_gb", j.Min.MemGB, MaxMemGB}, {"max.cpus", j.Max.CPUs, MaxCPUs}, {"max.mem_gb", j.Max.MemGB, MaxMemGB}} {
		if !(b.v >= 0 && b.v <= b.w) {
			return errorf(ErrInvalidJob, where+"."+b.name, "%g: want 0 (none) or a number up to %g", b.v, b.w)
		}
	}
	if (j.Max.CPUs > 0 && j.Max.CPUs < j.Min.CPUs) || (j.Max.MemGB > 0 && j.Max.MemGB < j.Min.MemGB) {
		return errorf(ErrInvalidJob, where, "max %v below min %v", j.Max, j.Min)
	}
	return nil
}

// Placement is where and with how much a job runs this round.
// It is plain data, safe for concurrent reads.
type Placement struct {
	// Parts are its GPUs, CPUs and memory on each server, nil when it was
	// not placed. Opt without rounding places no job on servers: its
	// placed jobs have Rate but no Parts (see Opt).
	Parts []Part
	// Placed says whether it runs this round.
	Placed bool
	// Rate is its rate per GPU relative to its rate at the profiles'
	// proportional share: the surface at the smallest share of its parts
	// (a synchronous job runs at its slowest worker's pace).
	Rate float64
	// Demoted says it runs with less than its best-case demand (Tune gave
	// it the proportional share, or took back what it had above it).
	Demoted bool
}

// Plan is an allocator's answer, one Placement per job in the order the
// jobs were given. It is plain data, safe for concurrent reads.
type Plan struct {
	Placements []Placement
	// Placed and Demoted count the placed and the demoted jobs.
	Placed, Demoted int
}

// Allocator gives the jobs of a round, in the queue policy's order, GPUs,
// CPUs and memory on the servers. A job is offered GPUs only while as many
// are free; a job that cannot be placed waits and later jobs may take the
// GPUs it left. Implementations must be safe for concurrent use (those of
// this package are values without state).
type Allocator interface {
	Allocate(ctx context.Context, servers []Server, jobs []Job) (*Plan, error)
}

// check validates servers and jobs (each distinct profile once).
func check(servers []Server, jobs []Job) error {
	if err := CheckServers(servers); err != nil {
		return err
	}
	if len(jobs) > MaxJobs {
		return errorf(ErrInvalidJob, "jobs", "%d jobs: want at most %d", len(jobs), MaxJobs)
	}
	total := 0
	for _, s := range servers {
		total += s.GPUs
	}
	seen := make(map[*Profile]bool)
	for i, j := range jobs {
		where := fmt.Sprintf("jobs[%d] (ID %d)", i, j.ID)
		if j.Profile == nil {
			return errorf(ErrInvalidJob, where, "no profile")
		}
		if j.GPUs < 1 || j.GPUs > total {
			return errorf(ErrInvalidJob, where, "%d GPUs: want 1 to the cluster's %d", j.GPUs, total)
		}
		if err := j.checkBounds(where); err != nil {
			return err
		}
		if !seen[j.Profile] {
			if err := j.Profile.validate(where + ".profile"); err != nil {
				return err
			}
			seen[j.Profile] = true
		}
	}
	return nil
}

// ideal returns the job's best-case demand per GPU on each server: its
// profile's ideal share, capped so that the job's total fits the largest
// server (Synergy caps a demand at a server's capacity); a job on more
// GPUs than a server has asks for each server's proportional share.
func (st *state) ideal(j Job) (demandFunc, bool) {
	if j.GPUs > st.maxGPUs {
		return func(s int) Share { return j.bound(st.proportional(s)) }, false
	}
	n := float64(j.GPUs)
	sh := j.bound(j.floor(Share{min(j.Profile.Ideal.CPUs, st.maxCPUs/n), min(j.Profile.Ideal.MemGB, st.maxMem/n)}, st.minProp))
	return func(int) Share { return sh }, true
}

func (st *state) proportional(s int) Share { return st.servers[s].Proportional() }

// fallback returns what Tune gives a job that cannot have its best case
// on server s: the server's proportional share, or its ideal where that
// is no more (Synergy section 4.3: a job never gets less than its
// GPU-proportional share's throughput).
func (st *state) fallback(j Job) demandFunc {
	ideal, _ := st.ideal(j)
	return func(s int) Share { return fallbackShare(j, ideal(s), st.proportional(s)) }
}

// fallbackShare is the share a job with best case ideal gets on a server
// of proportional share p when it cannot have its best case: in each
// resource its best case or the proportional share, whichever is less
// (Synergy's rule, section 4.3: never more than the proportional share
// once taken from; on the zoo's surfaces the proportional share itself,
// or the best case where it is less, as the artifact's), raised to its
// Min up to p, capped at its Max. It never gives more of a resource than
// the best case, so taking back never overcommits a server.
func fallbackShare(j Job, ideal, p Share) Share {
	return j.bound(j.floor(Share{min(ideal.CPUs, p.CPUs), min(ideal.MemGB, p.MemGB)}, p))
}

func rateOf(p *Profile, parts []Part) float64 {
	r := 0.0
	for i, pt := range parts {
		if x := p.Surface.At(pt.Share()); i == 0 || x < r {
			r = x
		}
	}
	return r
}

// run places the jobs in order with place, which returns the parts and
// whether the job got less than its best case.
func run(ctx context.Context, servers []Server, jobs []Job, place func(*state, *Plan, int) ([]Part, bool)) (*Plan, error) {
	if err := check(servers, jobs); err != nil {
		return nil, err
	}
	st := newState(servers)
	plan := &Plan{Placements: make([]Placement, len(jobs))}
	for i, j := range jobs {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if j.GPUs > st.free {
			continue
		}
		parts, demoted := place(st, plan, i)
		if parts == nil {
			continue
		}
		st.take(parts, i)
		plan.Placements[i] = Placement{Parts: parts, Placed: true, Rate: rateOf(j.Profile, parts), Demoted: demoted}
		plan.Placed++
	}
	for i := range plan.Placements {
		if plan.Placements[i].Demoted {
			plan.Demoted++
		}
	}
	return plan, nil
}

// Proportional is the GPU-proportional allocator every GPU scheduler
// uses: each job gets the CPUs and memory of its servers in proportion to
// its GPUs, whatever it would do with them (Synergy's baseline,
// "GPU-proportional", section 2). Jobs take GPUs first-fit in server
// order. Safe for concurrent use.
type Proportional struct{}

// Allocate implements Allocator.
func (Proportional) Allocate(ctx context.Context, servers []Server, jobs []Job) (*Plan, error) {
	return run(ctx, servers, jobs, func(st *state, _ *Plan, i int) ([]Part, bool) {
		j := jobs[i]
		return st.firstFit(j.GPUs, func(s int) Share { return j.bound(j.floor(st.proportional(s), st.proportional(s))) }), false
	})
}

// Greedy is Synergy-GREEDY (section 4.2): each job, in the policy's
// order, gets its best-case demand where it fits first in server order,
// or waits. Jobs that need more than their proportional share leave GPUs
// idle when CPUs or memory run out first, which is why Synergy tunes.
// Safe for concurrent use.
type Greedy struct{}

// Allocate implements Allocator.
func (Greedy) Allocate(ctx context.Context, servers []Server, jobs []Job) (*Plan, error) {
	return run(ctx, servers, jobs, func(st *state, _ *Plan, i int) ([]Part, bool) {
		d, ok := st.ideal(jobs[i])
		return st.firstFit(jobs[i].GPUs, d), !ok
	})
}

// Tune is Synergy-TUNE (section 4.3, Algorithm 1): each job, in the
// policy's order,
//
//  1. gets its best-case demand where it fits first in server order;
//  2. else its fallback where that fits: in each resource its best case
//     or the proportional share, whichever is less;
//  3. else takes the servers with room for its GPUs (one server for a
//     multi-GPU job when one has room, else the fullest first; then the
//     others in order) and there takes back from jobs placed earlier in
//     the round what they hold above their fallback, those on fewest
//     servers and with most CPUs and memory per GPU first, until its
//     share fits; a job taken from keeps its GPUs and is never given more
//     of anything;
//  4. and is placed first-fit with that share.
//
// No job gets more than the proportional share of a resource once taken
// from, and none runs below the proportional share's rate on surfaces
// whose memory need does not grow as CPUs fall (the cache model's, every
// model of the zoo's; on others the fallback's less memory may cost a
// little). Every job that gets GPUs runs: Tune leaves no GPU idle for
// want of CPUs or memory, and never overcommits a server. Safe for
// concurrent use.
type Tune struct{}

// Allocate implements Allocator.
func (Tune) Allocate(ctx context.Context, servers []Server, jobs []Job) (*Plan, error) {
	return run(ctx, servers, jobs, func(st *state, plan *Plan, i int) ([]Part, bool) {
		return st.tune(plan, jobs, i, nil)
	})
}

// tune places jobs[i] by Tune's steps; want, if not nil, replaces the
// best-case demand (Opt's rounding).
func (st *state) tune(plan *Plan, jobs []Job, i int, want demandFunc) ([]Part, bool) {
	j := jobs[i]
	ideal, ok := st.ideal(j)
	if want != nil {
		ideal = want
	}
	if parts := st.firstFit(j.GPUs, ideal); parts != nil {
		return parts, !ok
	}
	fb := st.fallback(j)
	parts := st.firstFit(j.GPUs, fb)
	if parts == nil {
		for _, t := range st.targets(j.GPUs) {
			st.reclaim(plan, jobs, t, fb)
		}
		parts = st.firstFit(j.GPUs, fb)
	}
	// Where the chosen servers' peers had nothing to give back (the
	// artifact stops the simulation here), the other servers with free
	// GPUs are tried in order.
	for s := 0; parts == nil && s < len(st.servers); s++ {
		if f := st.freeGPUs[s]; f > 0 {
			st.reclaim(plan, jobs, target{s, min(f, j.GPUs)}, fb)
			parts = st.firstFit(j.GPUs, fb)
		}
	}
	return parts, !ok || below(parts, ideal)
}

// below says whether some part holds less than d per GPU.
func below(parts []Part, d demandFunc) bool {
	for _, p := range parts {
		if !d(p.Server).Within(p.Share()) {
			return true
		}
	}
	return false
}

type target struct{ server, gpus int }

// targets picks the servers whose free GPUs Tune makes room on: the first
// server with room for all of a multi-GPU job, else the fullest servers
// first (fewest free GPUs; ties by order) until the job's GPUs are
// covered.
func (st *state) targets(n int) []target {
	if n > 1 {
		for s, f := range st.freeGPUs {
			if f >= n {
				return []target{{s, n}}
			}
		}
	}
	var ts []target
	used := make(map[int]bool)
	for n > 0 {
		best := -1
		for s, f := range st.freeGPUs {
			if f > 0 && !used[s] && (best < 0 || f < st.freeGPUs[best]) {
				best = s
			}
		}
		if best < 0 {
			break
		}
		used[best] = true
		k := min(st.freeGPUs[best], n)
		ts = append(ts, target{best, k})
		n -= k
	}
	return ts
}

// reclaim takes back, on target server t.server, what peers hold above
// their fallback, per resource (never giving a peer more of anything, which
// could overcommit a server), until t.gpus GPUs at share fb fit there.
func (st *state) reclaim(plan *Plan, jobs []Job, t target, fb demandFunc) {
	want := fb(t.server).Scale(float64(t.gpus))
	needCPU, needMem := want.CPUs-st.cpus[t.server], want.MemGB-st.mem[t.server]
	if needCPU <= eps && needMem <= eps {
		return
	}
	peers := slices.Clone(st.on[t.server])
	slices.SortStableFunc(peers, func(a, b int) int { return peerOrder(plan, jobs, a, b) })
	for _, k := range peers {
		pl := &plan.Placements[k]
		fbk := takeBack(pl.Parts, st.fallback(jobs[k]))
		if !lowers(pl.Parts, fbk, t.server) {
			continue
		}
		before := partOn(pl.Parts, t.server)
		st.resize(pl.Parts, fbk)
		after := partOn(pl.Parts, t.server)
		pl.Rate = rateOf(jobs[k].Profile, pl.Parts)
		pl.Demoted = true
		needCPU, needMem = needCPU-(before.CPUs-after.CPUs), needMem-(before.MemGB-after.MemGB)
		if needCPU <= eps && needMem <= eps {
			return
		}
	}
}

// takeBack is what a peer keeps when taken from: on each server the
// lesser, per resource, of what it holds and its fallback.
func takeBack(parts []Part, fb demandFunc) demandFunc {
	return func(s int) Share {
		f := fb(s)
		for _, p := range parts {
			if p.Server == s {
				h := p.Share()
				return Share{min(h.CPUs, f.CPUs), min(h.MemGB, f.MemGB)}
			}
		}
		return f
	}
}

// lowers says whether d gives the parts no more of either resource on
// any server and less of one on server s.
func lowers(parts []Part, d demandFunc, s int) bool {
	less := false
	for _, p := range parts {
		n := float64(p.GPUs)
		sh := d(p.Server)
		if sh.CPUs*n > p.CPUs+eps || sh.MemGB*n > p.MemGB+eps {
			return false
		}
		if p.Server == s && (sh.CPUs*n < p.CPUs-eps || sh.MemGB*n < p.MemGB-eps) {
			less = true
		}
	}
	return less
}

// peerOrder ranks the jobs Tune takes from: on fewest servers, then most
// CPUs per GPU, then most memory per GPU (Synergy's artifact,
// resources/cluster.py); ties keep the order of placement.
func peerOrder(plan *Plan, jobs []Job, a, b int) int {
	pa, pb := plan.Placements[a].Parts, plan.Placements[b].Parts
	if len(pa) != len(pb) {
		return len(pa) - len(pb)
	}
	ta, tb := total(pa), total(pb)
	ga, gb := float64(jobs[a].GPUs), float64(jobs[b].GPUs)
	switch ca, cb := ta.CPUs/ga, tb.CPUs/gb; {
	case ca > cb:
		return -1
	case ca < cb:
		return 1
	}
	switch ma, mb := ta.MemGB/ga, tb.MemGB/gb; {
	case ma > mb:
		return -1
	case ma < mb:
		return 1
	}
	return 0
}

func total(parts []Part) Share {
	var s Share
	for _, p := range parts {
		s.CPUs += p.CPUs
		s.MemGB += p.MemGB
	}
	return s
}

func partOn(parts []Part, server int) Part {
	for _, p := range parts {
		if p.Server == server {
			return p
		}
	}
	return Part{}
}
