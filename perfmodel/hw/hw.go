// Package hw embeds hardware facts and public measurements of today's GPUs
// for the spec-based throughput model of package perfmodel
// ([perfmodel.FitSpecModel]):
//
//   - [Specs]: nominal FP16 and FP32 rates, memory and bandwidth of K80 to
//     B200 from NVIDIA's data sheets (data/specs.csv, each row citing its
//     sheet);
//   - [MLPerf]: MLPerf Training results of single servers with eight GPUs
//     (A30, A100 PCIe, L40, L40S, H100 PCIe and SXM, H200, B200, B300, RTX
//     PRO 6000), rounds 3.1, 4.0 and 5.1, from MLCommons'
//     training_results repositories (Apache-2.0; data/README.md gives the
//     commits and how the file was derived).
//
// The data lives apart from perfmodel so that only binaries that use it
// carry it.
package hw

import (
	"bytes"
	_ "embed" // the embedded data
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

//go:embed data/specs.csv
var specsCSV []byte

//go:embed data/mlperf_training.csv
var mlperfCSV []byte

var (
	specsOnce  = sync.OnceValues(func() ([]perfmodel.HardwareSpec, error) { return ParseSpecs(bytes.NewReader(specsCSV)) })
	mlperfOnce = sync.OnceValues(func() ([]perfmodel.Observation, error) { return ParseMLPerf(bytes.NewReader(mlperfCSV)) })
)

// Specs returns the embedded specifications. It panics only if the
// embedded file is corrupt, which this package's tests rule out; the slice
// is shared: do not modify it.
func Specs() []perfmodel.HardwareSpec { return must(specsOnce()) }

// MLPerf returns the embedded MLPerf Training measurements as observations
// (see [ParseMLPerf]); shared, do not modify.
func MLPerf() []perfmodel.Observation { return must(mlperfOnce()) }

func must[T any](v T, err error) T {
	if err != nil {
		panic("hw: embedded data is corrupt: " + err.Error())
	}
	return v
}

// Model fits the spec model to the MLPerf measurements and any others
// (such as perfmodel.Observations of Gavel's table).
func Model(extra ...[]perfmodel.Observation) (*perfmodel.SpecModel, error) {
	obs := slices.Clone(MLPerf())
	for _, e := range extra {
		obs = append(obs, e...)
	}
	return perfmodel.FitSpecModel(Specs(), obs)
}

// Accelerators maps the accelerator names of MLPerf's system descriptions
// to GPU types; MLPerf rows of other accelerators are skipped.
var Accelerators = map[string]topology.GPUType{
	"NVIDIA A100-PCIe-80GB":                       "a100-pcie",
	"NVIDIA A30":                                  "a30",
	"NVIDIA L40":                                  "l40",
	"NVIDIA L40S":                                 topology.L40S,
	"NVIDIA H100-PCIe-80GB":                       "h100-pcie",
	"NVIDIA H100-SXM-80GB":                        topology.H100,
	"NVIDIA H100-SXM5-80GB":                       topology.H100,
	"NVIDIA H200-SXM5-141GB":                      topology.H200,
	"NVIDIA Blackwell GPU (B200-SXM-180GB)":       topology.B200,
	"NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)": "b300",
	"NVIDIA RTX Pro 6000 SE PCIe 96GB":            "rtx-pro-6000",
}

// maxRows bounds the rows read from one file.
const maxRows = 1 << 20

// ParseSpecs reads specifications in the format of data/specs.csv:
// type,name,fp16_tflops,fp32_tflops,memory_gb,bandwidth_gbps,source.
// Errors name the line and wrap perfmodel.ErrMalformedTable.
func ParseSpecs(r io.Reader) ([]perfmodel.HardwareSpec, error) {
	rows, err := readCSV(r, []string{"type", "name", "fp16_tflops", "fp32_tflops", "memory_gb", "bandwidth_gbps", "source"})
	if err != nil {
		return nil, err
	}
	var out []perfmodel.HardwareSpec
	for i, row := range rows {
		t, err := topology.ParseGPUType(row[0])
		if err != nil {
			return nil, lineError(i+2, "%v", err)
		}
		var v [4]float64
		for j := range v {
			if v[j], err = positive(row[2+j]); err != nil {
				return nil, lineError(i+2, "column %d: %v", 3+j, err)
			}
		}
		out = append(out, perfmodel.HardwareSpec{Type: t, Name: row[1], FP16TFLOPS: v[0], FP32TFLOPS: v[1], MemoryGB: v[2], BandwidthGBps: v[3], Source: row[6]})
	}
	return out, nil
}

// ParseMLPerf reads MLPerf Training runs in the format of
// data/mlperf_training.csv (round, submitter, system, accelerator, gpus,
// benchmark, result_file, minutes: one row per successful run, minutes
// from run_start to run_stop of the result file) and scores them as MLPerf
// does: per system, the mean of its runs without the fastest and the
// slowest (when it has at least three). The observation of a benchmark of a
// round on a GPU type is the best system's score, as a rate of whole runs
// per second; its job is JobKey{Model: "mlperf-training-<round>/<benchmark>",
// ScaleFactor: gpus}. Rows of accelerators not in [Accelerators] are
// skipped.
func ParseMLPerf(r io.Reader) ([]perfmodel.Observation, error) {
	rows, err := readCSV(r, []string{"round", "submitter", "system", "accelerator", "gpus", "benchmark", "result_file", "minutes"})
	if err != nil {
		return nil, err
	}
	type sysKey struct{ round, system, benchmark string }
	runs := map[sysKey][]float64{}
	var keys []sysKey
	gpus := map[sysKey]int{}
	accel := map[sysKey]topology.GPUType{}
	for i, row := range rows {
		t, ok := Accelerators[row[3]]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(row[4])
		if err != nil || n < 1 || n > 1<<16 {
			return nil, lineError(i+2, "gpus %q (want a count >= 1)", row[4])
		}
		min, err := positive(row[7])
		if err != nil {
			return nil, lineError(i+2, "minutes: %v", err)
		}
		k := sysKey{row[0], row[1] + "/" + row[2], row[5]}
		if _, seen := runs[k]; !seen {
			keys = append(keys, k)
		} else if gpus[k] != n || accel[k] != t {
			return nil, lineError(i+2, "system %s changes its accelerator or GPU count", k.system)
		}
		runs[k] = append(runs[k], min)
		gpus[k], accel[k] = n, t
	}
	type obsKey struct {
		job perfmodel.JobKey
		t   topology.GPUType
	}
	best := map[obsKey]perfmodel.Observation{}
	var order []obsKey
	for _, k := range keys {
		score := olympicMean(runs[k])
		job := perfmodel.JobKey{Model: "mlperf-training-" + k.round + "/" + k.benchmark, ScaleFactor: gpus[k]}
		ok := obsKey{job, accel[k]}
		rate := 1 / (60 * score)
		prev, seen := best[ok]
		if !seen {
			order = append(order, ok)
		}
		if !seen || rate > prev.Rate {
			best[ok] = perfmodel.Observation{Job: job, Type: accel[k], Rate: rate,
				Source: fmt.Sprintf("MLPerf Training %s, %s, %.2f min (mean of %d runs without extremes)", k.round, k.system, score, len(runs[k]))}
		}
	}
	out := make([]perfmodel.Observation, 0, len(order))
	for _, k := range order {
		out = append(out, best[k])
	}
	return out, nil
}

// olympicMean is the mean without the smallest and largest value when
// there are at least three.
func olympicMean(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) >= 3 {
		v = v[1 : len(v)-1]
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func readCSV(r io.Reader, header []string) ([][]string, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(header)
	cr.ReuseRecord = false
	head, err := cr.Read()
	if err != nil {
		return nil, lineError(1, "header: %v", err)
	}
	if !slices.Equal(head, header) {
		return nil, lineError(1, "header %q (want %q)", strings.Join(head, ","), strings.Join(header, ","))
	}
	var rows [][]string
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("hw: %w: %w", perfmodel.ErrMalformedTable, err)
		}
		if len(rows) == maxRows {
			return nil, lineError(maxRows+2, "more than %d rows", maxRows)
		}
		rows = append(rows, row)
	}
}

func positive(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number > 0", s)
	}
	return v, nil
}

func lineError(line int, format string, args ...any) error {
	return fmt.Errorf("hw: line %d: %w: %s", line, perfmodel.ErrMalformedTable, fmt.Sprintf(format, args...))
}
