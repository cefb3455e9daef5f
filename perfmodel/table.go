package perfmodel

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/internal/safeio"
	"github.com/gpusched/gpusched/internal/strictjson"
	"github.com/gpusched/gpusched/topology"
)

// Table is a measured throughput table in Gavel's format: for each GPU type
// and job, the isolated rate, and for each pair of jobs the rates of both
// when they share a GPU. It implements [ThroughputModel] and
// [ColocationModel]. A Table is immutable and safe for concurrent use.
type Table struct {
	types   []topology.GPUType // sorted
	typeIdx map[topology.GPUType]int
	jobs    []JobKey // sorted
	jobIdx  map[JobKey]int
	// iso[t][j] is the isolated rate of job j on type t; NaN if absent.
	iso [][]float64
	// uncons[t][j] is the rate on "<t>_unconsolidated"; nil if the type has
	// no such entries.
	uncons [][]float64
	// pairs[t][a*len(jobs)+b] holds the rates of a and b sharing type t;
	// NaN if absent.
	pairs [][][2]float64
}

// unconsolidatedSuffix marks Gavel's worker types of jobs spread over servers.
const unconsolidatedSuffix = "_unconsolidated"

// ReadGavelJSON is [ParseGavelJSON] on everything r holds, reading at
// most [MaxTableBytes].
func ReadGavelJSON(r io.Reader) (*Table, error) {
	data, err := safeio.ReadAll(r, MaxTableBytes)
	if err != nil {
		if errors.Is(err, safeio.ErrTooLarge) {
			return nil, tableError("JSON", "the table is longer than %d MiB", MaxTableBytes>>20)
		}
		return nil, fmt.Errorf("perfmodel: reading throughput table: %w", err)
	}
	return ParseGavelJSON(data)
}

// Limits of a throughput table in Gavel's format. Rates are steps per
// second: 0 (the job cannot run there, or the pair cannot share) or from
// MinRate to MaxRate, which covers every measured job (Gavel's run from 0.22
// to 699 steps/s) with room to spare and keeps the simulator's arithmetic
// far from underflow and overflow. The pair matrix is dense, so the GPU
// types times the square of the number of jobs is bounded too.
const (
	// MaxTableBytes bounds the length of a table file.
	MaxTableBytes = 64 << 20
	// MinRate and MaxRate bound a positive rate, in steps per second.
	MinRate = 1e-6
	MaxRate = 1e6
	// maxTableTypes and maxTableJobs bound the worker types and the jobs
	// (job type and scale factor) of a table, maxPairCells the types with
	// pairs times the jobs squared.
	maxTableTypes = 64
	maxTableJobs  = 2048
	maxPairCells  = 1 << 22
	// maxScaleFactor and maxBatchSize bound a job key read from a file.
	maxScaleFactor = topology.MaxClusterGPUs
	maxBatchSize   = 1 << 30
)

// tableError reports a problem in a throughput file.
func tableError(where, format string, args ...any) error {
	return fmt.Errorf("perfmodel: %s: %w: %s", where, ErrMalformedTable, fmt.Sprintf(format, args...))
}

// rate is a value of the file: a number (isolated) or a pair.
type rate struct {
	v      [2]float64
	isPair bool
}

func (r *rate) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		// Two numbers, read without encoding/json's allocations: this runs
		// for each of the ~20,000 rates of a table.
		inner, ok := bytes.CutSuffix(b[1:], []byte("]"))
		first, second, two := bytes.Cut(inner, []byte(","))
		if !ok || !two || bytes.IndexByte(second, ',') >= 0 {
			return fmt.Errorf("a pair needs 2 rates, [self, other], got %s", b)
		}
		var err error
		if r.v[0], err = parseRate(bytes.TrimSpace(first)); err != nil {
			return err
		}
		if r.v[1], err = parseRate(bytes.TrimSpace(second)); err != nil {
			return err
		}
		r.isPair = true
		return nil
	}
	r.isPair = false
	var err error
	r.v[0], err = parseRate(b)
	return err
}

// parseRate reads a rate: a JSON number, 0 or from MinRate to MaxRate.
func parseRate(b []byte) (float64, error) {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return 0, fmt.Errorf("%s is not a rate (want a number, or a pair [self, other])", b)
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || v != 0 && !(v >= MinRate && v <= MaxRate) {
		return 0, fmt.Errorf("rate %s steps/s (want 0, or from %g to %g)", b, float64(MinRate), float64(MaxRate))
	}
	return v, nil
}

