package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/topology"
)

// PolluxApp is one of the applications of Pollux's evaluation (Qiao et
// al., OSDI 2021, section 5; profiles from the adaptdl artifact,
// simulator/traces/<app>/): its measured step times, the step-time model
// fitted to them, its gradient statistics over training at several batch
// sizes, and its batch-size limits. Progress counts steps at InitBatch
// weighted by statistical efficiency, as in the artifact's simulator; the
// job ends after MaxEpochs epochs.
//
// A PolluxApp is not changed after LoadPolluxApp: safe for concurrent
// use.
type PolluxApp struct {
	Name string
	// GPU is the type the application runs on: the profiles' (T4: Pollux
	// profiled on AWS g4dn.12xlarge nodes of 4 T4s) or, for a copy made by
	// OnType, another; Speedup is how much faster that type computes a
	// step than the profiled one (0 or 1 for the profiles themselves).
	GPU                 topology.GPUType
	Speedup             float64
	Samples             []elastic.PerfSample
	Perf                elastic.PerfParams
	InitBatch, MaxBatch float64
	MinLocal, MaxLocal  float64
	MaxEpochs           int
	batches             []float64 // validation batch sizes, increasing
	progress, sqr, vari [][]float64
	epochStart          []float64             // progress at the start of each epoch
	placed              map[string][]measured // by canonical placement
	scaled              map[[2]int][]measured // by (nodes, replicas)
}

// ErrUnknownApp reports an application without a profile.
var ErrUnknownApp = errors.New("sim: unknown application")

