package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/elastic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func elJobOf(id int, arrival float64, lo, hi int, work float64) elastic.Job {
	return elastic.Job{ID: id, Arrival: arrival, MinWorkers: lo, MaxWorkers: hi, GPUsPerWorker: 1, Work: work, Curve: elastic.Linear{PerWorker: 1}}
}

// FIFO on one 4-GPU server: A (4 GPUs, 100 s) then B (4 GPUs, 50 s), both
// at time 0: B waits 100 s and ends at 150.
func TestRunElasticFIFOByHand(t *testing.T) {
	res, err := RunElastic(context.Background(), ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.FIFO{}, Interval: 10},
		[]elastic.Job{elJobOf(1, 0, 4, 4, 400), elJobOf(2, 0, 4, 4, 200)})
	require.NoError(t, err)
	assert.Equal(t, 0.0, res.Records[0].Start)
	assert.InDelta(t, 100, res.Records[0].Finish, 1e-9)
	assert.Equal(t, 100.0, res.Records[1].Start)
	assert.InDelta(t, 150, res.Records[1].Finish, 1e-9)
	s := res.Summarise()
	assert.InDelta(t, 50, s.MeanQueue, 1e-9)
	assert.InDelta(t, 125, s.MeanJCT, 1e-9)
	assert.InDelta(t, 1, s.TrainingUsage, 1e-9)
}

// Loaning and a reclaim, by hand: 1 training and 2 inference servers of 4
// GPUs; inference idle until 60 s, then busy. The elastic job (1 to 12
// workers, 1200 worker-seconds) grows to 12 on the loaned servers, with
// its base worker on a loaned server (Lyra's placement of elastic jobs);
// the reclaim at 60 s preempts it after 720 units; it restarts on the 4
// training GPUs, loses 20 s to the restart, and ends at 80 + 480 / 4 = 200.
func TestRunElasticLoanAndReclaimByHand(t *testing.T) {
	usage := &UsageTrace{Times: []float64{0, 60}, Values: []float64{0, 1}}
	res, err := RunElastic(context.Background(), ElasticConfig{
		TrainingServers: 1, GPUsPerServer: 4, InferenceServers: 2, Usage: usage,
		Policy: elastic.Lyra{}, Interval: 10, OrchestratorInterval: 30, RestartOverhead: 20,
	}, []elastic.Job{elJobOf(1, 0, 1, 12, 1200)})
	require.NoError(t, err)
	r := res.Records[0]
	assert.Equal(t, 0.0, r.Start)
	assert.InDelta(t, 200, r.Finish, 1e-9)
	assert.Equal(t, 1, r.Preemptions)
	assert.Equal(t, 0, r.Resizes)
	assert.Equal(t, 2, res.Loans)
	assert.Equal(t, 2, res.Reclaims)
	// GPU time: 12 x 60 + 4 x 140 (20 s of it restarting).
	assert.InDelta(t, 720+560, r.GPUSeconds, 1e-9)
	assert.InDelta(t, 8*60, res.LoanedCapacity, 1e-9)
	s := res.Summarise()
	assert.Equal(t, 1.0, s.PreemptionRatio)
}

// Random workloads under every policy, with and without loaning: every
// job finishes after it arrives, never before its work allows at its
// maximum workers; without restart overhead a linear job's GPU time equals
// its work exactly (capacity is checked by the cluster at the end, and by
// the policies' and cluster's own tests).
func TestRunElasticRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 12; trial++ {
		var jobs []elastic.Job
		for i := 0; i < 40; i++ {
			lo := 1 + rng.IntN(4)
			jobs = append(jobs, elJobOf(i, rng.Float64()*5000, lo, lo+rng.IntN(8), 100+rng.Float64()*20000))
		}
		for _, p := range []elastic.Policy{elastic.FIFO{}, elastic.Lyra{}, elastic.AFS{}, elastic.Optimus{}} {
			for _, loan := range []bool{false, true} {
				cfg := ElasticConfig{TrainingServers: 2, GPUsPerServer: 8, Policy: p}
				if loan {
					cfg.InferenceServers, cfg.Headroom = 3, 0.02
					cfg.Usage = Diurnal{Mean: 0.5, Amplitude: 0.5, Period: 7200, Noise: 0.1, Seed: uint64(trial)}
				}
				res, err := RunElastic(context.Background(), cfg, jobs)
				require.NoError(t, err)
				for i, r := range res.Records {
					j := jobs[i]
					require.Equal(t, j.ID, r.ID)
					assert.GreaterOrEqual(t, r.Start, j.Arrival)
					assert.GreaterOrEqual(t, r.Finish-r.Start, j.Work/float64(j.MaxWorkers)-1e-6)
					assert.InDelta(t, j.Work, r.GPUSeconds, 1e-6*j.Work, "%T loan %v job %d", p, loan, i)
					if !loan {
						assert.Zero(t, r.Preemptions)
					}
				}
				busy := 0.0
				for _, r := range res.Records {
					busy += r.GPUSeconds
				}
				assert.InDelta(t, busy, res.TrainingBusy+res.LoanedBusy, 1e-6*busy)
				s := res.Summarise()
				assert.LessOrEqual(t, s.TrainingUsage, 1.0)
				assert.LessOrEqual(t, s.OverallUsage, 1.0)
			}
		}
	}
}

