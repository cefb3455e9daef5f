package perfmodel

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/gpusched/gpusched/topology"
)

// HardwareSpec holds the nominal rates of one GPU type from its vendor's
// data sheet.
// It is a plain value, safe for concurrent reads.
type HardwareSpec struct {
	Type topology.GPUType
	// Name is the product, such as "H100 SXM5 80 GB".
	Name string
	// FP16TFLOPS is the dense 16-bit matrix rate (tensor cores, without
	// sparsity), or the fastest FP16 or FP32 rate of a GPU without tensor
	// cores; FP32TFLOPS the single-precision rate.
	FP16TFLOPS, FP32TFLOPS float64
	// MemoryGB and BandwidthGBps are the memory and its bandwidth.
	MemoryGB, BandwidthGBps float64
	// Source cites the data sheet.
	Source string
}

func (s *HardwareSpec) validate() error {
	for _, v := range []float64{s.FP16TFLOPS, s.FP32TFLOPS, s.MemoryGB, s.BandwidthGBps} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: spec of %s: rates and sizes must be finite and > 0", ErrSpecFit, s.Type)
		}
	}
	return s.Type.Validate()
}

// Precision is the arithmetic a job trains in, which decides the compute
// rate of a GPU that it sees.
// Its values are constants, safe for concurrent use.
type Precision int

const (
	// Mixed precision (FP16 or BF16 on tensor cores, as MLPerf's
	// submissions): the GPU's FP16TFLOPS.
	Mixed Precision = iota
	// FP32: single precision (Gavel's 2019 PyTorch jobs): FP32TFLOPS.
	FP32
)

// compute returns the compute rate a job of precision p sees.
func (s *HardwareSpec) compute(p Precision) float64 {
	if p == FP32 {
		return s.FP32TFLOPS
	}
	return s.FP16TFLOPS
}

// features are the model's regressors: log compute, log bandwidth.
func (s *HardwareSpec) features(p Precision) [nFeatures]float64 {
	return [nFeatures]float64{math.Log(s.compute(p)), math.Log(s.BandwidthGBps)}
}

const nFeatures = 2

// FeatureNames name the elasticities of [SpecModel.Elasticities].
var FeatureNames = [nFeatures]string{"compute", "bandwidth"}

// Observation is a measured rate: job Job at Rate steps per second on GPU
// type Type (the whole job's rate, as in [ThroughputModel]).
// It is a plain value, safe for concurrent reads.
type Observation struct {
	Job       JobKey
	Type      topology.GPUType
	Rate      float64
	Precision Precision
	// Source says where the measurement comes from.
	Source string
}

// Observations lists the isolated rates of a table (every job, at every
// scale factor, on every type it has), for [FitSpecModel].
func Observations(t *Table, p Precision, source string) []Observation {
	var out []Observation
	for _, k := range t.Jobs() {
		for _, gt := range t.GPUTypes() {
			if r, err := t.Throughput(k, gt); err == nil && r > 0 {
				out = append(out, Observation{Job: k, Type: gt, Rate: r, Precision: p, Source: source})
			}
		}
	}
	return out
}

// Estimate is a model's answer with its provenance.
// It is a plain value, safe for concurrent reads.
type Estimate struct {
	// Rate is in steps per second; 0 means the job cannot run there.
	Rate float64
	// Predicted is false for a measured rate and true for a value of the
	// model.
	Predicted bool
	// Basis says which: "measured: <source>", or how it was predicted.
	Basis string
}

