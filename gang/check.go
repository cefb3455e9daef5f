package gang

import (
	"fmt"
	"math"
)

// checkViews checks what a scheduler is asked to decide on: free counts
// of at least 0 for each type, job IDs unique over waiting and running,
// scale factors of at least 1, one rate per type, finite and at least 0,
// finite times and work, waiting jobs with Type -1 and running jobs on a
// type that exists. Errors wrap ErrInvalid and name the job.
func checkViews(now float64, free []int, waiting, running []JobView) error {
	if math.IsNaN(now) || math.IsInf(now, 0) {
		return fmt.Errorf("%w: decision at %v s", ErrInvalid, now)
	}
	for k, n := range free {
		if n < 0 {
			return fmt.Errorf("%w: %d GPUs free of type %d", ErrInvalid, n, k)
		}
	}
	ids := newIDSet(waiting, running)
	for li, list := range [2][]JobView{waiting, running} {
		for i := range list {
			j := &list[i]
			if err := checkView(j, len(free), li == 1); err != nil {
				return err
			}
			if !ids.add(j.ID) {
				return fmt.Errorf("%w: job %d appears twice among the waiting and running jobs", ErrInvalid, j.ID)
			}
		}
	}
	return nil
}

func checkView(j *JobView, types int, isRunning bool) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: job %d: %s", ErrInvalid, j.ID, fmt.Sprintf(format, args...))
	}
	switch {
	case j.ScaleFactor < 1:
		return bad("scale factor %d, want >= 1", j.ScaleFactor)
	case len(j.Throughput) != types:
		return bad("%d rates for %d GPU types", len(j.Throughput), types)
	case isRunning && (j.Type < 0 || j.Type >= types):
		return bad("runs on type %d of %d", j.Type, types)
	case !isRunning && j.Type != -1:
		return bad("waits with type %d (want -1)", j.Type)
	}
	for k, r := range j.Throughput {
		if !(r >= 0) || math.IsInf(r, 0) {
			return bad("rate %v on type %d, want finite and >= 0", r, k)
		}
	}
	for _, v := range [...]struct {
		name string
		v    float64
	}{{"steps", j.Steps}, {"remaining steps", j.Remaining}, {"attained service", j.Attained}, {"duration", j.Duration}} {
		if !(v.v >= 0) || math.IsInf(v.v, 0) {
			return bad("%s %v, want finite and >= 0", v.name, v.v)
		}
	}
	for _, v := range [...]struct {
		name string
		v    float64
	}{{"arrival", j.Arrival}, {"start", j.Started}, {"queueing time", j.Queued}, {"weight", j.Weight}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return bad("%s %v, want finite", v.name, v.v)
		}
	}
	return nil
}

// idSet tells whether a job ID was seen: a bitset over the range of the
// IDs when they are dense (the usual case, and cheap), else a map.
type idSet struct {
	lo   int
	bits []uint64
	m    map[int]bool
}

func newIDSet(lists ...[]JobView) *idSet {
	n, lo, hi := 0, math.MaxInt, math.MinInt
	for _, l := range lists {
		for i := range l {
			lo, hi = min(lo, l[i].ID), max(hi, l[i].ID)
			n++
		}
	}
	if n == 0 {
		return &idSet{}
	}
	if span := uint64(hi) - uint64(lo); span < uint64(64*n+1024) {
		return &idSet{lo: lo, bits: make([]uint64, span/64+1)}
	}
	return &idSet{m: make(map[int]bool, n)}
}

// add records id and reports whether it was new.
func (s *idSet) add(id int) bool {
	if s.m != nil {
		if s.m[id] {
			return false
		}
		s.m[id] = true
		return true
	}
	i := uint64(id) - uint64(s.lo)
	w, b := i/64, uint64(1)<<(i%64)
	if s.bits[w]&b != 0 {
		return false
	}
	s.bits[w] |= b
	return true
}

// validator is an Order whose settings can be out of range.
type validator interface{ validate() error }