func TestRunElasticErrors(t *testing.T) {
	ctx := context.Background()
	ok := []elastic.Job{elJobOf(1, 0, 1, 2, 10)}
	_, err := RunElastic(ctx, ElasticConfig{TrainingServers: 1, GPUsPerServer: 4}, ok)
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	_, err = RunElastic(ctx, ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.Lyra{}}, []elastic.Job{elJobOf(1, 0, 5, 5, 10)})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	_, err = RunElastic(ctx, ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.Lyra{}}, []elastic.Job{elJobOf(1, 0, 1, 1, 10), elJobOf(1, 0, 1, 1, 10)})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	_, err = RunElastic(ctx, ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.Lyra{}, Headroom: 2}, ok)
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = RunElastic(cancelled, ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.Lyra{}}, ok)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestDiurnalAndUsageTrace(t *testing.T) {
	d := Diurnal{Mean: 0.5, Amplitude: 0.3, Peak: 3600}
	assert.InDelta(t, 0.8, d.Usage(3600), 1e-12)
	assert.InDelta(t, 0.2, d.Usage(3600+43200), 1e-12)
	n := Diurnal{Mean: 0.5, Noise: 0.1, Seed: 3}
	assert.Equal(t, n.Usage(10), n.Usage(200), "noise holds for 300 s")
	for x := 0.0; x < 1e5; x += 977 {
		u := Diurnal{Mean: 0.9, Amplitude: 0.3, Noise: 0.2}.Usage(x)
		assert.True(t, u >= 0 && u <= 1)
	}
	u, err := ReadUsage(strings.NewReader("time,usage\n0,0.5\n600,0.9\n"), "u.csv")
	require.NoError(t, err)
	assert.Equal(t, 0.5, u.Usage(-5))
	assert.Equal(t, 0.5, u.Usage(599))
	assert.Equal(t, 0.9, u.Usage(600))
	assert.Equal(t, 0.9, u.Usage(1e9))
	for _, bad := range []string{"", "time,usage\n", "time,x\n0,1\n", "time,usage\n0,1.5\n", "time,usage\n5,0.1\n5,0.2\n", "time,usage\n0,-1\n", "time,usage\n0,NaN\n"} {
		_, err := ReadUsage(strings.NewReader(bad), "u.csv")
		var pe *ParseError
		assert.ErrorAs(t, err, &pe, "%q", bad)
	}
}

func FuzzReadUsage(f *testing.F) {
	f.Add("time,usage\n0,0.5\n600,0.9\n")
	f.Add("time,usage\n0,1.5\n")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ReadUsage(strings.NewReader(s), "fuzz.csv")
		if err != nil {
			return
		}
		for i, v := range u.Values {
			if !(v >= 0 && v <= 1) || math.IsNaN(u.Times[i]) || i > 0 && u.Times[i] <= u.Times[i-1] {
				t.Fatalf("bad row %d: %v %v", i, u.Times[i], v)
			}
		}
	})
}

