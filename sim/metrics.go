package sim

import (
	"math"
	"slices"
)

// Summary gives the usual metrics over a set of jobs. It is a plain value,
// safe for concurrent use.
type Summary struct {
	Jobs int
	// JCT statistics, in seconds.
	MeanJCT, MedianJCT, P95JCT, P99JCT float64
	// MeanQueueing is the mean time from arrival to first run, seconds.
	MeanQueueing float64
	// Makespan is from the first arrival to the last finish of all jobs,
	// seconds.
	Makespan float64
	// Utilisation is the time-weighted share of busy GPUs.
	Utilisation float64
	// Cost is the GPU time of the summarised jobs at the configured prices,
	// in dollars.
	Cost float64
	// Preemptions is the mean number per job; TypeMoves the mean number
	// of runs on another GPU type than the job's previous run's (Record).
	Preemptions, TypeMoves float64
	// Finish-time fairness: the largest and the mean ratio rho = JCT over
	// isolated time, and the share of jobs with rho > 1.
	MaxRho, MeanRho, RhoAbove1 float64
}

// Summarise computes metrics over the jobs whose position in order of
// arrival is in [from, to) (Gavel measures jobs 4000 to 5000 of a
// continuous trace); to <= 0 means all jobs from from on. Makespan and
// utilisation always cover the whole run. The cost counts the prices the
// engine was configured with (none for a Result built by hand). Summarise
// only reads r.
func (r *Result) Summarise(from, to int) Summary {
	recs := recordsByArrival(r.Records)
	window := span(recs, from, to)
	s := Summary{Jobs: len(window)}
	if len(window) > 0 {
		jct := make([]float64, len(window))
		for i, rec := range window {
			jct[i] = rec.JCT()
			rho := rec.Rho()
			s.MaxRho = math.Max(s.MaxRho, rho)
			s.MeanRho += rho
			if rho > 1 {
				s.RhoAbove1++
			}
			s.MeanQueueing += rec.Start - rec.Arrival
			s.Preemptions += float64(rec.Preemptions)
			s.TypeMoves += float64(rec.TypeMoves)
			for k, g := range rec.GPUSeconds {
				if k < len(r.prices) { // a Result built by hand has none
					s.Cost += g / 3600 * r.prices[k]
				}
			}
		}
		slices.Sort(jct)
		sum := 0.0
		for _, v := range jct {
			sum += v
		}
		n := float64(len(window))
		s.MeanJCT, s.MeanQueueing, s.Preemptions, s.TypeMoves = sum/n, s.MeanQueueing/n, s.Preemptions/n, s.TypeMoves/n
		s.MeanRho, s.RhoAbove1 = s.MeanRho/n, s.RhoAbove1/n
		s.MedianJCT, s.P95JCT, s.P99JCT = quantile(jct, 0.5), quantile(jct, 0.95), quantile(jct, 0.99)
	}
	if len(recs) > 0 {
		s.Makespan = r.End - recs[0].Arrival
	}
	busy, span := 0.0, 0.0
	for i, u := range r.Utilisation {
		end := r.End
		if i+1 < len(r.Utilisation) {
			end = r.Utilisation[i+1].Time
		}
		d := math.Max(0, end-u.Time)
		busy += u.Value * d
		span += d
	}
	if span > 0 {
		s.Utilisation = busy / span
	}
	return s
}

// Window returns the records of the jobs whose position in order of
// arrival (then ID) is in [from, to), as Summarise selects them; to <= 0
// means all from from on. It returns a new slice and only reads records.
func Window(records []Record, from, to int) []Record {
	return span(recordsByArrival(records), from, to)
}

// recordsByArrival returns a copy of the records in order of arrival, then ID.
func recordsByArrival(records []Record) []Record {
	recs := slices.Clone(records)
	slices.SortStableFunc(recs, func(a, b Record) int {
		if a.Arrival != b.Arrival {
			if a.Arrival < b.Arrival {
				return -1
			}
			return 1
		}
		return a.ID - b.ID
	})
	return recs
}

// span returns recs[from:to], to <= 0 or beyond the end meaning the end.
func span(recs []Record, from, to int) []Record {
	if to <= 0 || to > len(recs) {
		to = len(recs)
	}
	return recs[min(max(from, 0), to):to]
}

// quantile returns the q-quantile of sorted values by linear interpolation.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}
