package learn

import (
	"math"
	"slices"
)

// MaxGroupLen bounds JobInfo.Group, in bytes.
const MaxGroupLen = 512

// groupKey names the runs of one program at one reference GPU count.
type groupKey struct {
	name string
	ref  int
}

// groupStat is what a group's rows measured on one type: how many, the
// mean log rate and the spread between them (their sample variance, 0
// for one row).
type groupStat struct {
	n          int
	mean, vari float64
}

// groupsOf returns, per group of in's rows (in.group), what its rows
// measured on each type, by Welford's one-pass mean and variance (Welford,
// Technometrics 4(3), 1962). Rows without a group are left out. Cost:
// O(rows * cols); memory O(groups * cols).
func groupsOf(in *popInput) map[groupKey][]groupStat {
	var out map[groupKey][]groupStat
	for r := range in.rows {
		g := in.group[r]
		if g.name == "" {
			continue
		}
		if out == nil {
			out = map[groupKey][]groupStat{}
		}
		st := out[g]
		if st == nil {
			st = make([]groupStat, in.cols)
			out[g] = st
		}
		for t, y := range in.y[r*in.cols : (r+1)*in.cols] {
			if math.IsNaN(y) {
				continue
			}
			s := &st[t]
			s.n++
			d := y - s.mean
			s.mean += d / float64(s.n)
			s.vari += d * (y - s.mean) // the sum of squares until below
		}
	}
	for _, st := range out {
		for t := range st {
			if st[t].n > 1 {
				st[t].vari /= float64(st[t].n - 1)
			} else {
				st[t].vari = 0
			}
		}
	}
	return out
}

// groupEvidence is the evidence the other runs of j's group give of its
// log rate on type ti: their mean, with variance tau^2 (1 + 1/n) for n
// runs, tau^2 the larger of their sample variance and GroupSigma^2 (a new
// run of the program differs from its mean by the spread between runs,
// and the mean is known to within tau^2 / n). ok is false when the group
// measured nothing on ti (or the job names no group, or no fit holds it).
func (l *Learner) groupEvidence(j *job, ti int) (mean, vari float64, ok bool) {
	if j.info.Group == "" || l.pop == nil || l.pop.groups == nil {
		return 0, 0, false
	}
	st := l.pop.groups[groupKey{j.info.Group, j.ref}]
	if ti >= len(st) || st[ti].n == 0 {
		return 0, 0, false
	}
	s := st[ti]
	tau2 := max(s.vari, l.cfg.GroupSigma*l.cfg.GroupSigma)
	return s.mean, tau2 * (1 + 1/float64(s.n)), true
}

// bumpGroups notes a change of the estimates of every active job whose
// group's statistics moved between the fits old and p (a run joined it
// or left it, or its mean moved by more than tol/2 on a type), when the
// fit as a whole did not (bumpAll). Cost: O(groups * types), and O(jobs)
// when a group moved.
func (l *Learner) bumpGroups(old, p *population) {
	var oldG, newG map[groupKey][]groupStat
	if old != nil {
		oldG = old.groups
	}
	if p != nil {
		newG = p.groups
	}
	moved := map[groupKey]bool{}
	for k, st := range newG {
		if groupMoved(oldG[k], st, l.cfg.Tolerance/2) {
			moved[k] = true
		}
	}
	for k := range oldG {
		if _, ok := newG[k]; !ok {
			moved[k] = true
		}
	}
	if len(moved) == 0 {
		return
	}
	var names []string
	for name, j := range l.jobs {
		if j.info.Group != "" && moved[groupKey{j.info.Group, j.ref}] {
			names = append(names, name)
		}
	}
	slices.Sort(names) // Changed lists them in a deterministic order
	for _, name := range names {
		l.bump(l.jobs[name])
	}
}

// groupMoved reports whether a group's statistics moved from a to b: a
// run more or fewer on a type, or a mean moved by more than tol.
func groupMoved(a, b []groupStat, tol float64) bool {
	if len(a) != len(b) {
		return true
	}
	for t := range a {
		if a[t].n != b[t].n || math.Abs(a[t].mean-b[t].mean) > tol {
			return true
		}
	}
	return false
}

// mergeGroups returns in with the rows of each group (JobInfo.Group and
// reference GPU count) merged into one, their means per type (groups:
// groupsOf(in)), where the group's first row was: the runs of one program
// are one row of the jobs-by-types matrix, measured on every type any of
// them ran on. (Under Kueue each run is measured on one type only; rows of
// one type each relate no type to another, and the population's priors
// then compare the types through whichever programs ran on each.) The
// merged row takes the latest rank of its rows and the id of its first.
// in itself is returned when no two rows share a group. Cost:
// O(rows * cols).
func mergeGroups(in *popInput, groups map[groupKey][]groupStat) *popInput {
	shared := false
	seen := make(map[groupKey]int, len(groups))
	for r := range in.rows {
		if g := in.group[r]; g.name != "" {
			seen[g]++
			shared = shared || seen[g] > 1
		}
	}
	if !shared {
		return in
	}
	out := &popInput{cols: in.cols}
	at := make(map[groupKey]int, len(groups))
	for r := range in.rows {
		g := in.group[r]
		if g.name != "" {
			if i, ok := at[g]; ok {
				out.rank[i] = max(out.rank[i], in.rank[r])
				continue
			}
			at[g] = out.rows
			for _, st := range groups[g] {
				if st.n > 0 {
					out.y = append(out.y, st.mean)
				} else {
					out.y = append(out.y, math.NaN())
				}
			}
		} else {
			out.y = append(out.y, in.y[r*in.cols:(r+1)*in.cols]...)
		}
		out.rank = append(out.rank, in.rank[r])
		out.group = append(out.group, g)
		out.id = append(out.id, in.id[r])
		out.rows++
	}
	return out
}
