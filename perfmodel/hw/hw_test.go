package hw

import (
	"bytes"
	"encoding/csv"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
)

func TestSpecs(t *testing.T) {
	specs := Specs()
	require.Len(t, specs, 15)
	byType := map[topology.GPUType]perfmodel.HardwareSpec{}
	for _, s := range specs {
		byType[s.Type] = s
		assert.Contains(t, s.Source, "NVIDIA", s.Type)
	}
	h := byType[topology.H100]
	assert.Equal(t, perfmodel.HardwareSpec{Type: topology.H100, Name: "H100 SXM5 80 GB", FP16TFLOPS: 989, FP32TFLOPS: 67, MemoryGB: 80, BandwidthGBps: 3350, Source: h.Source}, h)
	// The H200 is an H100 with more and faster memory.
	assert.Equal(t, h.FP16TFLOPS, byType[topology.H200].FP16TFLOPS)
	assert.Greater(t, byType[topology.H200].BandwidthGBps, h.BandwidthGBps)
	for _, gt := range []topology.GPUType{topology.K80, topology.P100, topology.V100, topology.A100, topology.B200, topology.T4, topology.L40S} {
		assert.Contains(t, byType, gt)
	}
}

// One score recomputed by hand from the file: the H200's BERT in round
// 4.0, ten runs of NVIDIA's h200_ngc23.09_pytorch system.
func TestMLPerfScore(t *testing.T) {
	r := csv.NewReader(bytes.NewReader(mlperfCSV))
	rows, err := r.ReadAll()
	require.NoError(t, err)
	var mins []float64
	for _, row := range rows[1:] {
		if row[0] == "v4.0" && row[2] == "h200_ngc23.09_pytorch" && row[5] == "bert" {
			v, _ := strconv.ParseFloat(row[7], 64)
			mins = append(mins, v)
		}
	}
	require.Len(t, mins, 10)
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, v := range mins {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	want := 1 / (60 * (sum - lo - hi) / 8)
	var got *perfmodel.Observation
	obs := MLPerf()
	for i := range obs {
		if obs[i].Job.Model == "mlperf-training-v4.0/bert" && obs[i].Type == topology.H200 {
			got = &obs[i]
		}
	}
	require.NotNil(t, got)
	assert.InDelta(t, want, got.Rate, 1e-15)
	assert.Equal(t, 8, got.Job.ScaleFactor)
	assert.Contains(t, got.Source, "NVIDIA/h200_ngc23.09_pytorch")
	assert.Equal(t, perfmodel.Mixed, got.Precision)
	assert.Len(t, obs, 70)
}

// The model fitted on MLPerf and Gavel's table: elasticities, and the
// leave-one-type-out errors recorded in docs/reproduction.md (go test -v -run Fit).
func TestFitOnMLPerfAndGavel(t *testing.T) {
	m, err := Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
	require.NoError(t, err)
	el := m.Elasticities()
	t.Logf("elasticities: compute %.3f, bandwidth %.3f; compute share %.2f", el[0], el[1], m.ComputeShare())
	assert.Greater(t, el[0], 0.1)
	assert.Greater(t, el[1], 0.1)
	assert.Less(t, el[0]+el[1], 1.5)
	loo, err := m.LeaveOneTypeOut()
	require.NoError(t, err)
	// A naive baseline: the job's geometric-mean rate on its other types.
	obs := append(slices.Clone(MLPerf()), perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel")...)
	byJob := map[perfmodel.JobKey]map[topology.GPUType]float64{}
	for _, o := range obs {
		if byJob[o.Job] == nil {
			byJob[o.Job] = map[topology.GPUType]float64{}
		}
		byJob[o.Job][o.Type] = o.Rate
	}
	naive := func(gt topology.GPUType) float64 {
		var sum float64
		n := 0
		for _, rates := range byJob {
			r, ok := rates[gt]
			if !ok || len(rates) < 2 {
				continue
			}
			logs := 0.0
			for ot, o := range rates {
				if ot != gt {
					logs += math.Log(o) / float64(len(rates)-1)
				}
			}
			sum += 100 * math.Abs(math.Exp(logs)-r) / r
			n++
		}
		return sum / float64(n)
	}
	var medians []float64
	better := 0
	for _, e := range loo {
		t.Logf("| %s | %d | %.1f%% | %.1f%% | %+.2f | %.1f%% |", e.Type, e.N, e.MAPE, e.MedianAPE, e.Bias, naive(e.Type))
		medians = append(medians, e.MedianAPE)
		if e.MAPE < naive(e.Type) {
			better++
		}
	}
	assert.GreaterOrEqual(t, better, 10, "the model beats the naive guess on too few types")
	require.Len(t, loo, 11)
	for _, md := range medians {
		assert.Less(t, md, 60.0)
	}
	// Gavel's ResNet-50 on an H100: predicted, and faster than on a V100.
	k := perfmodel.JobKey{Model: "ResNet-50", BatchSize: 64, ScaleFactor: 1}
	v, err := m.Estimate(k, topology.V100)
	require.NoError(t, err)
	assert.False(t, v.Predicted)
	h, err := m.Estimate(k, topology.H100)
	require.NoError(t, err)
	assert.True(t, h.Predicted)
	assert.Greater(t, h.Rate, v.Rate)
	_, err = m.Estimate(k, "mi300x")
	assert.ErrorIs(t, err, perfmodel.ErrUnknownGPUType)
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		specs bool
		data  string
		msg   string
	}{
		{true, "type,name\n", "line 1"},
		{true, "type,name,fp16_tflops,fp32_tflops,memory_gb,bandwidth_gbps,source\nh100,H,x,1,1,1,s\n", "line 2: malformed throughput table: column 3"},
		{true, "type,name,fp16_tflops,fp32_tflops,memory_gb,bandwidth_gbps,source\nH 100,H,1,1,1,1,s\n", "line 2"},
		{true, "type,name,fp16_tflops,fp32_tflops,memory_gb,bandwidth_gbps,source\nh100,H,1,-1,1,1,s\n", "column 4"},
		{false, "round,submitter,system,accelerator,gpus,benchmark,result_file,minutes\nv1,a,b,NVIDIA A30,0,bert,f,1\n", "gpus \"0\""},
		{false, "round,submitter,system,accelerator,gpus,benchmark,result_file,minutes\nv1,a,b,NVIDIA A30,8,bert,f,Inf\n", "minutes"},
		{false, "round,submitter,system,accelerator,gpus,benchmark,result_file,minutes\nv1,a,b,NVIDIA A30,8,bert,f,1\nv1,a,b,NVIDIA A30,4,bert,f,1\n", "changes its accelerator"},
		{false, "", "header"},
	} {
		var err error
		if c.specs {
			_, err = ParseSpecs(strings.NewReader(c.data))
		} else {
			_, err = ParseMLPerf(strings.NewReader(c.data))
		}
		require.ErrorIs(t, err, perfmodel.ErrMalformedTable, c.data)
		assert.ErrorContains(t, err, c.msg)
	}
}

func FuzzParseMLPerf(f *testing.F) {
	f.Add(string(mlperfCSV[:2000]))
	f.Add("round,submitter,system,accelerator,gpus,benchmark,result_file,minutes\nv1,a,b,NVIDIA A30,8,bert,f,1\n")
	f.Fuzz(func(t *testing.T, data string) {
		obs, err := ParseMLPerf(strings.NewReader(data))
		if err != nil {
			if !errors.Is(err, perfmodel.ErrMalformedTable) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		for _, o := range obs {
			if !(o.Rate > 0) || math.IsInf(o.Rate, 0) || o.Job.ScaleFactor < 1 {
				t.Fatalf("bad observation %+v", o)
			}
		}
	})
}

func FuzzParseSpecs(f *testing.F) {
	f.Add(string(specsCSV))
	f.Fuzz(func(t *testing.T, data string) {
		specs, err := ParseSpecs(strings.NewReader(data))
		if err != nil {
			if !errors.Is(err, perfmodel.ErrMalformedTable) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		for _, s := range specs {
			require.NoError(t, s.Type.Validate())
		}
	})
}

// The shrinkage grid behind perfmodel.DefaultShrinkage: mean over types of
// the leave-one-type-out mean and median errors (go test -v -run Shrinkage).
func TestShrinkageGrid(t *testing.T) {
	obs := append(slices.Clone(MLPerf()), perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel")...)
	best, bestErr := 0.0, math.Inf(1)
	for _, lambda := range []float64{-1, 0.1, 0.3, 1, 3, 10, 30} {
		m, err := perfmodel.FitSpecModelWith(Specs(), obs, perfmodel.SpecOptions{Shrinkage: lambda})
		require.NoError(t, err)
		loo, err := m.LeaveOneTypeOut()
		require.NoError(t, err)
		var mape, med float64
		for _, e := range loo {
			mape += e.MAPE / float64(len(loo))
			med += e.MedianAPE / float64(len(loo))
		}
		t.Logf("lambda %5.1f: mean over types of MAPE %.1f%%, of median APE %.1f%%", lambda, mape, med)
		if lambda >= 0 && mape < bestErr {
			best, bestErr = lambda, mape
		}
	}
	assert.Equal(t, float64(perfmodel.DefaultShrinkage), best)
}

// A fitted model answers concurrent lookups (go test -race).
func TestModelConcurrent(t *testing.T) {
	m, err := Model()
	require.NoError(t, err)
	k := perfmodel.JobKey{Model: "mlperf-training-v4.0/bert", ScaleFactor: 8}
	want, err := m.Estimate(k, topology.B200)
	require.NoError(t, err)
	assert.True(t, want.Predicted)
	done := make(chan perfmodel.Estimate, 4)
	for range 4 {
		go func() {
			e, _ := m.Estimate(k, topology.B200)
			done <- e
		}()
	}
	for range 4 {
		assert.Equal(t, want, <-done)
	}
}
