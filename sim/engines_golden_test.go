package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/elastic"
	"github.com/gpusched/gpusched/gang"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/hw"
	"github.com/gpusched/gpusched/topology"
)

// goldenCase is one run of RunElastic or RunEvents whose digest is
// recorded.
type goldenCase struct {
	name string
	run  func(t *testing.T) string
}

// checkGolden compares the digests of cases with those recorded in file
// (testdata/golden/<file>), or records them with -update-golden.
func checkGolden(t *testing.T, file string, cases []goldenCase) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("golden results recorded on amd64, not %s (fused multiply-adds change the last bits)", runtime.GOARCH)
	}
	if goldenFMA {
		t.Skip("golden results recorded at GOAMD64=v1, not v3 or higher (fused multiply-adds change the last bits)")
	}
	path := filepath.Join("testdata", "golden", file)
	want := map[string]string{}
	if !*updateGolden {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if name, rest, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				want[name] = rest
			}
		}
	}
	var got []string
	for _, c := range cases {
		line := c.run(t)
		got = append(got, c.name+" "+line)
		if *updateGolden {
			continue
		}
		if w, ok := want[c.name]; !ok {
			t.Errorf("%s: no golden result in %s (record it with -update-golden)", c.name, path)
		} else if w != line {
			t.Errorf("%s: results moved:\n got  %s\n want %s\n(a change meant to move them records them again with -update-golden)", c.name, line, w)
		}
	}
	if *updateGolden {
		text := "# name digest (see " + t.Name() + ")\n" + strings.Join(got, "\n") + "\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// elasticDigest prints the counts of an elastic result and a SHA-256 of
// every record and total, every float in its shortest exact form.
func elasticDigest(res *ElasticResult) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "end %v capacity %v %v busy %v %v loans %d reclaims %d allocations %d\n", res.End,
		res.TrainingCapacity, res.LoanedCapacity, res.TrainingBusy, res.LoanedBusy, res.Loans, res.Reclaims, res.Allocations)
	for i := range res.Records {
		_, _ = fmt.Fprintf(h, "%+v\n", res.Records[i])
	}
	return fmt.Sprintf("%d %d %s", len(res.Records), res.Allocations, sum(h))
}