// SpecModel predicts a job's rate on a GPU type from the type's hardware
// specification, fitted to measured rates of jobs on other types: a
// log-linear (Cobb-Douglas) model with one intercept per job,
//
//	log r(j, t) = a_j + b_c log C_p(t) + b_bw log BW(t),
//
// where C_p(t) is the compute rate of t in the job's precision p (the dense
// FP16 tensor rate for mixed precision, the FP32 rate for FP32) and BW(t)
// its memory bandwidth. It is fitted by least squares on the within-job
// deviations (the intercepts absorb each job's own scale), with both
// elasticities kept non-negative. A job measured on two types or more gets
// elasticities of its own, its own least-squares fit pulled towards the
// pooled ones (a ridge penalty lambda |b_j - b|^2; partial pooling, as in
// Gelman and Hill, "Data Analysis Using Regression and Multilevel/
// Hierarchical Models", 2007, chapter 12), so that a job that gains little
// from faster GPUs keeps gaining little. A job needs a measurement on at
// least one type with a spec to be predicted; a job measured on one type
// only takes the pooled elasticities. Measured values are returned as they are
// (Estimate.Predicted false); everything else is marked predicted.
//
// MIG slices ([topology.MIGSliceType]) run at the rate of their whole GPU
// times 1 / (phi/c + (1-phi)/b), where c and b are the slice's shares of
// the compute slices and of the memory slices (each memory slice carries
// 1/8 of the memory resources, bandwidth included: NVIDIA's MIG user
// guide, "Concepts"), and phi = b_c / (b_c + b_bw) is the job's fitted share of
// compute: an additive roofline whose answer lies between the two shares.
// A fraction of a GPU shared by time slicing ([topology.FractionType]) gets
// that share of the whole GPU's rate. Both are predictions, marked as such;
// neither knows whether the job fits in the slice's memory.
//
// A SpecModel is immutable after FitSpecModel and safe for concurrent use.
type SpecModel struct {
	specs    map[topology.GPUType]HardwareSpec
	measured map[JobKey]map[topology.GPUType]Observation
	beta     [nFeatures]float64
	// intercept is each job's a_j, precision its precision, and jobBeta
	// its own elasticities (jobs measured on two types or more).
	intercept map[JobKey]float64
	precision map[JobKey]Precision
	jobBeta   map[JobKey][nFeatures]float64
	shrinkage float64
}

// SpecOptions tune FitSpecModelWith.
// It is a plain value, safe for concurrent reads.
type SpecOptions struct {
	// Shrinkage is lambda of the job elasticities (see SpecModel); a
	// negative value gives every job the pooled elasticities.
	Shrinkage float64
}

// DefaultShrinkage is the lambda of FitSpecModel, the best of the grid
// 0.1 to 30 by mean leave-one-type-out error on the embedded MLPerf
// results and Gavel's table (perfmodel/hw's tests).
const DefaultShrinkage = 1

var _ ThroughputModel = (*SpecModel)(nil)

// FitSpecModel fits the model with DefaultShrinkage. Observations of types
// without a spec are kept as measurements but not fitted; rates must be
// finite and > 0, and a job's observations must agree on its precision.
func FitSpecModel(specs []HardwareSpec, obs []Observation) (*SpecModel, error) {
	return FitSpecModelWith(specs, obs, SpecOptions{Shrinkage: DefaultShrinkage})
}

// FitSpecModelWith is FitSpecModel with options.
func FitSpecModelWith(specs []HardwareSpec, obs []Observation, opt SpecOptions) (*SpecModel, error) {
	if math.IsNaN(opt.Shrinkage) || math.IsInf(opt.Shrinkage, 0) {
		return nil, fmt.Errorf("%w: shrinkage %v", ErrSpecFit, opt.Shrinkage)
	}
	m := &SpecModel{specs: map[topology.GPUType]HardwareSpec{}, measured: map[JobKey]map[topology.GPUType]Observation{},
		precision: map[JobKey]Precision{}, shrinkage: opt.Shrinkage}
	for _, s := range specs {
		if err := s.validate(); err != nil {
			return nil, err
		}
		if _, dup := m.specs[s.Type]; dup {
			return nil, fmt.Errorf("%w: two specs for %s", ErrSpecFit, s.Type)
		}
		m.specs[s.Type] = s
	}
	for _, o := range obs {
		switch {
		case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
			return nil, fmt.Errorf("%w: %s on %s: rate %v (want finite > 0)", ErrSpecFit, o.Job, o.Type, o.Rate)
		case o.Precision != Mixed && o.Precision != FP32:
			return nil, fmt.Errorf("%w: %s on %s: unknown precision %d", ErrSpecFit, o.Job, o.Type, o.Precision)
		}
		if m.measured[o.Job] == nil {
			m.measured[o.Job] = map[topology.GPUType]Observation{}
			m.precision[o.Job] = o.Precision
		}
		if _, dup := m.measured[o.Job][o.Type]; dup {
			return nil, fmt.Errorf("%w: two measurements of %s on %s", ErrSpecFit, o.Job, o.Type)
		}
		if m.precision[o.Job] != o.Precision {
			return nil, fmt.Errorf("%w: %s is measured in two precisions", ErrSpecFit, o.Job)
		}
		m.measured[o.Job][o.Type] = o
	}
	if err := m.fit(""); err != nil {
		return nil, err
	}
	return m, nil
}