// ParseGavelJSON reads a throughput table in the format of Gavel's
// simulation_throughputs.json:
//
//	{worker_type: {"('<job type>', sf)": {"null": isolated,
//	                                      "('<other>', sf)": [self, other], ...}}}
//
// Rates are steps per second: 0, or from [MinRate] to [MaxRate]. Worker
// types named "<type>_unconsolidated" are kept apart (see
// [Table.Unconsolidated]). Every pair's partner must have an isolated entry
// somewhere in the file. A leading byte order mark is skipped; syntax
// errors, truncation, a key given twice in one object and rates out of
// range are errors of kind [ErrMalformedTable] located by line and column.
// A table has at most 64 worker types and 2,048 jobs (job type and scale
// factor), and GPU types times jobs squared is at most 4,194,304 (the pair
// rates take at most 64 MiB); scale factors are at most 1,048,576 and
// batch sizes at most 1,073,741,824.
func ParseGavelJSON(data []byte) (*Table, error) {
	if len(data) > MaxTableBytes {
		return nil, tableError("JSON", "the table is %d bytes long, more than the %d MiB allowed", len(data), MaxTableBytes>>20)
	}
	var raw map[string]map[string]map[string]rate
	if err := strictjson.Decode(data, &raw); err != nil {
		var je *strictjson.Error
		if errors.As(err, &je) {
			return nil, tableError(je.Where(), "%s", je.Problem())
		}
		return nil, tableError("JSON", "%v", err)
	}
	switch {
	case len(raw) == 0:
		return nil, tableError("JSON", "the table has no GPU types")
	case len(raw) > maxTableTypes:
		return nil, tableError("JSON", "%d worker types, more than %d", len(raw), maxTableTypes)
	}
	t := &Table{typeIdx: map[topology.GPUType]int{}, jobIdx: map[JobKey]int{}}
	// Pass 1: the types and the jobs.
	keys := map[string]JobKey{}
	baseOf := map[string]topology.GPUType{}
	for typeName, rows := range raw {
		base, uncons := strings.CutSuffix(typeName, unconsolidatedSuffix)
		gt, err := topology.ParseGPUType(base)
		if err != nil {
			return nil, tableError(fmt.Sprintf("worker type %q", typeName), "%v", err)
		}
		if string(gt) != base {
			return nil, tableError(fmt.Sprintf("worker type %q", typeName), "GPU types must be in lower case")
		}
		baseOf[typeName] = gt
		if !uncons {
			t.typeIdx[gt] = 0
		}
		for rowKey := range rows {
			k, err := parseTupleKey(rowKey)
			if err != nil {
				return nil, tableError(fmt.Sprintf("worker type %q", typeName), "%v", err)
			}
			keys[rowKey] = k
			t.jobIdx[k] = 0
		}
	}
	switch {
	case len(t.typeIdx) == 0:
		return nil, tableError("JSON", "the table has only unconsolidated worker types")
	case len(t.jobIdx) > maxTableJobs:
		return nil, tableError("JSON", "%d jobs, more than %d", len(t.jobIdx), maxTableJobs)
	case len(t.typeIdx)*len(t.jobIdx)*len(t.jobIdx) > maxPairCells:
		return nil, tableError("JSON", "%d GPU types of %d jobs: more than %d pairs", len(t.typeIdx), len(t.jobIdx), maxPairCells)
	}
	for gt := range t.typeIdx {
		t.types = append(t.types, gt)
	}
	slices.Sort(t.types)
	for i, gt := range t.types {
		t.typeIdx[gt] = i
	}
	for k := range t.jobIdx {
		t.jobs = append(t.jobs, k)
	}
	slices.SortFunc(t.jobs, compareJobs)
	for i, k := range t.jobs {
		t.jobIdx[k] = i
	}
	n := len(t.jobs)
	nan := math.NaN()
	newRates := func() []float64 {
		r := make([]float64, n)
		for i := range r {
			r[i] = nan
		}
		return r
	}
	t.iso = make([][]float64, len(t.types))
	t.pairs = make([][][2]float64, len(t.types))
	for i := range t.types {
		t.iso[i] = newRates()
		t.pairs[i] = make([][2]float64, n*n)
		for j := range t.pairs[i] {
			t.pairs[i][j] = [2]float64{nan, nan}
		}
	}
	// Pass 2: the rates.
	for typeName, rows := range raw {
		gt := baseOf[typeName]
		ti, hasBase := t.typeIdx[gt]
		if !hasBase {
			return nil, tableError(fmt.Sprintf("worker type %q", typeName), "no worker type %q to go with it", gt)
		}
		iso := t.iso[ti]
		var pairs [][2]float64
		if strings.HasSuffix(typeName, unconsolidatedSuffix) {
			if t.uncons == nil {
				t.uncons = make([][]float64, len(t.types))
			}
			t.uncons[ti] = newRates()
			iso = t.uncons[ti]
		} else {
			pairs = t.pairs[ti]
		}
		for rowKey, entries := range rows {
			a := t.jobIdx[keys[rowKey]]
			where := fmt.Sprintf("%s %s", typeName, rowKey)
			for other, r := range entries {
				if other == "null" {
					if r.isPair {
						return nil, tableError(where, "the isolated rate must be a number")
					}
					iso[a] = r.v[0]
					continue
				}
				if !r.isPair {
					return nil, tableError(where, "%q: a pair needs [self, other] rates", other)
				}
				ok, err := parseTupleKey(other)
				if err != nil {
					return nil, tableError(where, "%v", err)
				}
				b, known := t.jobIdx[ok]
				if !known {
					return nil, tableError(where, "pair with %s, which has no isolated entry", ok)
				}
				if pairs != nil {
					pairs[a*n+b] = r.v
				}
			}
			if math.IsNaN(iso[a]) {
				return nil, tableError(where, "no isolated (\"null\") rate")
			}
		}
	}
	return t, nil
}

