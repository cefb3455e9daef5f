package perfmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/gpusched/gpusched/topology"
)

// FittedColocation predicts the rates of two jobs sharing GPUs from a
// linear model fitted by least squares to a measured table (Gavel's pairs,
// Narayanan et al., OSDI 2020, section 3.1 and its throughput files). It
// answers with the measured rates where the table has the pair, and with
// predictions where it does not: jobs or GPU types the table lacks, given
// their isolated rates by the Isolated model.
//
// The target is a job's normalised rate when co-located, r_a = t_a / iso_a,
// in (0, 1]; the features of (a, b, t) are an intercept, the model family
// of a and of b (one-hot over the table's families; none for a family it
// lacks), log2 of both batch sizes and of the scale factor, the log of both
// isolated rates on t, the GPU type (one-hot; none for a type the table
// lacks), and two interactions: the pair of families, and a's family on
// the type. A small ridge term keeps the one-hot blocks solvable. On
// Gavel's tables its leave-one-out error (LeaveOneOut) is 0.084 of the
// normalised rate (simulation table; a constant guess: 0.145) and 0.069
// (physical; 0.180). The
// prediction is clamped to [0.01, 1] and multiplied by iso_a. It predicts
// a rate for every pair of equal scale factors: it cannot foresee pairs
// that do not fit in memory together, which the table marks as 0, 0.
// Jobs of different scale factors cannot share GPUs (0, 0), as in Gavel.
//
// A FittedColocation is immutable once fitted and safe for concurrent use
// (if its Isolated model is; a Table is).
type FittedColocation struct {
	// Measured answers for the pairs it holds; nil means always predict.
	Measured *Table
	// Isolated gives the isolated rates the features and the prediction
	// need.
	Isolated ThroughputModel
	families []string
	types    []topology.GPUType
	coef     []float64
	// rows kept for LeaveOneOut.
	x    [][]float64
	y    []float64
	pair []int // the unordered pair (per type) each row belongs to
	ata  *mat.SymDense
	aty  *mat.VecDense
}

// ErrFit is wrapped by FitColocation when the table gives too little to
// fit.
var ErrFit = errors.New("perfmodel: cannot fit the co-location model")

const ridge = 1e-6

// FitColocation fits the model to every feasible measured pair of t (both
// rates positive), on every GPU type of t, with t as the isolated model.
func FitColocation(t *Table) (*FittedColocation, error) {
	f := &FittedColocation{Measured: t, Isolated: t, types: t.GPUTypes()}
	for _, k := range t.jobs {
		if !slices.Contains(f.families, k.Model) {
			f.families = append(f.families, k.Model)
		}
	}
	slices.Sort(f.families)
	ids := map[[3]int]int{}
	for ti := range t.types {
		for ai, a := range t.jobs {
			for bi, b := range t.jobs {
				v := t.pairs[ti][ai*len(t.jobs)+bi]
				if math.IsNaN(v[0]) || !(v[0] > 0 && v[1] > 0) {
					continue
				}
				isoA, isoB := t.iso[ti][ai], t.iso[ti][bi]
				if !(isoA > 0 && isoB > 0) {
					continue
				}
				x := f.features(a, b, t.types[ti], isoA, isoB)
				key := [3]int{ti, min(ai, bi), max(ai, bi)}
				id, ok := ids[key]
				if !ok {
					id = len(ids)
					ids[key] = id
				}
				f.x = append(f.x, x)
				f.y = append(f.y, v[0]/isoA)
				f.pair = append(f.pair, id)
			}
		}
	}
	d := f.dim()
	if len(f.x) < 2*d {
		return nil, fmt.Errorf("%w: %d measured pairs for %d features", ErrFit, len(f.x), d)
	}
	f.ata = mat.NewSymDense(d, nil)
	f.aty = mat.NewVecDense(d, nil)
	for i, x := range f.x {
		xv := mat.NewVecDense(d, x)
		f.ata.SymRankOne(f.ata, 1, xv)
		f.aty.AddScaledVec(f.aty, f.y[i], xv)
	}
	coef, err := solveRidge(f.ata, f.aty)
	if err != nil {
		return nil, err
	}
	f.coef = coef
	return f, nil
}

func (f *FittedColocation) dim() int {
	nf, nt := len(f.families), len(f.types)
	return 1 + 2*nf + 5 + nt + nf*nf + nt*nf
}

func (f *FittedColocation) features(a, b JobKey, t topology.GPUType, isoA, isoB float64) []float64 {
	x := make([]float64, f.dim())
	x[0] = 1
	nf := len(f.families)
	if i, ok := slices.BinarySearch(f.families, a.Model); ok {
		x[1+i] = 1
	}
	if i, ok := slices.BinarySearch(f.families, b.Model); ok {
		x[1+nf+i] = 1
	}
	o := 1 + 2*nf
	x[o] = math.Log2(float64(max(a.BatchSize, 1)))
	x[o+1] = math.Log2(float64(max(b.BatchSize, 1)))
	x[o+2] = math.Log2(float64(max(a.ScaleFactor, 1)))
	x[o+3] = math.Log(isoA)
	x[o+4] = math.Log(isoB)
	ti := slices.Index(f.types, t)
	if ti >= 0 {
		x[o+5+ti] = 1
	}
	// Interactions: the pair of families, and a's family on the type.
	o += 5 + len(f.types)
	fa, okA := slices.BinarySearch(f.families, a.Model)
	fb, okB := slices.BinarySearch(f.families, b.Model)
	if okA && okB {
		x[o+fa*nf+fb] = 1
	}
	o += nf * nf
	if okA && ti >= 0 {
		x[o+ti*nf+fa] = 1
	}
	return x
}