// The elastic engine, job for job, on the runs of the elastic tables of
// docs/reproduction.md: two days of ITP cluster04 under Lyra's configurations (loans,
// reclaims, preemptions, resizes, idle jumps) and Pollux's workloads 1 and
// 2 under the four policies of its table (progress and placed curves,
// charged starts, every-interval calls, packing). Not with -short (the
// Pollux fits take seconds).
func TestElasticResultsGolden(t *testing.T) {
	if testing.Short() && !*updateGolden {
		t.Skip("fits six step-time models")
	}
	var cases []goldenCase
	itp := func() []Job {
		jobs := loadTrace(t, filepath.Join("testdata", "itp", "cluster04.csv"), ReadITP)
		var out []Job
		for _, j := range jobs {
			if j.Arrival >= 14*86400 && j.Arrival < 16*86400 {
				j.Arrival -= 14 * 86400
				j.ID = len(out)
				out = append(out, j)
			}
		}
		return out
	}
	for _, c := range []struct {
		name             string
		policy           elastic.Policy
		loaning, scaling bool
	}{
		{"fifo", elastic.FIFO{}, false, false},
		{"fifo-strict", elastic.FIFO{Strict: true}, true, false},
		{"lyra-sjf", elastic.Lyra{}, false, false},
		{"loaning", elastic.Lyra{}, true, false},
		{"scaling-lyra", elastic.Lyra{}, false, true},
		{"scaling-afs", elastic.AFS{}, false, true},
		{"scaling-optimus", elastic.Optimus{}, false, true},
		{"lyra", elastic.Lyra{}, true, true},
		{"pollux-loaning", elastic.Pollux{}, true, true},
	} {
		cases = append(cases, goldenCase{"itp-2d/" + c.name, func(t *testing.T) string {
			trace := itp()
			spec := ElasticSpec{}
			if c.scaling {
				spec = ElasticSpec{Fraction: 0.5, MinFactor: 0.5, MaxFactor: 2, MaxWorkers: 24 * 8, Seed: 1}
			}
			jobs, err := spec.Jobs(trace)
			if err != nil {
				t.Fatal(err)
			}
			cfg := ElasticConfig{TrainingServers: 24, GPUsPerServer: 8, Policy: c.policy, RestartOverhead: 30, Headroom: 0.02}
			if c.loaning {
				cfg.InferenceServers = 24
				cfg.Usage = Diurnal{Mean: 0.7, Amplitude: 0.25, Noise: 0.05, Peak: 14 * 3600, Seed: 1}
			}
			res, err := RunElastic(context.Background(), cfg, jobs)
			if err != nil {
				t.Fatal(c.name, err)
			}
			return elasticDigest(res)
		}})
	}
	for wl := 1; wl <= 2; wl++ {
		for _, p := range []struct {
			name            string
			policy          elastic.Policy
			adaptive, fixed bool
		}{
			{"pollux", elastic.Pollux{}, true, false},
			{"optimus", elastic.Optimus{Admission: elastic.ArrivalOrder}, false, false},
			{"afs", elastic.AFS{Admission: elastic.ArrivalOrder}, false, false},
			{"fifo", elastic.FIFO{}, false, true},
			{"tiresias", elastic.Tiresias{Order: gang.LAS2D{Thresholds: []float64{16 * 3600}}}, false, true},
			{"tiresias-las", elastic.Tiresias{Order: gang.LAS2D{Starvation: 2}}, false, true},
		} {
			cases = append(cases, goldenCase{fmt.Sprintf("pollux-wl%d/%s", wl, p.name), func(t *testing.T) string {
				jobs, err := PolluxJobs(readWorkload(t, wl), loadPollux(t), 4, 64, p.adaptive, p.fixed)
				if err != nil {
					t.Fatal(err)
				}
				res, err := RunElastic(context.Background(), ElasticConfig{TrainingServers: 16, GPUsPerServer: 4, Policy: p.policy,
					RestartOverhead: 30, ChargeStart: true, EveryInterval: true, Pack: true}, jobs)
				if err != nil {
					t.Fatal(p.name, err)
				}
				return elasticDigest(res)
			}})
		}
	}
	// Sia's heterogeneous comparison on workload 1 (RunHetero).
	for _, c := range []struct {
		name            string
		policy          func() elastic.TypedPolicy
		adaptive, fixed bool
		interval        float64
	}{
		{"sia", func() elastic.TypedPolicy { return elastic.Sia{} }, true, false, 60},
		{"pollux", func() elastic.TypedPolicy { return elastic.Unaware{Policy: elastic.Pollux{}} }, true, false, 60},
		{"gavel", func() elastic.TypedPolicy {
			return &GavelRounds{Rounds: &allocation.Rounds{Policy: &allocation.MaxThroughput{}}}
		}, false, true, 360},
		{"tiresias", func() elastic.TypedPolicy {
			return elastic.Unaware{Policy: elastic.Tiresias{Order: gang.LAS2D{Thresholds: []float64{16 * 3600}}}}
		}, false, true, 60},
	} {
		cases = append(cases, goldenCase{"sia-wl1/" + c.name, func(t *testing.T) string {
			m, err := hw.Model(perfmodel.Observations(gavel.Simulation(), perfmodel.FP32, "Gavel simulation table"))
			if err != nil {
				t.Fatal(err)
			}
			pools := siaPools(1)
			on, err := PolluxOnPools(loadPollux(t), pools, m)
			if err != nil {
				t.Fatal(err)
			}
			jobs, err := PolluxHeteroJobs(readWorkload(t, 1), on, pools, 64, c.adaptive, c.fixed)
			if err != nil {
				t.Fatal(err)
			}
			res, err := RunHetero(context.Background(), HeteroConfig{Pools: pools, Policy: c.policy(), Interval: c.interval,
				RestartOverhead: 30, ChargeStart: true, EveryInterval: true}, jobs)
			if err != nil {
				t.Fatal(c.name, err)
			}
			return elasticDigest(res)
		}})
	}
	checkGolden(t, "elastic.txt", cases)
}

