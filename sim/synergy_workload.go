package sim

import (
	"cmp"
	"fmt"
	"iter"
	"math"

	"github.com/gpusched/gpusched/internal/pyrand"
	"github.com/gpusched/gpusched/multires"
)

// SynergyWorkload is Synergy's Philly-derived workload (its artifact's
// simulator/runner.py with the default --cluster_job_log, exponential
// arrivals; jobs/workload.py, jobs/model_zoo.py, helpers/utils.py),
// drawn as the artifact draws it with CPython's generator:
//
//   - durations as in Gavel: with probability 0.2, 10^U(3,4) minutes,
//     else 10^U(1.5,3) minutes, from random.seed(Seed) (the artifact draws
//     them when it reads the Philly trace, two per job; in single-GPU runs
//     the trace gives nothing else), as iterations at the proportional
//     share: int(duration / iteration time);
//   - arrivals Poisson at Rate jobs per hour, in whole seconds, from a
//     second random.seed(Seed) stream (a reloaded job list restarts it),
//     with the class draw randint(0, 9) after each, which the artifact
//     makes and ignores;
//   - models by the "overall" split: each job's task (image, language,
//     speech) is the one furthest below its share of Split among the jobs
//     so far (ties in that order), and within a task its models in turn.
//
// With MultiGPU, each job's GPUs are drawn after its duration from the
// arrival stream as the artifact's synthetic mode draws them (1, 2, 4 or
// 8 GPUs with probabilities 0.7, 0.1, 0.15, 0.05): the Philly trace whose
// GPU counts the artifact's --multigpu runs use is not shipped with it.
//
// A SynergyWorkload is a plain value, safe for concurrent use; each call
// of Jobs starts its own generators.
type SynergyWorkload struct {
	// Rate is the arrival rate in jobs per hour.
	Rate float64
	// Split is the percentage of image, language and speech jobs; zero
	// means Synergy's default (20, 70, 10).
	Split [3]int
	// Seed seeds both streams; the artifact's is 42.
	Seed uint64
	// MultiGPU draws multi-GPU jobs; see above.
	MultiGPU bool
	// Profiles are the models; nil means multires.Zoo(). Tasks are
	// matched by Profile.Task ("image", "lang", "speech").
	Profiles *multires.Profiles
}

var synergyTasks = [3]string{"image", "lang", "speech"}

// Jobs returns the workload's endless sequence of jobs, in arrival order,
// numbered from 0. It returns an error when the rate or split is out of
// range or a task has no model.
func (w SynergyWorkload) Jobs() (iter.Seq[SynergyJob], error) {
	if !(w.Rate > 0 && w.Rate <= 1e6) {
		return nil, invalid("SynergyWorkload.Rate %g: want jobs per hour in (0, 1e6]", w.Rate)
	}
	split := w.Split
	if split == ([3]int{}) {
		split = [3]int{20, 70, 10}
	}
	if split[0] < 0 || split[1] < 0 || split[2] < 0 || split[0]+split[1]+split[2] != 100 {
		return nil, invalid("SynergyWorkload.Split %v: want three percentages adding up to 100", split)
	}
	models, err := tasksOf(cmp.Or(w.Profiles, multires.Zoo()), split)
	if err != nil {
		return nil, err
	}
	return func(yield func(SynergyJob) bool) {
		g := synergyGen{w: w, split: split, models: models, dur: pyrand.New(w.Seed), arr: pyrand.New(w.Seed)}
		for id := 0; ; id++ {
			if !yield(g.next(id)) {
				return
			}
		}
	}, nil
}

// tasksOf groups the profiles by task, checking that every task the split
// asks for has one.
func tasksOf(ps *multires.Profiles, split [3]int) ([3][]*multires.Profile, error) {
	var models [3][]*multires.Profile
	for _, p := range ps.Models {
		for t, name := range synergyTasks {
			if p.Task == name {
				models[t] = append(models[t], p)
			}
		}
	}
	for t, ms := range models {
		if len(ms) == 0 && split[t] > 0 {
			return models, invalid("SynergyWorkload: no %s model among the profiles, and Split gives it %d%%", synergyTasks[t], split[t])
		}
	}
	return models, nil
}

type synergyGen struct {
	w        SynergyWorkload
	split    [3]int
	models   [3][]*multires.Profile
	dur, arr *pyrand.Rand
	count    [3]int
	turn     [3]int
	t        float64
}

func gavelDuration(r *pyrand.Rand) float64 {
	if r.Float64() >= 0.8 {
		return 60 * math.Pow(10, r.Uniform(3, 4))
	}
	return 60 * math.Pow(10, r.Uniform(1.5, 3))
}

func (g *synergyGen) next(id int) SynergyJob {
	u := g.arr.Float64()
	g.t += math.Ceil(-math.Log(1-u) / g.w.Rate * 60 * 60)
	gpus := 1
	var dur float64
	if g.w.MultiGPU {
		dur = gavelDuration(g.arr)
		switch r := g.arr.Uniform(0, 1); {
		case r >= 0.95:
			gpus = 8
		case r >= 0.8:
			gpus = 4
		case r >= 0.7:
			gpus = 2
		}
	} else {
		dur = gavelDuration(g.dur)
	}
	g.arr.IntN(10) // the class draw the artifact ignores
	task := g.task(id)
	ms := g.models[task]
	p := ms[g.turn[task]%len(ms)]
	g.turn[task]++
	g.count[task]++
	return SynergyJob{
		Job:     Job{ID: id, Arrival: g.t, Steps: math.Trunc(dur / p.IterTime), Weight: 1, Name: p.Name},
		GPUs:    gpus,
		Profile: p,
	}
}

// task is the task furthest below its share among the jobs so far.
func (g *synergyGen) task(id int) int {
	best, bestPrio := 0, math.Inf(-1)
	for t := range g.count {
		prio := 0.0
		if id > 0 {
			prio = float64(g.split[t])/100 - float64(g.count[t])/float64(id)
		}
		if len(g.models[t]) > 0 && prio > bestPrio {
			best, bestPrio = t, prio
		}
	}
	return best
}

// String names the workload as reports do.
func (w SynergyWorkload) String() string {
	kind := "single-GPU"
	if w.MultiGPU {
		kind = "multi-GPU"
	}
	return fmt.Sprintf("Synergy %s, %g jobs/h", kind, w.Rate)
}
