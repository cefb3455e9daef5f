package sim

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The first rows of each public trace, as shipped in ../shared/datasets.
const (
	phillySample = "timestamp,duration,num_gpus,gpu_time,cluster\n" +
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
		"2017-10-09 06:13:03,2951.0,1,2951.0,6214e9\n" +
		"2017-10-09 06:20:00,120.0,16,1920.0,6214e9\n"
	itpSample = "job_id,submission_time,duration,num_gpu\n" +
		"965d744f-0445-c1a8-12af-97e4c536c66e,1932025,2429,64\n" +
		"fb10987f-20ac-3703-eb67-146a77a6e17c,2000581,1532,1\n"
	tiresiasSample = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n" +
		"0,1,0,606,vgg19,164,30\n" +
		"1,8,30,133,vgg11,147,23\n"
	polluxSample = "name,time,application,num_replicas,batch_size\n" +
		"cifar10-0,107,cifar10,6,2048\n" +
		"deepspeech2-1,110,deepspeech2,6,320\n"
	alibabaSample = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n" +
		"openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n" +
		"openb-pod-0002,6000,12288,0,0,,LS,Running,5,10,5\n"
)

type loader func(io.Reader, string) ([]Job, error)

var loaders = map[string]loader{
	"philly": ReadPhilly, "itp": ReadITP, "tiresias": ReadTiresias, "pollux": ReadPollux, "alibaba": ReadAlibabaPods, "gavel": ReadGavelTrace,
}

func TestLoaders(t *testing.T) {
	ph, err := ReadPhilly(strings.NewReader(phillySample), "philly.csv")
	require.NoError(t, err)
	require.Len(t, ph, 3)
	assert.Equal(t, Job{ID: 0, Arrival: 2932, Duration: 66, Key: perfmodel.JobKey{ScaleFactor: 1}, Weight: 1}, ph[0])
	assert.Zero(t, ph[1].Arrival)
	assert.Equal(t, 16, ph[2].Key.ScaleFactor)

	itp, err := ReadITP(strings.NewReader(itpSample), "cluster01.csv")
	require.NoError(t, err)
	assert.Equal(t, Job{ID: 1, Arrival: 2000581 - 1932025, Duration: 1532, Key: perfmodel.JobKey{ScaleFactor: 1}, Weight: 1, Name: "fb10987f-20ac-3703-eb67-146a77a6e17c"}, itp[1])
	assert.Equal(t, 64, itp[0].Key.ScaleFactor)

	ti, err := ReadTiresias(strings.NewReader(tiresiasSample), "60_job.csv")
	require.NoError(t, err)
	assert.Equal(t, Job{ID: 1, Arrival: 30, Duration: 147, Key: perfmodel.JobKey{ScaleFactor: 8}, Weight: 1, Name: "vgg11"}, ti[1])

	po, err := ReadPollux(strings.NewReader(polluxSample), "workload-1.csv")
	require.NoError(t, err)
	assert.Equal(t, Job{ID: 0, Arrival: 107, Key: perfmodel.JobKey{BatchSize: 2048, ScaleFactor: 6}, Weight: 1, Name: "cifar10"}, po[0])

	al, err := ReadAlibabaPods(strings.NewReader(alibabaSample), "openb_pod_list_default.csv")
	require.NoError(t, err)
	require.Len(t, al, 2, "the CPU pod is skipped")
	assert.Equal(t, Job{ID: 1, Arrival: 427061, Duration: 12902960 - 427061, Key: perfmodel.JobKey{ScaleFactor: 1}, Weight: 1, Name: "openb-pod-0001"}, al[1])
}

func TestLoaderErrors(t *testing.T) {
	tests := []struct {
		load      string
		input     string
		line, msg string
	}{
		{"philly", "", "1", "empty file"},
		{"philly", "timestamp,duration\n", "1", `no column "num_gpus"`},
		{"philly", phillySample + "yesterday,1,1,1,x\n", "5", "timestamp"},
		{"philly", phillySample + "2017-10-09 07:01:55,-1,1,1,x\n", "5", "duration"},
		{"philly", phillySample + "2017-10-09 07:01:55,1,0,1,x\n", "5", "num_gpus"},
		{"philly", phillySample + "2017-10-09 07:01:55,1,1\n", "5", "3 fields, the header has 5"},
		{"philly", phillySample + "\"unterminated,1,1,1,x\n", "5", "quote"},
		{"itp", itpSample + "x,NaN,1,1\n", "4", "submission_time"},
		{"tiresias", tiresiasSample + "2,1,0,1,,5,1\n", "4", "empty model_name"},
		{"pollux", polluxSample + "x,1,bert,1,0\n", "4", "batch_size"},
		{"pollux", polluxSample + "x,1,be\ufeffrt,1,1\n", "4", "byte order mark"},
		{"alibaba", alibabaSample + "p,1,1,1,1,,LS,Running,10,5,10\n", "5", "before the pod started"},
	}
	for _, tc := range tests {
		_, err := loaders[tc.load](strings.NewReader(tc.input), "f.csv")
		require.Error(t, err, "%s %q", tc.load, tc.input)
		assert.ErrorIs(t, err, ErrMalformedTrace)
		assert.ErrorContains(t, err, "f.csv:"+tc.line+":")
		assert.ErrorContains(t, err, tc.msg)
	}
}