// polluxEpochs are the artifact's epoch counts (applications.py), and
// yolov3's micro-batch cap.
var polluxEpochs = map[string]int{"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50}

// PolluxApps lists the applications of Pollux's profiles.
var PolluxApps = []string{"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}

// LoadPolluxApp reads an application's profile from dir/<name>/ in fsys
// (placements.csv, scalability.csv, validation-<batch>.csv) and fits its
// step-time model (elastic.FitPerfParams) to every measured step.
//
// The files are read through the limits of ReadPhilly and must be regular
// files (a named pipe is refused, not waited on). Micro-batches are from 1
// to 2^30, step and sync times from 0 to 1e6 s with the step above the
// sync, placements at most 64 nodes of at most 9 replicas, nodes and
// replicas at most 1,048,576, gradient statistics and progress from 0 to
// 1e30; an application has at most 65,536 measured steps and 64
// validation files.
func LoadPolluxApp(fsys fs.FS, dir, name string) (*PolluxApp, error) {
	epochs, ok := polluxEpochs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not one of Pollux's applications", ErrUnknownApp, name)
	}
	a := &PolluxApp{Name: name, GPU: topology.T4, MaxEpochs: epochs, MinLocal: math.Inf(1)}
	base := path.Join(dir, name)
	read := func(file string, cols []string, f func(*row)) error {
		p := path.Join(base, file)
		if st, err := fs.Stat(fsys, p); err != nil {
			return err
		} else if !st.Mode().IsRegular() {
			return &ParseError{File: p, Msg: "not a regular file"}
		}
		fh, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = fh.Close() }()
		return csvRows(fh, p, cols, f)
	}
	a.placed, a.scaled = map[string][]measured{}, map[[2]int][]measured{}
	add := func(r *row, nodes, replicas int) (measured, bool) {
		m := r.number("local_bsz", 1, maxBatch, "a micro-batch size")
		step, sync := r.number("step_time", 0, maxStepTime, "seconds"), r.number("sync_time", 0, maxStepTime, "seconds")
		if r.err != nil {
			return measured{}, false
		}
		if !(step > sync) {
			r.fail("step time %v s not above sync time %v s", step, sync)
			return measured{}, false
		}
		if len(a.Samples) == maxPolluxSamples {
			r.fail("more than %d measured steps", maxPolluxSamples)
			return measured{}, false
		}
		a.Samples = append(a.Samples, elastic.PerfSample{Nodes: nodes, Replicas: replicas, Atomic: m, ComputeTime: step - sync, StepTime: step})
		a.MinLocal, a.MaxLocal = math.Min(a.MinLocal, m), math.Max(a.MaxLocal, m)
		return measured{atomic: m, step: step, sync: sync}, true
	}
	err := read("placements.csv", []string{"placement", "local_bsz", "step_time", "sync_time"}, func(r *row) {
		p := r.text("placement")
		if len(p) > maxPlacementNodes {
			r.fail("placement of %d nodes (want at most %d)", len(p), maxPlacementNodes)
			return
		}
		nodes, replicas := 0, 0
		for _, c := range p {
			if c < '0' || c > '9' {
				r.fail("placement %q is not digits", p)
				return
			}
			if c != '0' {
				nodes++
				replicas += int(c - '0')
			}
		}
		if nodes == 0 {
			r.fail("placement %q has no replicas", p)
			return
		}
		if x, ok := add(r, nodes, replicas); ok {
			key := canonicalPlacement(p)
			a.placed[key] = append(a.placed[key], x)
		}
	})
	if err != nil {
		return nil, err
	}
	err = read("scalability.csv", []string{"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"}, func(r *row) {
		n, k := r.integer("num_nodes", 1, maxGPUs, "a number of nodes"), r.integer("num_replicas", 1, maxGPUs, "a number of replicas")
		if r.err == nil && k < n {
			r.fail("%d replicas on %d nodes", k, n)
			return
		}
		if x, ok := add(r, n, k); ok {
			a.scaled[[2]int{n, k}] = append(a.scaled[[2]int{n, k}], x)
		}
	})
	if err != nil {
		return nil, err
	}
	if name == "yolov3" {
		a.MaxLocal = 8 // the artifact caps yolov3's micro-batch (applications.py)
	}
	for k, v := range a.placed {
		a.placed[k] = mergeMeasured(v)
	}
	for k, v := range a.scaled {
		a.scaled[k] = mergeMeasured(v)
	}
	files, err := fs.Glob(fsys, path.Join(base, "validation-*.csv"))
	if err != nil {
		return nil, err
	}
	if len(files) > maxValidationFiles {
		return nil, &ParseError{File: path.Join(base, "validation-*.csv"), Msg: fmt.Sprintf("%d validation files (want at most %d)", len(files), maxValidationFiles)}
	}
	type val struct {
		b           float64
		p, sq, var_ []float64
	}
	var vals []val
	for _, f := range files {
		bs := strings.TrimSuffix(strings.TrimPrefix(path.Base(f), "validation-"), ".csv")
		b, err := strconv.Atoi(bs)
		if err != nil || b < 1 || b > maxBatch {
			return nil, &ParseError{File: f, Line: 0, Msg: "the file name gives no batch size"}
		}
		v := val{b: float64(b)}
		err = read(path.Base(f), []string{"progress", "grad_sqr", "grad_var"}, func(r *row) {
			p := r.number("progress", 0, maxGradStat, "progress")
			s, x := r.number("grad_sqr", 0, maxGradStat, "a squared gradient norm"), r.number("grad_var", 0, maxGradStat, "a gradient variance")
			if r.err == nil {
				v.p, v.sq, v.var_ = append(v.p, p), append(v.sq, s), append(v.var_, x)
			}
		})
		if err != nil {
			return nil, err
		}
		if len(v.p) < epochs {
			return nil, &ParseError{File: f, Line: len(v.p) + 1, Msg: fmt.Sprintf("%d epochs, want %d", len(v.p), epochs)}
		}
		vals = append(vals, v)
	}
	if len(vals) == 0 || len(a.Samples) == 0 {
		return nil, fmt.Errorf("%w: %s has no validation files or no step times", ErrUnknownApp, base)
	}
	slices.SortFunc(vals, func(x, y val) int { return cmp.Compare(x.b, y.b) })
	for _, v := range vals {
		a.batches = append(a.batches, v.b)
		a.progress, a.sqr, a.vari = append(a.progress, v.p), append(a.sqr, v.sq), append(a.vari, v.var_)
	}
	a.InitBatch, a.MaxBatch = a.batches[0], a.batches[len(a.batches)-1]
	a.epochStart = make([]float64, epochs+1)
	for e := 1; e <= epochs; e++ {
		m := math.Inf(1)
		for _, p := range a.progress {
			m = math.Min(m, p[e-1])
		}
		a.epochStart[e] = m
	}
	if a.Perf, err = elastic.FitPerfParams(context.Background(), a.Samples); err != nil {
		return nil, fmt.Errorf("sim: fitting %s: %w", name, err)
	}
	return a, nil
}

// Limits of a Pollux profile.
const (
	maxStepTime        = 1e6
	maxPlacementNodes  = 64
	maxPolluxSamples   = 1 << 16
	maxValidationFiles = 64
	maxGradStat        = 1e30
)

// measured is a profiled step: micro-batch, step and sync time.
type measured struct{ atomic, step, sync float64 }