// The event engine, job for job: Tiresias's 60-job trace on 16 GPUs
// under the queue policies of TestTiresiasQueues (with and without
// restart costs and timers) and Gavel's generated multi-GPU workload on
// 8 V100 + 8 K80 under preemptive 2D-LAS and EASY backfilling.
func TestEventResultsGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/tiresias/60_job.csv")
	if err != nil {
		t.Fatal(err)
	}
	tiresias, err := ReadTiresias(bytes.NewReader(data), "60_job.csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := (&AssignModels{Seed: 1}).Apply(tiresias); err != nil {
		t.Fatal(err)
	}
	gput, err := os.ReadFile("testdata/tiresias/yarn-gput1000.csv")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := ReadSamples(bytes.NewReader(gput), "yarn-gput1000.csv")
	if err != nil {
		t.Fatal(err)
	}
	gittins, err := gang.NewGittins2D(samples, 3250)
	if err != nil {
		t.Fatal(err)
	}
	generated, err := (&GavelWorkload{Rate: 4, MultiGPU: true, Seed: 3}).Generate(200)
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	for _, c := range []struct {
		name    string
		s       EventScheduler
		timer   float64
		restart float64
	}{
		{"fifo", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.NoBackfill}, 0, 0},
		{"fifo-easy", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.EASY}, 0, 0},
		{"fifo-conservative", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.Conservative}, 0, 0},
		{"sjf", gang.Priority{Order: gang.ShortestJob{}, NoPreemption: true, Backfill: gang.Greedy}, 60, 0},
		{"srtf", gang.Priority{Order: gang.ShortestRemaining{}, Backfill: gang.Greedy}, 60, 30},
		{"2d-las", gang.Priority{Order: gang.LAS2D{}, Backfill: gang.Greedy}, 60, 0},
		{"2d-las-starve", gang.Priority{Order: gang.LAS2D{Starvation: 2}, Backfill: gang.Greedy}, 60, 30},
		{"2d-gittins", gang.Priority{Order: gittins, Backfill: gang.Greedy}, 60, 0},
		{"event-fifo", EventFIFO{}, 0, 0},
	} {
		cases = append(cases, goldenCase{"tiresias-16/" + c.name, func(t *testing.T) string {
			cfg := EventConfig{Types: []topology.GPUType{topology.V100}, Capacity: []int{16}, Throughput: perfmodel.Extrapolated{Table: gavel.Simulation()},
				Scheduler: c.s, Timer: c.timer, Restart: c.restart}
			res, err := RunEvents(context.Background(), cfg, tiresias)
			if err != nil {
				t.Fatal(c.name, err)
			}
			return resultDigest(res)
		}})
	}
	for _, c := range []struct {
		name string
		s    EventScheduler
	}{
		{"2d-las", gang.Priority{Order: gang.LAS2D{}, Backfill: gang.Greedy}},
		{"fifo-easy", gang.Priority{Order: gang.ByArrival{}, NoPreemption: true, Backfill: gang.EASY}},
	} {
		cases = append(cases, goldenCase{"gavel-8-8/" + c.name, func(t *testing.T) string {
			cfg := EventConfig{Types: []topology.GPUType{topology.V100, topology.K80}, Capacity: []int{8, 8}, Scheduler: c.s, Timer: 360, Restart: 10}
			res, err := RunEvents(context.Background(), cfg, generated)
			if err != nil {
				t.Fatal(c.name, err)
			}
			return resultDigest(res)
		}})
	}
	checkGolden(t, "events.txt", cases)
}
