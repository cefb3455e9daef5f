package scheduler_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

// newEmbedded is what an embedder builds at start, and again after a
// restart: the same configuration on the same cluster.
func newEmbedded(c *topology.Cluster) *scheduler.Scheduler {
	s, err := scheduler.New(scheduler.Config{Policy: &allocation.MaxMinFairness{}, Cluster: c})
	if err != nil {
		panic(err)
	}
	return s
}

// An embedder's loop across a restart: each round it starts the
// assignments, stops the preempted jobs and reports what ran; it saves a
// snapshot after each report. After a restart it builds the scheduler as
// before, restores the snapshot, and carries on: the restored scheduler
// makes the rounds the old one would have made, Preempted included, so
// the embedder stops exactly the workloads that lose their GPUs.
func ExampleScheduler_Restore() {
	c, err := topology.ParseCompact("v100:4:4", 4)
	if err != nil {
		panic(err)
	}
	s := newEmbedded(c)
	for _, key := range []string{"a", "b", "c"} {
		spec := scheduler.JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{topology.V100: 1}}
		if err := s.Submit(key, spec, 0); err != nil {
			panic(err)
		}
	}
	ctx := context.Background()
	var saved []byte
	step := func(s *scheduler.Scheduler, now float64) {
		r, err := s.Round(ctx, now)
		if err != nil {
			panic(err)
		}
		report := scheduler.RoundReport{Start: r.Start}
		for _, as := range r.Assignments {
			fmt.Printf("t=%v run %v kept %v", now, as.Jobs, as.Kept)
			report.Ran = append(report.Ran, scheduler.Ran{Job: as.Jobs[0], Seconds: r.Length})
		}
		fmt.Println(", stop", r.Preempted)
		if err := s.Report(report); err != nil {
			panic(err)
		}
		if saved, err = s.Snapshot(); err != nil {
			panic(err)
		}
	}
	step(s, 0)
	step(s, 360)

	// The process restarts: the same configuration, the same cluster.
	s = newEmbedded(c)
	if err := s.Restore(saved); err != nil {
		var mismatch *scheduler.MismatchError
		if errors.As(err, &mismatch) {
			fmt.Println("another cluster or configuration:", mismatch.Differences)
		}
		panic(err)
	}
	st, err := s.Status("b")
	if err != nil {
		panic(err)
	}
	fmt.Println("b is", st.State, "on", len(st.Devices), "GPUs")
	step(s, 720)
	// Output:
	// t=0 run [a] kept false, stop []
	// t=360 run [b] kept false, stop [a]
	// b is running on 4 GPUs
	// t=720 run [c] kept false, stop [b]
}

// A snapshot taken on a cluster that has since lost a server does not
// restore (Restore wants the same cluster); Adopt loads it and says which
// jobs lost their GPUs: the embedder stops their workloads.
func ExampleScheduler_Adopt() {
	two, err := topology.ParseCompact("v100:8:4", 4)
	if err != nil {
		panic(err)
	}
	s := newEmbedded(two)
	for _, key := range []string{"a", "b"} {
		if err := s.Submit(key, scheduler.JobSpec{GPUs: 4, Throughput: map[topology.GPUType]float64{topology.V100: 1}}, 0); err != nil {
			panic(err)
		}
	}
	if _, err := s.Round(context.Background(), 0); err != nil {
		panic(err)
	}
	saved, err := s.Snapshot()
	if err != nil {
		panic(err)
	}
	held, err := s.Status("b")
	if err != nil {
		panic(err)
	}

	// Restarted on the servers left: the other one is gone.
	var left topology.Cluster
	for _, srv := range two.Servers {
		if srv.ID != held.Devices[0].Server {
			left.Servers = append(left.Servers, srv)
		}
	}
	s = newEmbedded(&left)
	err = s.Restore(saved)
	fmt.Println("restore refused:", errors.Is(err, scheduler.ErrInvalid))
	ad, err := s.Adopt(saved)
	if err != nil {
		panic(err)
	}
	fmt.Println("differences:", len(ad.Differences), "released:", ad.Released)
	st, err := s.Status("b")
	if err != nil {
		panic(err)
	}
	fmt.Println("b is", st.State, "("+st.Reason.String()+")")
	// Output:
	// restore refused: true
	// differences: 1 released: [b]
	// b is waiting (preempted)
}

// Every round says what became of every job: the assignments run, the
// others wait or cannot run (and why), and a job whose known work runs out
// is listed once as finished.
func ExampleRound_fates() {
	c, err := topology.ParseCompact("v100:4:4,k80:4:4", 4)
	if err != nil {
		panic(err)
	}
	s := newEmbedded(c)
	rates := map[topology.GPUType]float64{topology.V100: 2, topology.K80: 1}
	for _, j := range []struct {
		key  string
		spec scheduler.JobSpec
	}{
		{"short", scheduler.JobSpec{GPUs: 4, Throughput: rates, RemainingSteps: 500}},
		{"long", scheduler.JobSpec{GPUs: 4, Throughput: rates}},
		{"queued", scheduler.JobSpec{GPUs: 4, Throughput: rates}},
		{"huge", scheduler.JobSpec{GPUs: 64, Throughput: rates}},
		{"h100", scheduler.JobSpec{GPUs: 1, Types: []topology.GPUType{topology.H100}, Throughput: rates}},
	} {
		if err := s.Submit(j.key, j.spec, 0); err != nil {
			panic(err)
		}
	}
	ctx := context.Background()
	for now := 0.0; now <= 360; now += 360 {
		r, err := s.Round(ctx, now)
		if err != nil {
			panic(err)
		}
		fmt.Printf("t=%v:", now)
		for _, as := range r.Assignments {
			fmt.Printf(" %s runs on %s;", as.Jobs[0], as.Type)
		}
		for _, f := range r.Waiting {
			fmt.Printf(" %s %s (%s);", f.Job, f.State, f.Reason)
		}
		fmt.Println(" finished:", r.Finished)
		report := scheduler.RoundReport{Start: r.Start}
		for _, as := range r.Assignments {
			report.Ran = append(report.Ran, scheduler.Ran{Job: as.Jobs[0], Seconds: r.Length, Steps: 500})
		}
		if err := s.Report(report); err != nil {
			panic(err)
		}
	}
	// Output:
	// t=0: long runs on k80; short runs on v100; queued waiting (no-capacity); huge unrunnable (too-large); h100 unrunnable (no-type); finished: []
	// t=360: long runs on k80; queued runs on v100; huge unrunnable (too-large); h100 unrunnable (no-type); finished: [short]
}