func compareJobs(a, b JobKey) int {
	return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.BatchSize, b.BatchSize), cmp.Compare(a.ScaleFactor, b.ScaleFactor))
}

// GPUTypes returns the table's GPU types, sorted by name.
func (t *Table) GPUTypes() []topology.GPUType { return slices.Clone(t.types) }

// Jobs returns every job of the table, sorted by model, batch size and
// scale factor.
func (t *Table) Jobs() []JobKey { return slices.Clone(t.jobs) }

// ScaleFactors returns the scale factors the table has for k's model and
// batch size (k.ScaleFactor is ignored), ascending; nil if none.
func (t *Table) ScaleFactors(k JobKey) []int {
	var out []int
	for _, j := range t.jobs {
		if j.Model == k.Model && j.BatchSize == k.BatchSize {
			out = append(out, j.ScaleFactor)
		}
	}
	return out
}

// Throughput returns the isolated rate of k on t, in steps per second; it
// implements [ThroughputModel].
func (t *Table) Throughput(k JobKey, gt topology.GPUType) (float64, error) {
	ti, ji, ok := t.index(k, gt)
	if !ok {
		return 0, t.lookupError(k, JobKey{}, gt)
	}
	return t.rate(t.iso, ti, ji, k, gt)
}

// Unconsolidated returns the rate of k on t when its workers are spread
// over servers (Gavel's "<t>_unconsolidated" entries); [ErrUnknownGPUType]
// if the table has no such entries for t.
func (t *Table) Unconsolidated(k JobKey, gt topology.GPUType) (float64, error) {
	ti, ji, ok := t.index(k, gt)
	if !ok {
		return 0, t.lookupError(k, JobKey{}, gt)
	}
	if t.uncons == nil || t.uncons[ti] == nil {
		return 0, &JobError{Job: k, Type: gt, Kind: ErrUnknownGPUType, Msg: "the table has no unconsolidated rates for this type"}
	}
	return t.rate(t.uncons, ti, ji, k, gt)
}

func (t *Table) rate(rates [][]float64, ti, ji int, k JobKey, gt topology.GPUType) (float64, error) {
	v := rates[ti][ji]
	if math.IsNaN(v) {
		return 0, &JobError{Job: k, Type: gt, Kind: ErrUnknownJob, Msg: "the table has no rate for this job on this type"}
	}
	return v, nil
}

// Colocated returns the rates of a and b sharing one GPU of type t; it
// implements [ColocationModel]. Pairs the table does not list, such as jobs
// of different scale factors, cannot share: (0, 0, nil).
func (t *Table) Colocated(a, b JobKey, gt topology.GPUType) (ta, tb float64, err error) {
	ti, ai, okA := t.index(a, gt)
	bi, okB := t.jobIdx[b]
	switch {
	case !okA:
		return 0, 0, t.lookupError(a, b, gt)
	case !okB:
		return 0, 0, t.lookupError(b, a, gt)
	}
	v := t.pairs[ti][ai*len(t.jobs)+bi]
	if math.IsNaN(v[0]) {
		return 0, 0, nil
	}
	return v[0], v[1], nil
}

func (t *Table) index(k JobKey, gt topology.GPUType) (ti, ji int, ok bool) {
	ti, okT := t.typeIdx[gt]
	ji, okJ := t.jobIdx[k]
	return ti, ji, okT && okJ
}

// lookupError explains why k (with the partner other, if it has a model) on
// gt is not in the table.
func (t *Table) lookupError(k, other JobKey, gt topology.GPUType) error {
	e := &JobError{Job: k, Type: gt}
	if other.Model != "" {
		e.Other = &other
	}
	if _, ok := t.typeIdx[gt]; !ok {
		e.Kind, e.Msg = ErrUnknownGPUType, "the table has "+joinTypes(t.types)
		return e
	}
	if err := k.Validate(); err != nil {
		return err
	}
	e.Kind = ErrUnknownJob
	if sfs := t.ScaleFactors(k); sfs != nil {
		e.Msg = fmt.Sprintf("the table has %s at scale factors %s", k.Name(), joinInts(sfs))
	} else if bss := t.batchSizes(k.Model); bss != nil {
		e.Msg = fmt.Sprintf("the table has %s at batch sizes %s", k.Model, joinInts(bss))
	} else {
		e.Msg = "the table has the models " + strings.Join(t.models(), ", ")
	}
	return e
}

func (t *Table) batchSizes(model string) []int {
	var out []int
	for _, j := range t.jobs {
		if j.Model == model && (len(out) == 0 || out[len(out)-1] != j.BatchSize) {
			out = append(out, j.BatchSize)
		}
	}
	return out
}

func (t *Table) models() []string {
	var out []string
	for _, j := range t.jobs {
		if len(out) == 0 || out[len(out)-1] != j.Model {
			out = append(out, j.Model)
		}
	}
	return out
}

func joinTypes(ts []topology.GPUType) string {
	s := make([]string, len(ts))
	for i, x := range ts {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