// mergeMeasured sorts steps by micro-batch, averaging repeated ones.
func mergeMeasured(v []measured) []measured {
	slices.SortStableFunc(v, func(x, y measured) int { return cmp.Compare(x.atomic, y.atomic) })
	out := v[:0]
	for i := 0; i < len(v); {
		j, sum := i, measured{atomic: v[i].atomic}
		for ; j < len(v) && v[j].atomic == v[i].atomic; j++ {
			sum.step += v[j].step
			sum.sync += v[j].sync
		}
		n := float64(j - i)
		sum.step, sum.sync = sum.step/n, sum.sync/n
		out = append(out, sum)
		i = j
	}
	return out
}

// canonicalPlacement drops nodes without replicas and takes the
// lexicographically smallest rotation, as the artifact keys its
// placements ("31" and "13" are the same placement).
func canonicalPlacement(p string) string {
	key := []byte(strings.ReplaceAll(p, "0", ""))
	return string(smallestRotation(key, make([]byte, len(key))))
}

// smallestRotation writes the lexicographically smallest rotation of key
// into dst (of the same length) and returns it.
func smallestRotation(key, dst []byte) []byte {
	k, best := len(key), 0
	for i := 1; i < k; i++ {
		for j := 0; j < k; j++ {
			x, y := key[(i+j)%k], key[(best+j)%k]
			if x != y {
				if x < y {
					best = i
				}
				break
			}
		}
	}
	for j := range dst {
		dst[j] = key[(best+j)%k]
	}
	return dst
}

// Measured returns the profiled step and sync times of a placement
// (replicas per node, in the cluster's node order) at a micro-batch,
// interpolated linearly in the micro-batch between profiled ones and held
// at the ends: from placements.csv when that placement was profiled, else
// from scalability.csv when its (nodes, replicas) was; ok is false when
// neither has it.
func (a *PolluxApp) Measured(perNode []int, atomic float64) (step, sync float64, ok bool) {
	var buf, rot [16]byte
	key := buf[:0]
	nodes, replicas, digits := 0, 0, true
	for _, n := range perNode {
		if n <= 0 {
			continue
		}
		nodes++
		replicas += n
		if n > 9 || len(key) == len(buf) {
			digits = false
		} else {
			key = append(key, byte('0'+n))
		}
	}
	var rows []measured
	if digits && len(key) > 0 {
		rows = a.placed[string(smallestRotation(key, rot[:len(key)]))]
	}
	if len(rows) == 0 {
		rows = a.scaled[[2]int{nodes, replicas}]
	}
	if len(rows) == 0 {
		return 0, 0, false
	}
	i, _ := slices.BinarySearchFunc(rows, atomic, func(m measured, x float64) int { return cmp.Compare(m.atomic, x) })
	switch {
	case i == 0:
		step, sync = rows[0].step, rows[0].sync
	case i == len(rows):
		step, sync = rows[i-1].step, rows[i-1].sync
	default:
		lo, hi := rows[i-1], rows[i]
		f := (atomic - lo.atomic) / (hi.atomic - lo.atomic)
		step, sync = lo.step+f*(hi.step-lo.step), lo.sync+f*(hi.sync-lo.sync)
	}
	if a.Speedup > 0 && a.Speedup != 1 {
		step = sync + (step-sync)/a.Speedup
	}
	return step, sync, true
}

// OnType returns the application on another GPU type that computes
// speedup times as fast as the profiled one, with the same network: its
// measured and fitted computation times divided by speedup, its
// synchronisation times, batch limits and gradient statistics kept. The
// result is a prediction (Sia's GPU types other than the profiles' have
// no public profile we may ship). speedup must be finite and positive.
func (a *PolluxApp) OnType(t topology.GPUType, speedup float64) (*PolluxApp, error) {
	if !(speedup > 0) || math.IsInf(speedup, 0) {
		return nil, fmt.Errorf("%w: %s on %s: speedup %v", elastic.ErrInvalid, a.Name, t, speedup)
	}
	b := *a
	b.GPU = t
	base := a.Speedup
	if base <= 0 {
		base = 1
	}
	b.Speedup = speedup * base
	b.Perf.AlphaC /= speedup
	b.Perf.BetaC /= speedup
	return &b, nil
}

// MaxProgress is the progress at which the application's job ends.
func (a *PolluxApp) MaxProgress() float64 { return a.epochStart[a.MaxEpochs] }

// Epoch returns the epoch a job is in at a progress.
func (a *PolluxApp) Epoch(progress float64) int {
	e, _ := slices.BinarySearch(a.epochStart, progress)
	if e < len(a.epochStart) && a.epochStart[e] == progress {
		e++
	}
	return min(max(e-1, 0), a.MaxEpochs-1)
}

