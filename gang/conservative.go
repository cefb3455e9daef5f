package gang

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// profile is the number of GPUs of one type free over time, a step
// function: level[i] GPUs are free on [at[i], at[i+1]), and level[len-1]
// from the last breakpoint on.
type profile struct {
	at    []float64
	level []int
}

// newProfile starts with free GPUs at now and adds the GPUs of jobs as
// they end.
func newProfile(now float64, free int, ends []release) profile {
	slices.SortFunc(ends, func(a, b release) int { return cmp.Compare(a.t, b.t) })
	p := profile{at: []float64{now}, level: []int{free}}
	for _, e := range ends {
		last := len(p.at) - 1
		if e.t <= p.at[last] {
			p.level[last] += e.gpus
			continue
		}
		p.at = append(p.at, e.t)
		p.level = append(p.level, p.level[last]+e.gpus)
	}
	return p
}

type release struct {
	t    float64
	gpus int
}

// earliest is the first breakpoint from which gpus GPUs stay free for dur
// seconds, or +Inf if there is none.
func (p *profile) earliest(gpus int, dur float64) float64 {
	n := len(p.at)
	for i := 0; i < n; {
		if p.level[i] < gpus {
			i++
			continue
		}
		end := p.at[i] + dur
		m := i + 1
		for m < n && p.at[m] < end && p.level[m] >= gpus {
			m++
		}
		if m == n || p.at[m] >= end {
			return p.at[i]
		}
		i = m + 1 // segment m is too low: no start at or before it fits
	}
	return math.Inf(1)
}

// below is the first breakpoint at which fewer than gpus GPUs are free,
// or +Inf.
func (p *profile) below(gpus int) float64 {
	for i, l := range p.level {
		if l < gpus {
			return p.at[i]
		}
	}
	return math.Inf(1)
}

// split makes t a breakpoint and returns its index; t is at or after the
// first breakpoint.
func (p *profile) split(t float64) int {
	i := sort.SearchFloat64s(p.at, t)
	if i < len(p.at) && p.at[i] == t {
		return i
	}
	p.at = slices.Insert(p.at, i, t)
	p.level = slices.Insert(p.level, i, p.level[i-1])
	return i
}

// use takes gpus GPUs on [from, to).
func (p *profile) use(from, to float64, gpus int) {
	if !(to > from) {
		to = math.Nextafter(from, math.Inf(1))
	}
	i := p.split(from)
	j := len(p.at)
	if !math.IsInf(to, 1) {
		j = p.split(to)
	}
	for ; i < j; i++ {
		p.level[i] -= gpus
	}
}

// reservation is where and when conservative backfilling plans a job.
type reservation struct {
	JobID, Type int
	At          float64
}

// conservative implements Priority.Decide with Conservative backfilling
// and returns the plan of every waiting job it could place, started or
// reserved.
func (p Priority) conservative(now float64, free []int, waiting, running []JobView) (Decision, []reservation) {
	all, capacity := p.rank(now, free, waiting, running)
	ends := make([][]release, len(free))
	if p.NoPreemption {
		for _, r := range running {
			ends[r.Type] = append(ends[r.Type], release{now + estimate(r, r.Type), r.ScaleFactor})
		}
	}
	prof := make([]profile, len(free))
	for k := range prof {
		prof[k] = newProfile(now, capacity[k], ends[k])
	}
	keep := map[int]bool{}
	var d Decision
	var plan []reservation
	planned := 0
	for _, jp := range all {
		j := *jp
		if j.Type >= 0 {
			// Running, with preemption: kept while it fits now, and in the
			// plan until it ends or a job ranked ahead of it is reserved
			// its GPUs, when that job will preempt it.
			if capacity[j.Type] >= j.ScaleFactor {
				capacity[j.Type] -= j.ScaleFactor
				keep[j.ID] = true
				until := min(now+estimate(j, j.Type), prof[j.Type].below(j.ScaleFactor))
				prof[j.Type].use(now, until, j.ScaleFactor)
			}
			continue
		}
		if p.Depth > 0 && planned == p.Depth {
			continue // past the depth: waits; running jobs are still kept
		}
		planned++
		best, at := -1, math.Inf(1)
		for k := range prof {
			if j.Throughput[k] <= 0 {
				continue
			}
			t := prof[k].earliest(j.ScaleFactor, estimate(j, k))
			if t == now && capacity[k] < j.ScaleFactor {
				continue // free in the plan only through a zero-length job
			}
			if t < at || t == at && best >= 0 && j.Throughput[k] > j.Throughput[best] {
				best, at = k, t
			}
		}
		if best < 0 || math.IsInf(at, 1) {
			continue // never fits: it reserves nothing
		}
		prof[best].use(at, at+estimate(j, best), j.ScaleFactor)
		plan = append(plan, reservation{j.ID, best, at})
		if at == now {
			capacity[best] -= j.ScaleFactor
			d.Start = append(d.Start, Start{JobID: j.ID, Type: best})
		}
	}
	if !p.NoPreemption {
		for _, j := range running {
			if !keep[j.ID] {
				d.Preempt = append(d.Preempt, j.ID)
			}
		}
	}
	return d, plan
}