func FuzzLoaders(f *testing.F) {
	for _, s := range []string{phillySample, itpSample, tiresiasSample, polluxSample, alibabaSample, gavelTrace} {
		f.Add(s)
		f.Add("\ufeff" + s)
	}
	f.Add(itpSample + "x,0,1e308,1\n")
	f.Add(alibabaSample + "p,1,1,1,NaN,,LS,Running,0,10,0\n")
	f.Fuzz(func(t *testing.T, s string) {
		for name, load := range loaders {
			jobs, err := load(strings.NewReader(s), "fuzz")
			if err != nil {
				if !strings.HasPrefix(err.Error(), "sim: ") {
					t.Fatalf("%s: error without prefix: %v", name, err)
				}
				continue
			}
			for _, j := range jobs {
				if !(j.Arrival >= 0 && j.Arrival <= MaxSeconds) || j.Key.ScaleFactor < 1 || j.Key.ScaleFactor > maxGPUs ||
					!(j.Duration >= 0 && j.Duration <= MaxSeconds) || !(j.Steps >= 0 && j.Steps <= maxJobSteps) ||
					strings.Contains(j.Name+j.Key.Model, "\ufeff") {
					t.Fatalf("%s accepted a bad job: %+v", name, j)
				}
			}
		}
	})
}

// Jobs from a trace without models get Gavel job types, deterministically,
// and then simulate; 16- and 64-GPU jobs run at extrapolated rates.
func TestAssignModels(t *testing.T) {
	jobs, err := ReadITP(strings.NewReader(itpSample+"x,2000600,100,16\n"), "itp.csv")
	require.NoError(t, err)
	a := &AssignModels{Seed: 3}
	require.NoError(t, a.Apply(jobs))
	again, err := ReadITP(strings.NewReader(itpSample+"x,2000600,100,16\n"), "itp.csv")
	require.NoError(t, err)
	require.NoError(t, a.Apply(again))
	assert.Equal(t, jobs, again)
	for _, j := range jobs {
		require.NotEmpty(t, j.Key.Model)
		if j.Key.ScaleFactor > 1 {
			assert.Contains(t, []string{"ResNet-18", "ResNet-50", "Transformer", "LM"}, j.Key.Model)
		}
		rate, err := (perfmodel.Extrapolated{Table: gavel.Simulation()}).Throughput(j.Key, topology.V100)
		require.NoError(t, err)
		assert.InDelta(t, j.Duration, j.Steps/rate, 1)
	}
	cfg := Config{Types: []topology.GPUType{topology.K80, topology.P100, topology.V100}, Capacity: []int{64, 64, 64},
		Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()}, Policy: &allocation.MaxMinFairness{}}
	res, err := Run(context.Background(), cfg, jobs)
	require.NoError(t, err)
	assert.Len(t, res.Records, 3)
	pollux, err := ReadPollux(strings.NewReader(polluxSample), "w.csv")
	require.NoError(t, err)
	assert.ErrorContains(t, a.Apply(pollux), "has no model and duration 0")
}

// The shipped public traces parse whole, and AssignModels gives every job a
// model with positive steps.
func TestShippedTraces(t *testing.T) {
	for _, c := range []struct {
		path string
		read loader
		n    int
	}{
		{"testdata/philly/philly-jobs.csv", ReadPhilly, 82247},
		{"testdata/itp/cluster04.csv", ReadITP, 15802},
	} {
		data, err := os.ReadFile(c.path)
		require.NoError(t, err)
		jobs, err := c.read(bytes.NewReader(data), c.path)
		require.NoError(t, err)
		require.Equal(t, c.n, len(jobs), c.path)
		zero := 0
		for i := range jobs {
			if jobs[i].Duration == 0 {
				jobs[i].Duration = 1 // a few jobs of the traces last 0 s
				zero++
			}
		}
		require.NoError(t, (&AssignModels{Seed: 1}).Apply(jobs))
		for _, j := range jobs {
			require.Positive(t, j.Steps)
		}
		t.Logf("%s: %d jobs, %d of 0 s", c.path, len(jobs), zero)
	}
}

func FuzzReadSamples(f *testing.F) {
	f.Add("gput\n10\n20\n")
	f.Add("\ufeff1e300\n-1,2\n")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ReadSamples(strings.NewReader(s), "fuzz.csv")
		if err != nil {
			if v != nil || !strings.HasPrefix(err.Error(), "sim: ") {
				t.Fatalf("samples %v with error %v", v, err)
			}
			return
		}
		for _, x := range v {
			if !(x >= 1e-9 && x <= maxJobSteps) {
				t.Fatalf("sample %v accepted", x)
			}
		}
	})
}

// FuzzLoadPolluxApp fuzzes a profile's step times with valid gradient
// statistics: an accepted profile has positive, finite step times.
func FuzzLoadPolluxApp(f *testing.F) {
	f.Add("placement,local_bsz,step_time,sync_time\n1,4,0.5,0.01\n2,8,0.7,0.2\n", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n1,2,4,0.6,0.1\n")
	f.Add("placement,local_bsz,step_time,sync_time\n1,4,NaN,0.01\n", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n")
	validation := "progress,iteration,metric,grad_sqr,grad_var\n" + strings.Repeat("1,1,1,1,1\n", 10)
	f.Fuzz(func(t *testing.T, placements, scalability string) {
		fsys := fstest.MapFS{
			"p/ncf/placements.csv":    {Data: []byte(placements)},
			"p/ncf/scalability.csv":   {Data: []byte(scalability)},
			"p/ncf/validation-32.csv": {Data: []byte(validation)},
		}
		a, err := LoadPolluxApp(fsys, "p", "ncf")
		if err != nil {
			return
		}
		for _, s := range a.Samples {
			if !(s.StepTime > 0 && s.StepTime <= maxStepTime && s.Atomic >= 1 && s.Nodes >= 1 && s.Replicas >= s.Nodes) {
				t.Fatalf("bad sample %+v", s)
			}
		}
	})
}
