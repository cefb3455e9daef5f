package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

// GavelWorkload generates jobs the way Gavel's simulator does
// (scheduler/utils.py: generate_job, _generate_scale_factor,
// _generate_duration; Narayanan et al., OSDI 2020, section 7.1):
//
//   - job type: uniform over Gavel's 26 templates (the single-GPU keys of
//     the throughput table), redrawn until the template runs on several
//     GPUs when the scale factor is above 1;
//   - scale factor, with MultiGPU: r ~ U(0,1); 1 if r < 0.7, 2 if r <= 0.8,
//     4 if r <= 0.95, else 8 (70/10/15/5 %); 1 without;
//   - duration: 60 * 10^U(3,4) s with probability 0.2, else 60 * 10^U(1.5,3) s;
//   - steps: duration times the job's rate on the reference type (V100)
//     at its scale factor, so duration is its run time on V100s;
//   - priority: with MultiPriority, weight 5 for 20% of jobs, else 1;
//   - arrivals: a Poisson process of Rate jobs per hour (exponential gaps
//     of mean 3600/Rate s); Rate 0 puts every job at time 0 (Gavel's static
//     traces).
//
// Gavel seeds its job generator with seed+2 and its arrivals with seed+3;
// so does this, with Go's PCG by default, so the jobs follow the same
// distributions, not the same draws. With Python set, the draws are
// CPython's (Mersenne Twister, in the order generate_job makes them) and
// the jobs are exactly those of Gavel's simulator for the same seed and
// rate (Gavel's scheduler/utils.py generate_job at c4fa400, draw for
// draw).
//
// Generate only reads the GavelWorkload: it is safe for concurrent use.
type GavelWorkload struct {
	Rate          float64
	MultiGPU      bool
	MultiPriority bool
	Seed          uint64
	// Python draws from CPython's random streams as Gavel does, so that
	// job i is Gavel's job i (template, scale factor, steps unrounded,
	// weight, arrival).
	Python bool
	// Table gives the templates and rates; nil means gavel.Simulation().
	Table *perfmodel.Table
	// Reference is the type whose rate converts durations to steps; empty
	// means V100.
	Reference topology.GPUType
}

// Generate returns n jobs (at most MaxJobs), with IDs 0 to n-1 in order
// of arrival. Rate is 0 (a static trace) or from 1e-3 to 1e6 jobs per
// hour, so that arrivals stay finite and apart.
func (w *GavelWorkload) Generate(n int) ([]Job, error) {
	switch {
	case n < 0 || n > MaxJobs:
		return nil, invalid("Gavel workload: %d jobs (want 0 to %d)", n, MaxJobs)
	case w.Rate != 0 && !(w.Rate >= 1e-3 && w.Rate <= 1e6):
		return nil, invalid("Gavel workload: %v jobs/h (want 0, or from 0.001 to 1e+06)", w.Rate)
	}
	tab := w.Table
	if tab == nil {
		tab = gavel.Simulation()
	}
	ref := w.Reference
	if ref == "" {
		ref = topology.V100
	}
	var templates []perfmodel.JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			templates = append(templates, k)
		}
	}
	if len(templates) == 0 {
		return nil, fmt.Errorf("sim: Gavel workload: the table has no single-GPU jobs")
	}
	distributed := func(k perfmodel.JobKey) bool { return slices.Contains(tab.ScaleFactors(k), 2) }
	if w.Python {
		return w.generatePython(n, tab, ref, distributed)
	}
	jobRNG := rand.New(rand.NewPCG(w.Seed+2, 0))
	arrRNG := rand.New(rand.NewPCG(w.Seed+3, 0))
	jobs := make([]Job, n)
	t := 0.0
	for i := range jobs {
		sf := 1
		if w.MultiGPU {
			switch r := jobRNG.Float64(); {
			case r < 0.7:
				sf = 1
			case r <= 0.8:
				sf = 2
			case r <= 0.95:
				sf = 4
			default:
				sf = 8
			}
		}
		k := templates[jobRNG.IntN(len(templates))]
		for sf > 1 && !distributed(k) {
			k = templates[jobRNG.IntN(len(templates))]
		}
		k.ScaleFactor = sf
		var dur float64
		if jobRNG.Float64() < 0.2 {
			dur = 60 * math.Pow(10, 3+jobRNG.Float64())
		} else {
			dur = 60 * math.Pow(10, 1.5+1.5*jobRNG.Float64())
		}
		rate, err := tab.Throughput(k, ref)
		if err != nil {
			return nil, fmt.Errorf("sim: Gavel workload: %w", err)
		}
		weight := 1.0
		if w.MultiPriority && jobRNG.Float64() < 0.2 {
			weight = 5
		}
		if w.Rate > 0 && i > 0 {
			t += arrRNG.ExpFloat64() * 3600 / w.Rate
		}
		jobs[i] = Job{ID: i, Arrival: t, Key: k, Steps: math.Max(1, math.Round(dur*rate)), Weight: weight, Duration: dur}
	}
	return jobs, nil
}