func solveRidge(ata *mat.SymDense, aty *mat.VecDense) ([]float64, error) {
	d := ata.SymmetricDim()
	a := mat.NewSymDense(d, nil)
	a.CopySym(ata)
	scale := 0.0
	for i := range d {
		scale += a.At(i, i)
	}
	for i := range d {
		a.SetSym(i, i, a.At(i, i)+ridge*scale/float64(d)+1e-12)
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return nil, fmt.Errorf("%w: normal equations not positive definite", ErrFit)
	}
	var out mat.VecDense
	if err := ch.SolveVecTo(&out, aty); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFit, err)
	}
	return out.RawVector().Data, nil
}

func predict(coef, x []float64) float64 {
	r := 0.0
	for i, c := range coef {
		r += c * x[i]
	}
	return min(max(r, 0.01), 1)
}

// Normalised returns the predicted normalised rates (co-located over
// isolated) of a and b sharing GPUs of type t, whether or not the table
// measured the pair.
func (f *FittedColocation) Normalised(a, b JobKey, t topology.GPUType) (ra, rb float64, err error) {
	ra, rb, _, _, err = f.predicted(a, b, t)
	return ra, rb, err
}

// predicted returns the normalised rates with the isolated ones they
// scale; zeros when either job cannot run on t.
func (f *FittedColocation) predicted(a, b JobKey, t topology.GPUType) (ra, rb, isoA, isoB float64, err error) {
	isoA, isoB, err = f.isolated(a, b, t)
	if err != nil || isoA == 0 || isoB == 0 {
		return 0, 0, 0, 0, err
	}
	return predict(f.coef, f.features(a, b, t, isoA, isoB)), predict(f.coef, f.features(b, a, t, isoB, isoA)), isoA, isoB, nil
}

func (f *FittedColocation) isolated(a, b JobKey, t topology.GPUType) (isoA, isoB float64, err error) {
	if f.Isolated == nil {
		return 0, 0, fmt.Errorf("%w: no isolated model", ErrFit)
	}
	if isoA, err = f.Isolated.Throughput(a, t); err != nil {
		return 0, 0, err
	}
	if isoB, err = f.Isolated.Throughput(b, t); err != nil {
		return 0, 0, err
	}
	return isoA, isoB, nil
}

// Colocated implements ColocationModel: measured rates where Measured has
// the pair, predicted ones otherwise.
func (f *FittedColocation) Colocated(a, b JobKey, t topology.GPUType) (ta, tb float64, err error) {
	if a.ScaleFactor != b.ScaleFactor {
		return 0, 0, nil
	}
	if m := f.Measured; m != nil {
		if ti, ai, ok := m.index(a, t); ok {
			if bi, ok := m.jobIdx[b]; ok {
				if v := m.pairs[ti][ai*len(m.jobs)+bi]; !math.IsNaN(v[0]) {
					return v[0], v[1], nil
				}
			}
		}
	}
	ra, rb, isoA, isoB, err := f.predicted(a, b, t)
	return ra * isoA, rb * isoB, err
}

// FitReport is the leave-one-out error of a fit.
// A FitReport is a plain value, safe for concurrent use.
type FitReport struct {
	// Pairs is the number of measured pairs (unordered, per GPU type) and
	// Rows the job rates among them.
	Pairs, Rows int
	// MAE and RMSE are the errors of the normalised rate when each pair is
	// predicted by a fit to all the others; BaselineMAE is the error of
	// predicting every rate by the mean of the others.
	MAE, RMSE, BaselineMAE float64
	// Within10 is the share of rates predicted within 0.10 of the truth.
	Within10 float64
}

// LeaveOneOut refits the model without each measured pair in turn (both of
// its rates), by downdating the normal equations, and reports how well the
// pair is predicted.
func (f *FittedColocation) LeaveOneOut() (FitReport, error) {
	byPair := map[int][]int{}
	for i, p := range f.pair {
		byPair[p] = append(byPair[p], i)
	}
	d := f.dim()
	rep := FitReport{Pairs: len(byPair), Rows: len(f.x)}
	sumY := 0.0
	for _, y := range f.y {
		sumY += y
	}
	ata := mat.NewSymDense(d, nil)
	aty := mat.NewVecDense(d, nil)
	for _, rows := range byPair {
		ata.CopySym(f.ata)
		aty.CopyVec(f.aty)
		held := 0.0
		for _, i := range rows {
			xv := mat.NewVecDense(d, f.x[i])
			ata.SymRankOne(ata, -1, xv)
			aty.AddScaledVec(aty, -f.y[i], xv)
			held += f.y[i]
		}
		coef, err := solveRidge(ata, aty)
		if err != nil {
			return rep, err
		}
		mean := (sumY - held) / float64(len(f.y)-len(rows))
		for _, i := range rows {
			e := predict(coef, f.x[i]) - f.y[i]
			rep.MAE += math.Abs(e)
			rep.RMSE += e * e
			rep.BaselineMAE += math.Abs(mean - f.y[i])
			if math.Abs(e) <= 0.1 {
				rep.Within10++
			}
		}
	}
	n := float64(len(f.y))
	rep.MAE, rep.RMSE, rep.BaselineMAE, rep.Within10 = rep.MAE/n, math.Sqrt(rep.RMSE/n), rep.BaselineMAE/n, rep.Within10/n
	return rep, nil
}
