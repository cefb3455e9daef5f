package multires

import (
	"fmt"
	"math"
	"sort"
)

// Share is an amount of host resources per GPU: CPU cores and memory in GB.
// A Share is a plain value, safe for concurrent use.
type Share struct {
	CPUs  float64 `json:"cpus"`
	MemGB float64 `json:"mem_gb"`
}

// Scale returns the share times n (a job's total over n GPUs).
func (s Share) Scale(n float64) Share { return Share{s.CPUs * n, s.MemGB * n} }

// Within reports whether s needs no more than o of either resource.
func (s Share) Within(o Share) bool { return s.CPUs <= o.CPUs+eps && s.MemGB <= o.MemGB+eps }

func (s Share) String() string { return fmt.Sprintf("%g CPUs, %g GB", s.CPUs, s.MemGB) }

// eps absorbs rounding in sums of shares (62.5 GB x 8 is exact, 20.83 x 3
// is not).
const eps = 1e-9

func (s Share) check(where string, kind error) error {
	if !(s.CPUs > 0 && s.CPUs <= MaxCPUs) || !(s.MemGB > 0 && s.MemGB <= MaxMemGB) {
		return errorf(kind, where, "share %v: want CPUs in (0, %d] and memory in (0, %d] GB", s, MaxCPUs, MaxMemGB)
	}
	return nil
}

// Surface is how fast a job trains per GPU as a function of the CPUs and
// memory it is given per GPU (Synergy, Mohan et al., OSDI 2022, section
// 3, Figure 3): rates on a grid, relative to the job's rate at the
// proportional share its profile was measured against (1 there). CPUs
// feed data loading and preprocessing; memory caches the dataset, and
// below the dataset's size the job waits on storage.
//
// Between grid points the rate is interpolated bilinearly; outside the
// grid it is the nearest edge's (more resources than the grid's largest
// point gain nothing more; fewer than its smallest are charged as the
// smallest). A valid surface is non-decreasing along both axes: a job is
// never slower with more of either resource, which the allocators rely on
// (a job taken from is never given more, and a demoted job on the
// zoo's surfaces keeps its proportional share's rate).
//
// A Surface is not changed after it is validated: safe for concurrent
// reads.
type Surface struct {
	// CPUs and MemGB are the grid's points per GPU, strictly ascending.
	CPUs  []float64 `json:"cpus"`
	MemGB []float64 `json:"mem_gb"`
	// Rate[i][j] is the rate at CPUs[i] and MemGB[j].
	Rate [][]float64 `json:"rate"`
}

// Validate checks the surface's shape and bounds; the error is an *Error
// of kind ErrInvalidSurface naming the first offending value.
func (s *Surface) Validate() error { return s.validate("surface") }

func (s *Surface) validate(where string) error {
	if err := checkAxis(where+".cpus", s.CPUs, MaxCPUs); err != nil {
		return err
	}
	if err := checkAxis(where+".mem_gb", s.MemGB, MaxMemGB); err != nil {
		return err
	}
	if len(s.Rate) != len(s.CPUs) {
		return errorf(ErrInvalidSurface, where+".rate", "%d rows for %d CPU points", len(s.Rate), len(s.CPUs))
	}
	for i, row := range s.Rate {
		if len(row) != len(s.MemGB) {
			return errorf(ErrInvalidSurface, fmt.Sprintf("%s.rate[%d]", where, i), "%d values for %d memory points", len(row), len(s.MemGB))
		}
		for j, r := range row {
			at := fmt.Sprintf("%s.rate[%d][%d]", where, i, j)
			if !(r >= 0 && r <= MaxRate) {
				return errorf(ErrInvalidSurface, at, "rate %g: want a number in [0, %g]", r, float64(MaxRate))
			}
			if i > 0 && r < s.Rate[i-1][j] {
				return errorf(ErrInvalidSurface, at, "rate %g below %g with fewer CPUs: a job is never slower with more CPUs", r, s.Rate[i-1][j])
			}
			if j > 0 && r < row[j-1] {
				return errorf(ErrInvalidSurface, at, "rate %g below %g with less memory: a job is never slower with more memory", r, row[j-1])
			}
		}
	}
	return nil
}

func checkAxis(where string, v []float64, limit float64) error {
	if len(v) == 0 || len(v) > MaxGrid {
		return errorf(ErrInvalidSurface, where, "%d points: want 1 to %d", len(v), MaxGrid)
	}
	for i, x := range v {
		if !(x > 0 && x <= limit) {
			return errorf(ErrInvalidSurface, fmt.Sprintf("%s[%d]", where, i), "%g: want a number in (0, %g]", x, limit)
		}
		if i > 0 && x <= v[i-1] {
			return errorf(ErrInvalidSurface, fmt.Sprintf("%s[%d]", where, i), "%g after %g: want strictly ascending points", x, v[i-1])
		}
	}
	return nil
}

// At returns the rate at share s, interpolated on the grid, for a valid
// surface (Validate; it panics on an empty one). It allocates nothing.
func (s *Surface) At(sh Share) float64 {
	i, fi := bracket(s.CPUs, sh.CPUs)
	j, fj := bracket(s.MemGB, sh.MemGB)
	r := s.Rate
	lo := r[i][j]
	if fj > 0 {
		lo += fj * (r[i][j+1] - r[i][j])
	}
	if fi == 0 {
		return lo
	}
	hi := r[i+1][j]
	if fj > 0 {
		hi += fj * (r[i+1][j+1] - r[i+1][j])
	}
	return lo + fi*(hi-lo)
}

// bracket returns the index of the grid point at or below x and the
// fraction of the way to the next one (0 at and beyond the ends).
func bracket(axis []float64, x float64) (int, float64) {
	n := len(axis)
	if !(x > axis[0]) {
		return 0, 0
	}
	if x >= axis[n-1] {
		return n - 1, 0
	}
	k := sort.SearchFloat64s(axis, x) // axis[k-1] < x <= axis[k]
	if axis[k] == x {
		return k, 0
	}
	return k - 1, (x - axis[k-1]) / (axis[k] - axis[k-1])
}

// Max returns the surface's highest rate.
func (s *Surface) Max() float64 {
	return s.Rate[len(s.CPUs)-1][len(s.MemGB)-1] // non-decreasing on both axes
}

// Knee returns Synergy's best-case demand (section 4.1): the grid point
// that reaches the surface's highest rate within a fraction tol of it
// while using the least, measured as a sum of fractions of ref (a GPU's
// proportional share), fewer CPUs first on a tie. tol is clamped to [0,
// 1) (NaN is 0); a ref component that is not positive counts that
// resource as free (fewer CPUs, then less memory, decide).
func (s *Surface) Knee(tol float64, ref Share) Share {
	if !(tol >= 0) { // NaN too
		tol = 0
	}
	tol = min(tol, 1-1e-9)
	want := s.Max() * (1 - tol)
	best, cost := Share{}, math.Inf(1)
	for i, c := range s.CPUs {
		for j, m := range s.MemGB {
			if s.Rate[i][j] < want-eps {
				continue
			}
			if k := frac(c, ref.CPUs) + frac(m, ref.MemGB); k < cost-eps {
				best, cost = Share{c, m}, k
			}
			break // more memory at these CPUs costs more
		}
	}
	return best
}

// frac is x over ref, 0 where ref is not positive.
func frac(x, ref float64) float64 {
	if !(ref > 0) {
		return 0
	}
	return x / ref
}