// Grad returns the gradient statistics at an epoch, interpolated linearly
// in the batch size between the profiled batch sizes around it (the
// artifact's get_grad_stats).
// Epochs outside [0, MaxEpochs) are clamped to it.
func (a *PolluxApp) Grad(batch float64, epoch int) elastic.GradStats {
	epoch = min(max(epoch, 0), a.MaxEpochs-1)
	i, _ := slices.BinarySearch(a.batches, batch)
	switch {
	case i == 0:
		return elastic.GradStats{Sqr: a.sqr[0][epoch], Var: a.vari[0][epoch]}
	case i == len(a.batches):
		k := len(a.batches) - 1
		return elastic.GradStats{Sqr: a.sqr[k][epoch], Var: a.vari[k][epoch]}
	}
	lo, hi := a.batches[i-1], a.batches[i]
	f := (batch - lo) / (hi - lo)
	return elastic.GradStats{
		Sqr: a.sqr[i-1][epoch]*(1-f) + a.sqr[i][epoch]*f,
		Var: a.vari[i-1][epoch]*(1-f) + a.vari[i][epoch]*f,
	}
}

// FitError returns the root mean squared log error of the fitted model's
// step times over the application's measured steps.
func (a *PolluxApp) FitError() float64 {
	s := 0.0
	for _, x := range a.Samples {
		d := math.Log(a.Perf.StepTime(x.Nodes, x.Replicas, x.Atomic, 0)) - math.Log(x.StepTime)
		s += d * d
	}
	return math.Sqrt(s / float64(len(a.Samples)))
}

// GoodputCurve is a job's progress rate (steps of the initial batch per
// second) on a number of GPUs: adaptive (Batch 0: the goodput-optimal
// batch and micro-batch for each allocation, Pollux's co-adaptation) or
// at a fixed global batch. It follows the job's training: SetProgress
// moves it to the gradient statistics of the current epoch.
//
// Throughput is the scheduler's view: the fitted step-time model with
// replicas packed GPUsPerNode to a node. ThroughputOn is the simulated
// truth on an actual placement, as Pollux's simulator computes it: the
// job runs the batch configuration the model picks, at the step and sync
// times measured for that placement (PolluxApp.Measured), or the model's
// where the profile has none.
//
// A GoodputCurve caches its choices and follows its job's progress: it
// is not safe for concurrent use (give each job its own, as PolluxJobs
// does).
type GoodputCurve struct {
	App         *PolluxApp
	Batch       float64
	GPUsPerNode int
	epoch       int
	cache       map[[2]int]choice
}

type choice struct {
	c    elastic.Config
	rate float64
}

// SetProgress implements elastic.ProgressCurve: the curve moves to the
// epoch of done, the progress so far. A progress that is not a number is
// ignored (the curve stays where it was: it used to move to the first
// epoch); one below 0 counts as 0, one past the application's end as its
// last epoch.
func (g *GoodputCurve) SetProgress(done float64) {
	if g.App == nil || math.IsNaN(done) {
		return
	}
	if e := g.App.Epoch(done); e != g.epoch || g.cache == nil {
		g.epoch, g.cache = e, map[[2]int]choice{}
	}
}

// Throughput implements elastic.Curve with packed replicas. A curve
// without an application, or with GPUsPerNode outside 1 to
// elastic.MaxGPUsPerServer, and workers outside 1 to elastic.MaxWorkers
// give 0 (which elastic.Job.Validate and the simulators reject).
func (g *GoodputCurve) Throughput(workers int) float64 {
	if workers < 1 || workers > elastic.MaxWorkers || g.GPUsPerNode < 1 || g.GPUsPerNode > elastic.MaxGPUsPerServer || g.App == nil {
		return 0
	}
	return g.choose(workers, (workers+g.GPUsPerNode-1)/g.GPUsPerNode).rate
}

// ThroughputOn implements elastic.PlacedCurve. Servers listed with 0
// workers are not spanned; a negative count, or more than
// elastic.MaxWorkers workers in all, is no placement and gives 0 (a
// negative count used to be summed with the others).
func (g *GoodputCurve) ThroughputOn(perServer []int) float64 {
	workers, nodes := 0, 0
	for _, n := range perServer {
		if n < 0 || n > elastic.MaxWorkers-workers {
			return 0
		}
		if n > 0 {
			workers += n
			nodes++
		}
	}
	if workers < 1 || g.App == nil {
		return 0
	}
	ch := g.choose(workers, nodes)
	step, sync, ok := g.App.Measured(perServer, ch.c.Atomic)
	if !ok {
		return ch.rate
	}
	total := step + (step-sync)*float64(ch.c.Accum)
	grad := g.App.Grad(ch.c.Batch, g.epoch)
	return ch.c.Batch / total * grad.Efficiency(g.App.InitBatch, ch.c.Batch) / g.App.InitBatch
}