// fit estimates beta and the intercepts, leaving out the measurements of
// type skip (if not empty).
func (m *SpecModel) fit(skip topology.GPUType) error {
	var xs [][nFeatures]float64
	var ys []float64
	jobs := make([]JobKey, 0, len(m.measured))
	for k := range m.measured {
		jobs = append(jobs, k)
	}
	slices.SortFunc(jobs, func(a, b JobKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range jobs {
		jx, jy := m.points(k, skip)
		if len(jy) < 2 {
			continue
		}
		var mx [nFeatures]float64
		for _, x := range jx {
			for f := range mx {
				mx[f] += x[f] / float64(len(jx))
			}
		}
		my := mean(jy)
		for i := range jy {
			var d [nFeatures]float64
			for f := range d {
				d[f] = jx[i][f] - mx[f]
			}
			xs, ys = append(xs, d), append(ys, jy[i]-my)
		}
	}
	if len(ys) < 3 {
		return fmt.Errorf("%w: %d within-job deviations; need jobs measured on several types with specs", ErrSpecFit, len(ys))
	}
	m.beta = nonNegativeLS(xs, ys)
	m.intercept, m.jobBeta = map[JobKey]float64{}, map[JobKey][nFeatures]float64{}
	for _, k := range jobs {
		jx, jy := m.points(k, skip)
		if len(jy) == 0 {
			continue
		}
		if len(jy) >= 2 && m.shrinkage >= 0 {
			m.jobBeta[k] = shrunk(jx, jy, m.beta, m.shrinkage)
		}
		sum := 0.0
		for i := range jy {
			sum += jy[i] - m.dot(k, jx[i])
		}
		m.intercept[k] = sum / float64(len(jy))
	}
	return nil
}

// shrunk returns a job's elasticities: least squares on its own
// deviations from its means, pulled towards the pooled ones by lambda
// (ridge towards beta: (X'X + lambda I)^-1 (X'y + lambda beta)), negatives
// set to 0.
func shrunk(xs [][nFeatures]float64, ys []float64, beta [nFeatures]float64, lambda float64) [nFeatures]float64 {
	var mx [nFeatures]float64
	for _, x := range xs {
		for f := range mx {
			mx[f] += x[f] / float64(len(xs))
		}
	}
	my := mean(ys)
	a := mat.NewSymDense(nFeatures, nil)
	b := mat.NewVecDense(nFeatures, nil)
	for i, x := range xs {
		for f := range nFeatures {
			b.SetVec(f, b.AtVec(f)+(x[f]-mx[f])*(ys[i]-my))
			for g := f; g < nFeatures; g++ {
				a.SetSym(f, g, a.At(f, g)+(x[f]-mx[f])*(x[g]-mx[g]))
			}
		}
	}
	for f := range nFeatures {
		a.SetSym(f, f, a.At(f, f)+lambda)
		b.SetVec(f, b.AtVec(f)+lambda*beta[f])
	}
	var sol mat.VecDense
	if err := sol.SolveVec(a, b); err != nil {
		return beta
	}
	var out [nFeatures]float64
	for f := range out {
		out[f] = max(0, sol.AtVec(f))
	}
	return out
}

// points returns the features and log rates of job k's measurements on
// types with a spec, but type skip.
func (m *SpecModel) points(k JobKey, skip topology.GPUType) (xs [][nFeatures]float64, ys []float64) {
	types := make([]topology.GPUType, 0, len(m.measured[k]))
	for t := range m.measured[k] {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		if s, ok := m.specs[t]; ok && t != skip {
			xs, ys = append(xs, s.features(m.precision[k])), append(ys, math.Log(m.measured[k][t].Rate))
		}
	}
	return xs, ys
}

// dot is job k's elasticities times the features x.
func (m *SpecModel) dot(k JobKey, x [nFeatures]float64) float64 {
	b := m.elasticities(k)
	s := 0.0
	for f := range x {
		s += b[f] * x[f]
	}
	return s
}

func (m *SpecModel) elasticities(k JobKey) [nFeatures]float64 {
	if b, ok := m.jobBeta[k]; ok {
		return b
	}
	return m.beta
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// nonNegativeLS returns the least-squares solution with non-negative
// coefficients: the best fit over the supports whose unconstrained
// solution is non-negative (exact for so few regressors; zero if none is).
func nonNegativeLS(xs [][nFeatures]float64, ys []float64) [nFeatures]float64 {
	var best [nFeatures]float64
	bestSSE := math.Inf(1)
	for support := 1; support < 1<<nFeatures; support++ {
		var cols []int
		for f := range nFeatures {
			if support>>f&1 == 1 {
				cols = append(cols, f)
			}
		}
		a := mat.NewDense(len(ys), len(cols), nil)
		for i, x := range xs {
			for j, c := range cols {
				a.Set(i, j, x[c])
			}
		}
		var sol mat.VecDense
		if err := sol.SolveVec(a, mat.NewVecDense(len(ys), slices.Clone(ys))); err != nil {
			continue
		}
		var b [nFeatures]float64
		ok := true
		for j, c := range cols {
			b[c] = sol.AtVec(j)
			ok = ok && b[c] >= 0
		}
		if !ok {
			continue
		}
		sse := 0.0
		for i, x := range xs {
			r := ys[i]
			for f := range x {
				r -= b[f] * x[f]
			}
			sse += r * r
		}
		if sse < bestSSE {
			best, bestSSE = b, sse
		}
	}
	return best
}

// Elasticities returns the pooled b_c and b_bw (see FeatureNames).
func (m *SpecModel) Elasticities() [nFeatures]float64 { return m.beta }

// JobElasticities returns the elasticities job k is predicted with: its
// own when measured on two types or more, else the pooled ones.
func (m *SpecModel) JobElasticities(k JobKey) [nFeatures]float64 { return m.elasticities(k) }

// Spec returns the specification of type t.
func (m *SpecModel) Spec(t topology.GPUType) (HardwareSpec, bool) {
	s, ok := m.specs[t]
	return s, ok
}

// Throughput implements ThroughputModel with [SpecModel.Estimate]'s rate.
func (m *SpecModel) Throughput(k JobKey, t topology.GPUType) (float64, error) {
	e, err := m.Estimate(k, t)
	return e.Rate, err
}

// Estimate returns the measured rate of k on t if there is one, else the
// model's prediction for a whole GPU, a MIG slice or a time-sliced
// fraction. A job never measured on a type with a spec is an error
// wrapping ErrUnknownJob; a type without spec or measurement one wrapping
// ErrUnknownGPUType.
func (m *SpecModel) Estimate(k JobKey, t topology.GPUType) (Estimate, error) {
	if o, ok := m.measured[k][t]; ok {
		return Estimate{Rate: o.Rate, Basis: "measured: " + o.Source}, nil
	}
	if p, pi, ok := topology.ParseMIGSliceType(t); ok {
		return m.slice(k, p, pi)
	}
	if base, f, ok := topology.ParseFractionType(t); ok {
		e, err := m.Estimate(k, base)
		if err != nil {
			return Estimate{}, err
		}
		return Estimate{Rate: f * e.Rate, Predicted: true, Basis: fmt.Sprintf("a %v time share of %s (%s)", f, base, e.Basis)}, nil
	}
	return m.predict(k, t)
}

func (m *SpecModel) predict(k JobKey, t topology.GPUType) (Estimate, error) {
	a, ok := m.intercept[k]
	if !ok {
		return Estimate{}, &JobError{Job: k, Type: t, Kind: ErrUnknownJob, Msg: "the job has no measurement on a type with a spec"}
	}
	s, ok := m.specs[t]
	if !ok {
		return Estimate{}, &JobError{Job: k, Type: t, Kind: ErrUnknownGPUType, Msg: "the type has neither spec nor measurement"}
	}
	r := math.Exp(a + m.dot(k, s.features(m.precision[k])))
	return Estimate{Rate: r, Predicted: true, Basis: "predicted from the specs of " + s.Name}, nil
}

// slice predicts a MIG slice from its whole GPU.
func (m *SpecModel) slice(k JobKey, p *topology.MIGProduct, pi int) (Estimate, error) {
	whole, err := m.Estimate(k, p.Type)
	if err != nil {
		return Estimate{}, err
	}
	pf := &p.Profiles[pi]
	c := float64(pf.ComputeSlices) / float64(p.ComputeSlices)
	b := float64(pf.MemorySlices) / float64(p.MemorySlices)
	return Estimate{Rate: whole.Rate * SliceShare(m.computeShare(m.elasticities(k)), c, b), Predicted: true,
		Basis: fmt.Sprintf("MIG %s of %s: %d/%d compute and %d/%d memory slices of %s", pf.Name, p.Name,
			pf.ComputeSlices, p.ComputeSlices, pf.MemorySlices, p.MemorySlices, whole.Basis)}, nil
}

// ComputeShare is phi = b_c / (b_c + b_bw) of the pooled elasticities,
// the fitted share of compute in a job's time; 1/2 when both are 0. A
// slice of a job measured on several types uses the job's own
// elasticities.
func (m *SpecModel) ComputeShare() float64 { return m.computeShare(m.beta) }

func (m *SpecModel) computeShare(b [nFeatures]float64) float64 {
	if b[0]+b[1] == 0 {
		return 0.5
	}
	return b[0] / (b[0] + b[1])
}

// SliceShare is the share of a whole GPU's rate that a slice with compute
// share c and bandwidth share b delivers when a fraction phi of the time is
// compute (an additive roofline): 1 / (phi/c + (1-phi)/b).
func SliceShare(phi, c, b float64) float64 {
	return 1 / (phi/c + (1-phi)/b)
}

// TypeError is the leave-one-type-out error of the model on one type.
// It is a plain value, safe for concurrent reads.
type TypeError struct {
	Type topology.GPUType
	// N is the number of measurements predicted.
	N int
	// MAPE and MedianAPE are the mean and median absolute percentage
	// errors |predicted - measured| / measured, in percent; Bias is the
	// mean of log(predicted / measured).
	MAPE, MedianAPE, Bias float64
}

// LeaveOneTypeOut refits the model without each type with a spec in turn
// and predicts that type's measurements of the jobs measured elsewhere.
func (m *SpecModel) LeaveOneTypeOut() ([]TypeError, error) {
	var types []topology.GPUType
	for t := range m.specs {
		types = append(types, t)
	}
	slices.Sort(types)
	var out []TypeError
	for _, t := range types {
		cp := &SpecModel{specs: m.specs, measured: m.measured, precision: m.precision, shrinkage: m.shrinkage}
		if err := cp.fit(t); err != nil {
			return nil, fmt.Errorf("without %s: %w", t, err)
		}
		var apes, logs []float64
		for k, byType := range m.measured {
			o, ok := byType[t]
			if !ok {
				continue
			}
			e, err := cp.predict(k, t)
			if err != nil {
				continue // measured on this type only
			}
			apes = append(apes, 100*math.Abs(e.Rate-o.Rate)/o.Rate)
			logs = append(logs, math.Log(e.Rate/o.Rate))
		}
		if len(apes) == 0 {
			continue
		}
		slices.Sort(apes)
		med := apes[len(apes)/2]
		if len(apes)%2 == 0 {
			med = (apes[len(apes)/2-1] + apes[len(apes)/2]) / 2
		}
		out = append(out, TypeError{Type: t, N: len(apes), MAPE: mean(apes), MedianAPE: med, Bias: mean(logs)})
	}
	return out, nil
}