func TestElasticSpec(t *testing.T) {
	trace := []Job{{ID: 0, Arrival: 5, Duration: 100}, {ID: 1, Duration: 10}}
	trace[0].Key.ScaleFactor, trace[1].Key.ScaleFactor = 8, 1
	all, err := ElasticSpec{Fraction: 1, MinFactor: 0.5, MaxFactor: 2, MaxWorkers: 12}.Jobs(trace)
	require.NoError(t, err)
	assert.Equal(t, elastic.Job{ID: 0, Arrival: 5, MinWorkers: 4, MaxWorkers: 12, GPUsPerWorker: 1, Work: 800, Curve: elastic.Linear{PerWorker: 1}}, all[0])
	assert.Equal(t, [2]int{1, 2}, [2]int{all[1].MinWorkers, all[1].MaxWorkers})
	none, err := ElasticSpec{}.Jobs(trace)
	require.NoError(t, err)
	assert.False(t, none[0].Elastic() || none[1].Elastic())
	trace[1].Duration = 0
	_, err = ElasticSpec{}.Jobs(trace)
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	_, err = ElasticSpec{Fraction: 2}.Jobs(nil)
	assert.ErrorIs(t, err, elastic.ErrInvalid)
}

type shortPolicy struct{}

func (shortPolicy) Allocate([]elastic.State, int) ([]int, error) { return nil, nil }

// Jobs that could never run are refused up front, and a simulation in
// which waiting jobs never get capacity stops with ErrStalled instead of
// running forever.
func TestRunElasticNeverRuns(t *testing.T) {
	ctx := context.Background()
	// 5 workers of 3 GPUs on two 8-GPU servers: 2 workers per server fit.
	frag := elastic.Job{ID: 1, MinWorkers: 5, MaxWorkers: 5, GPUsPerWorker: 3, Work: 10, Curve: elastic.Linear{PerWorker: 1}}
	_, err := RunElastic(ctx, ElasticConfig{TrainingServers: 2, GPUsPerServer: 8, Policy: elastic.FIFO{}}, []elastic.Job{frag})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	// 16 GPUs where headroom keeps the only inference server from loans.
	big := elJobOf(2, 0, 16, 16, 10)
	cfg := ElasticConfig{TrainingServers: 1, GPUsPerServer: 8, InferenceServers: 1, Headroom: 0.02, Usage: Diurnal{}, Policy: elastic.FIFO{}}
	_, err = RunElastic(ctx, cfg, []elastic.Job{big})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	// Inference never lends its servers: the job waits, then the run stops.
	cfg = ElasticConfig{TrainingServers: 1, GPUsPerServer: 8, InferenceServers: 2, Usage: Diurnal{Mean: 1}, Policy: elastic.FIFO{}, Interval: 3600, OrchestratorInterval: 3600}
	_, err = RunElastic(ctx, cfg, []elastic.Job{big})
	assert.ErrorIs(t, err, ErrStalled)
	// NaN intervals and policies that answer for too few jobs.
	_, err = RunElastic(ctx, ElasticConfig{TrainingServers: 1, GPUsPerServer: 8, Policy: elastic.FIFO{}, Interval: math.NaN()}, []elastic.Job{elJobOf(3, 0, 1, 1, 10)})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
	_, err = RunElastic(ctx, ElasticConfig{TrainingServers: 1, GPUsPerServer: 8, Policy: shortPolicy{}}, []elastic.Job{elJobOf(3, 0, 1, 1, 10)})
	assert.ErrorIs(t, err, elastic.ErrInvalid)
}

// Usage counts idle time too: one 4-GPU job for 100 s at time 0 and one at
// 1,000 s on a 4-GPU server (interval 10 s): 800 busy GPU-seconds of
// 4 x 1,100; a job arriving exactly at time 0 starts at once under
// Pollux (no restart penalty on a first start).
func TestRunElasticUsageAndFirstStart(t *testing.T) {
	res, err := RunElastic(context.Background(), ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.FIFO{}, Interval: 10},
		[]elastic.Job{elJobOf(1, 0, 4, 4, 400), elJobOf(2, 1000, 4, 4, 400)})
	require.NoError(t, err)
	assert.InDelta(t, 1100, res.Records[1].Finish, 1e-9)
	assert.InDelta(t, 800.0/4400, res.Summarise().TrainingUsage, 1e-9)
	res, err = RunElastic(context.Background(), ElasticConfig{TrainingServers: 1, GPUsPerServer: 4, Policy: elastic.Pollux{}, Interval: 10},
		[]elastic.Job{elJobOf(1, 0, 1, 4, 400)})
	require.NoError(t, err)
	assert.Equal(t, 0.0, res.Records[0].Start)
	assert.InDelta(t, 100, res.Records[0].Finish, 1e-9)
}