// choose returns the configuration the model picks on workers GPUs over
// nodes nodes, and its rate under the model.
func (g *GoodputCurve) choose(workers, nodes int) choice {
	if g.cache == nil {
		g.cache = map[[2]int]choice{}
	}
	key := [2]int{workers, nodes}
	if v, ok := g.cache[key]; ok {
		return v
	}
	m := &elastic.Goodput{Perf: g.App.Perf, InitBatch: g.App.InitBatch, MaxBatch: g.App.MaxBatch,
		MinAtomic: g.App.MinLocal, MaxAtomic: g.App.MaxLocal, Accumulation: true}
	var best choice
	if g.Batch > 0 {
		best.c = m.FixedBatch(workers, g.Batch)
		m.Grad = g.App.Grad(best.c.Batch, g.epoch)
		best.rate = m.Rate(nodes, workers, best.c)
	} else {
		// Gradient statistics are measured per batch size: each candidate
		// is judged with those interpolated at its own batch.
		for _, c := range m.Candidates(workers) {
			m.Grad = g.App.Grad(c.Batch, g.epoch)
			if r := m.Rate(nodes, workers, c); r > best.rate {
				best = choice{c, r}
			}
		}
	}
	g.cache[key] = best
	return best
}

// PolluxJobs turns a Pollux workload (ReadPollux) into elastic jobs of
// one-GPU workers on nodes of gpusPerNode GPUs. Adaptive jobs choose their
// batch size for every allocation (Pollux's co-adaptation) and may grow to
// min(maxWorkers, MaxBatch / MinLocal) GPUs, except ncf, which the artifact
// pins to one GPU at batch 32768; other jobs keep the workload's batch
// size and may grow to min(maxWorkers, batch / MinLocal) GPUs (the
// artifact's Optimus), or, with fixed, run on exactly the workload's
// num_replicas (its Tiresias). Work is the application's MaxProgress.
func PolluxJobs(trace []Job, apps map[string]*PolluxApp, gpusPerNode, maxWorkers int, adaptive, fixed bool) ([]elastic.Job, error) {
	if gpusPerNode < 1 || maxWorkers < 1 {
		return nil, fmt.Errorf("%w: %d GPUs per node, at most %d workers", elastic.ErrInvalid, gpusPerNode, maxWorkers)
	}
	out := make([]elastic.Job, len(trace))
	for i, j := range trace {
		a := apps[j.Name]
		if a == nil {
			return nil, fmt.Errorf("%w: job %d runs %q", ErrUnknownApp, j.ID, j.Name)
		}
		lo, hi, batch, err := polluxBounds(j, a, maxWorkers, adaptive, fixed)
		if err != nil {
			return nil, err
		}
		out[i] = elastic.Job{ID: j.ID, Arrival: j.Arrival, MinWorkers: lo, MaxWorkers: hi, GPUsPerWorker: 1, Work: a.MaxProgress(),
			Curve: &GoodputCurve{App: a, GPUsPerNode: gpusPerNode, Batch: batch}}
	}
	return out, nil
}

// polluxBounds are a Pollux job's workers and batch (0: adaptive) in each
// mode of PolluxJobs.
func polluxBounds(j Job, a *PolluxApp, maxWorkers int, adaptive, fixed bool) (lo, hi int, batch float64, err error) {
	lo, hi = 1, 1
	switch {
	case adaptive && a.Name == "ncf":
		batch = 32768
	case adaptive:
		hi = int(a.MaxBatch / a.MinLocal)
	case fixed:
		batch = float64(j.Key.BatchSize)
		lo, hi = j.Key.ScaleFactor, j.Key.ScaleFactor
	default:
		batch = float64(j.Key.BatchSize)
		hi = int(batch / a.MinLocal)
	}
	if !adaptive && !(batch >= 1) {
		return 0, 0, 0, fmt.Errorf("%w: job %d has batch size %v", elastic.ErrInvalid, j.ID, batch)
	}
	hi = max(lo, min(hi, maxWorkers))
	if lo > maxWorkers {
		return 0, 0, 0, fmt.Errorf("%w: job %d needs %d GPUs of %d", elastic.ErrInvalid, j.ID, lo, maxWorkers)
	}
	return lo, hi, batch, nil
}
