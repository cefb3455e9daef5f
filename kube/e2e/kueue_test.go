package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/flavor"
	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/perfmodel/gavel"
	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/sim"
	"github.com/gpusched/gpusched/topology"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The comparison's workload and cluster: 100 single-GPU jobs of Gavel's
// job types (its measured rates, perfmodel/gavel), Poisson arrivals at 30
// an hour, 15 minutes to 1.5 hours each on the job's fastest type, from two
// tenants (ClusterQueues team-a and team-b, alternating), each with a
// nominal quota of 4 GPUs of each of V100, P100 and K80 (the flavors in
// that order), on 8 GPUs of each type; no cohort, so no borrowing.
const (
	kqJobs    = 100
	kqPerHour = 30.0
	kqQuota   = 4
	kqSeed    = 1
)

var kqTypes = []topology.GPUType{"v100", "p100", "k80"}

// kqJob is one job of the comparison.
type kqJob struct {
	id      int
	key     perfmodel.JobKey
	arrival float64 // simulated seconds
	steps   float64
}

// kqTrace draws the comparison's jobs.
func kqTrace() []kqJob { return kqTraceOf(0) }

// kqTraceOf draws the comparison's jobs from the first programs of
// Gavel's single-GPU kinds (0: all of them).
func kqTraceOf(programs int) []kqJob {
	tab := gavel.Simulation()
	var keys []perfmodel.JobKey
	for _, k := range tab.Jobs() {
		if k.ScaleFactor == 1 {
			keys = append(keys, k)
		}
	}
	if programs > 0 {
		// Spread over the kinds: every len/programs-th.
		step := max(len(keys)/programs, 1)
		var some []perfmodel.JobKey
		for i := 0; i < len(keys) && len(some) < programs; i += step {
			some = append(some, keys[i])
		}
		keys = some
	}
	r := rand.New(rand.NewPCG(kqSeed, 30))
	jobs := make([]kqJob, kqJobs)
	at := 0.0
	for i := range jobs {
		k := keys[r.IntN(len(keys))]
		best := 0.0
		for _, t := range kqTypes {
			v, _ := tab.Throughput(k, t)
			best = max(best, v)
		}
		at += r.ExpFloat64() / kqPerHour * 3600
		jobs[i] = kqJob{id: i, key: k, arrival: at, steps: (0.25 + 1.25*r.Float64()) * 3600 * best}
	}
	return jobs
}

// vclock is the test's clock: wall time since start, less the time it was
// paused, scaled to simulated seconds.
type vclock struct {
	mu       sync.Mutex
	start    time.Time
	paused   time.Duration
	pausedAt time.Time
	perHour  float64 // wall seconds per simulated hour
}

func (c *vclock) now() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now()
	if !c.pausedAt.IsZero() {
		t = c.pausedAt
	}
	return t.Sub(c.start).Seconds() - c.paused.Seconds()
}

// wall is the wall time, standing still while the clock is paused.
func (c *vclock) wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedAt.IsZero() {
		return c.pausedAt
	}
	return time.Now()
}

// sim converts the clock's wall seconds into simulated seconds.
func (c *vclock) sim(wall float64) float64 { return wall / c.perHour * 3600 }

func (c *vclock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pausedAt = time.Now()
}

func (c *vclock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused += time.Since(c.pausedAt)
	c.pausedAt = time.Time{}
}

// kqRecord is what happened to one job, in clock (wall) seconds: its
// submission, Kueue's quota reservation for it, its pod's binding (the
// start of its work) and end, the release of its quota (its Workload
// finished).
type kqRecord struct {
	submit, admit, start, finish, release float64
	typ                                   topology.GPUType
	queue                                 string
}

// kqRun is one run's outcome.
type kqRun struct {
	records                    []kqRecord
	meanJCT, makespan          float64 // simulated hours
	fair                       kqFair
	maxUse                     map[string]int
	restartWrites              int
	restartSame, restartChecks int
	// learner is a learned run's estimator, at its end.
	learner *learn.Learner
}

// TestE2EKueueComparison runs the same 100 Jobs under Kueue alone and
// under Kueue with gpusched's controller (max-min fairness, or the policy
// GPUSCHED_KUEUE_POLICY names; Workloads held
// by the AdmissionGatedBy gate until the policy starts them), on the real
// control plane, simulated hours passing in seconds (GPUSCHED_KUEUE_SECONDS_PER_HOUR,
// default 8). A completer marks each pod Succeeded after the job's work at
// Gavel's rate on the type of the node it was bound to. It checks that
// every Job finishes, that no ClusterQueue ever runs more than its quota of
// a flavor, and that a controller restart mid-run changes no decision and
// writes nothing (TestE2EKueueUnreadableGated checks an unreadable
// Workload); it prints both runs' mean JCT and
// makespan beside the simulator's prediction (flavor.Kueue and
// flavor.Steered on the same arrivals).
func TestE2EKueueComparison(t *testing.T) {
	e := kueueEnvironment(t)
	perHour := 8.0
	if v := os.Getenv("GPUSCHED_KUEUE_SECONDS_PER_HOUR"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 1 || f > 600 {
			t.Fatalf("GPUSCHED_KUEUE_SECONDS_PER_HOUR=%q: want 1 to 600", v)
		}
		perHour = f
	}
	jobs := kqTrace()
	alone := kqExecute(t, e, jobs, "alone", perHour, kqOpts{})
	steered := kqExecute(t, e, jobs, "gpusched", perHour, kqOpts{steer: true, restart: true})
	patient := kqExecute(t, e, jobs, "patience", perHour, kqOpts{steer: true, restart: true, patience: 1})
	_, policy := kqPolicy(t, "")
	if path := os.Getenv("GPUSCHED_E2E_KUEUE_RECORDS"); path != "" {
		kqSaveRecords(t, path, perHour, policy, map[string]kqRun{"alone": alone, "gpusched": steered, "patience": patient})
	}
	kqReport(t, jobs, perHour, policy, alone, steered, &patient)
	for name, r := range map[string]kqRun{"gpusched": steered, "patience": patient} {
		if r.restartChecks == 0 {
			t.Errorf("%s: the controller was not restarted mid-run", name)
		}
		if r.restartWrites != 0 || r.restartSame != r.restartChecks {
			t.Errorf("%s: restart: %d of %d decisions unchanged, %d writes (want all, and none)", name, r.restartSame, r.restartChecks, r.restartWrites)
		}
		if r.meanJCT >= alone.meanJCT {
			t.Errorf("%s: mean JCT %.2f h is not below Kueue's alone %.2f h", name, r.meanJCT, alone.meanJCT)
		}
	}
}

// kqOpts are a run's settings: steer runs the controller (with the
// wait rule's patience), restart restarts it mid-run; rates says what the
// jobs tell: "" their kinds (gpusched.io/job-kind, Gavel's table: the
// truth), "none" nothing (their kind only in their containers'
// arguments, which the controller reads as their program), "learned" the
// same, and the controller learns from their progress, which they
// report through the progress channel every kqReportEvery simulated
// seconds.
type kqOpts struct {
	steer, restart bool
	patience       float64
	rates          string
}

// kqReportEvery is the period of a learned job's progress reports, in
// simulated seconds.
const kqReportEvery = 120.0

// kqExecute runs the jobs in a namespace of their own, with the
// controller when opts.steer is set, and returns what happened.
func kqExecute(t *testing.T, e *kueueEnv, jobs []kqJob, name string, perHour float64, opts kqOpts) kqRun {
	t.Helper()
	steer, patience, learned := opts.steer, opts.patience, opts.rates == "learned"
	tab := gavel.Simulation()
	budget := 12 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	cs := e.cp.Client
	ns := "kq-" + name
	var labels map[string]string
	if steer {
		// kueue-policies.yaml gates the Jobs of this namespace.
		labels = map[string]string{"gpusched.io/kueue": "true"}
	}
	e.namespace(ctx, t, ns, name, labels)
	queues := []string{ns + "-a", ns + "-b"}
	for _, q := range queues {
		e.clusterQueue(ctx, t, q, ns, name, kqQuota)
	}
	if steer {
		e.applyKueuePolicies(ctx, t, ns, queues[0])
	}
	// Node products to types.
	nodeType := map[string]topology.GPUType{}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, err, "nodes")
	for _, n := range nodes.Items {
		if p, err := topology.ParseProduct(n.Labels[model.LabelProduct]); err == nil {
			nodeType[n.Name] = p.Type
		}
	}

	clock := &vclock{start: time.Now(), perHour: perHour}
	var mu sync.Mutex
	recs := make([]kqRecord, len(jobs))
	for i := range recs {
		recs[i] = kqRecord{submit: -1, admit: -1, start: -1, finish: -1, release: -1, queue: queues[i%2]}
	}
	type due struct {
		at  float64
		pod *corev1.Pod
		id  int
	}
	var pendingDone []due
	started := map[string]bool{}
	// A learned run's running pods: each reports its steps (its rate on
	// its type since its start) through the channel.
	type reporter struct {
		name              string
		start, rate, last float64 // simulated seconds, steps/s
		done              bool
	}
	var reporters []*reporter
	// The completer: a pod bound to a node runs for the job's work at its
	// rate on the node's type.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	podInf := factory.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return
		}
		id, err := strconv.Atoi(p.Labels["e2e-id"])
		if err != nil || id < 0 || id >= len(jobs) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if started[p.Name] {
			return
		}
		started[p.Name] = true
		now := clock.now()
		typ := nodeType[p.Spec.NodeName]
		rate, err := tab.Throughput(jobs[id].key, typ)
		if err != nil || rate <= 0 {
			t.Errorf("job %d bound to %s (%s): no rate: %v", id, p.Spec.NodeName, typ, err)
			return
		}
		recs[id].start, recs[id].typ = now, typ
		wall := jobs[id].steps / rate / 3600 * perHour
		pendingDone = append(pendingDone, due{at: now + wall, pod: p.DeepCopy(), id: id})
		if learned {
			reporters = append(reporters, &reporter{name: p.Name, start: clock.sim(now), rate: rate, last: -1})
		}
	}
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) }})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// When Kueue reserves a job's quota, and when it releases it.
	wlFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.dyn, 0, ns, nil)
	wlInf := wlFactory.ForResource(kueue.WorkloadsGVR).Informer()
	onWorkload := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		var job string
		for _, o := range u.GetOwnerReferences() {
			if o.Kind == "Job" {
				job = o.Name
			}
		}
		id, err := strconv.Atoi(strings.TrimPrefix(job, "job-"))
		if err != nil || id < 0 || id >= len(jobs) {
			return
		}
		now := clock.now()
		mu.Lock()
		defer mu.Unlock()
		if recs[id].admit < 0 && admittedFlavor(u) != "" {
			recs[id].admit = now
		}
		if recs[id].release < 0 && workloadFinished(u) {
			recs[id].release = now
		}
	}
	_, _ = wlInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onWorkload, UpdateFunc: func(_, o any) { onWorkload(o) }})
	wlFactory.Start(ctx.Done())
	wlFactory.WaitForCacheSync(ctx.Done())

	var run kqRun
	var ctl *kueue.Controller
	var stopCtl context.CancelFunc
	ctlDone := make(chan error, 1)
	newController := func() *kueue.Controller {
		// The controller's clock stands still while the test's does (the
		// restart), so that the wait rule's decisions do not move then
		// (afterwards it runs on with the wall clock, so the pause, a
		// second or two, counts as waiting); a simulated hour is a job's
		// assumed duration.
		pol, polName := kqPolicy(t, "")
		cfg := kueue.Config{Client: cs, Dynamic: e.dyn, Namespace: ns, Policy: pol, PolicyName: polName,
			MinInterval: 100 * time.Millisecond, Interval: time.Second, Patience: patience,
			JobDuration: time.Duration(perHour * float64(time.Second)), Now: clock.wall}
		if learned {
			est, err := learn.New(learn.Config{})
			must(t, err, "learner")
			cfg.Estimator, cfg.Clock = est, func() float64 { return clock.sim(clock.now()) }
			run.learner = est
		}
		c, err := kueue.New(cfg)
		must(t, err, "controller")
		return c
	}
	startCtl := func(c *kueue.Controller) {
		cctx, stop := context.WithCancel(ctx)
		stopCtl = stop
		go func() { ctlDone <- c.Run(cctx) }()
	}
	var ch *progressChannel
	if steer {
		ctl = newController()
		startCtl(ctl)
		if learned {
			ch = startProgressChannel(ctx, t, cs, ns, ctl)
		}
	}
	restartAt := len(jobs) * 2 / 5
	restarted := false
	next := 0
	for {
		now := clock.now()
		// Submit the jobs whose time has come.
		for next < len(jobs) && clock.sim(now) >= jobs[next].arrival {
			j := jobs[next]
			ann := map[string]string{"gpusched.io/job-kind": j.key.Model}
			if j.key.BatchSize > 0 {
				ann["gpusched.io/batch-size"] = strconv.Itoa(j.key.BatchSize)
			}
			if opts.rates != "" {
				ann = nil
			}
			job := kueueJob(ns, fmt.Sprintf("job-%03d", j.id), queues[j.id%2], 1, ann, map[string]string{"e2e-id": strconv.Itoa(j.id)}, false)
			if opts.rates != "" {
				// The program, as a training script's arguments name it.
				job.Spec.Template.Spec.Containers[0].Args = []string{"--model", j.key.Model, "--batch-size", strconv.Itoa(j.key.BatchSize)}
			}
			created, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
			must(t, err, "create job %d", j.id)
			if gated := created.Annotations[kueue.AnnotationAdmissionGatedBy] == kueue.DefaultGate; gated != steer {
				t.Fatalf("job %d: gated %v by kueue-policies.yaml, want %v", j.id, gated, steer)
			}
			mu.Lock()
			recs[j.id].submit = now
			mu.Unlock()
			next++
		}
		// Finish the pods whose work is done.
		mu.Lock()
		var ready []due
		pendingDone = slices.DeleteFunc(pendingDone, func(d due) bool {
			if d.at <= now {
				ready = append(ready, d)
				return true
			}
			return false
		})
		mu.Unlock()
		for _, d := range ready {
			must(t, e.retry(ctx, func() error {
				cur, err := cs.CoreV1().Pods(ns).Get(ctx, d.pod.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				return succeed(ctx, cs, cur)
			}), "pod of job %d succeeded", d.id)
			mu.Lock()
			recs[d.id].finish = d.at
			mu.Unlock()
		}
		// The learned jobs report their progress; a finished one stops.
		if learned {
			mu.Lock()
			rs := slices.Clone(reporters)
			mu.Unlock()
			for _, d := range ready {
				for _, r := range rs {
					if r.name == d.pod.Name {
						r.done = true
					}
				}
			}
			sim := clock.sim(now)
			for _, r := range rs {
				if r.done || sim-r.last < kqReportEvery {
					continue
				}
				if r.last < 0 {
					ch.running(ctx, t, r.name)
				}
				r.last = sim
				ch.report(ctx, t, r.name, r.rate*max(sim-r.start, 0)) // the loop's now may precede the start
			}
		}
		// Restart the controller mid-run, the clock stopped.
		if steer && opts.restart && !restarted && next >= restartAt {
			restarted = true
			clock.pause()
			run.restartChecks, run.restartSame, run.restartWrites = kqRestart(ctx, t, e, ctl, &ctl, stopCtl, ctlDone, newController)
			startCtl(ctl)
			clock.resume()
		}
		mu.Lock()
		finished := 0
		for _, r := range recs {
			if r.finish >= 0 {
				finished++
			}
		}
		mu.Unlock()
		if finished == len(jobs) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d jobs finished in %v", name, finished, len(jobs), budget)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every Job completes (the job controller's condition).
	waitFor(ctx, t, name+": every Job complete", e.kueueProc, func() (bool, string) {
		list, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		done := 0
		for i := range list.Items {
			if jobDone(&list.Items[i]) {
				done++
			}
		}
		return done == len(jobs), fmt.Sprintf("%d of %d complete", done, len(jobs))
	})
	waitFor(ctx, t, name+": every Workload finished", e.kueueProc, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range recs {
			if r.release >= 0 {
				n++
			}
		}
		return n == len(recs), fmt.Sprintf("%d of %d released", n, len(recs))
	})
	if steer {
		if patience > 0 {
			kqHeld(ctx, t, cs, ns)
		}
		stopCtl()
		ctlStopped(t, <-ctlDone)
	}
	mu.Lock()
	defer mu.Unlock()
	run.summarize(jobs, recs, perHour)
	return run
}

// summarize sets the run's records and the figures they give.
func (run *kqRun) summarize(jobs []kqJob, recs []kqRecord, perHour float64) {
	run.records = recs
	run.meanJCT, run.makespan = 0, 0
	first, last := math.Inf(1), 0.0
	for _, r := range recs {
		run.meanJCT += r.finish - r.submit
		first, last = min(first, r.submit), max(last, r.finish)
	}
	run.meanJCT = run.meanJCT / float64(len(recs)) / perHour
	run.makespan = (last - first) / perHour
	jct := make([]float64, len(recs))
	for i, r := range recs {
		jct[i] = (r.finish - r.submit) / perHour
	}
	run.fair = kqFairness(jobs, jct)
	run.maxUse = maxUse(recs)
}

// maxUse is the most GPUs each ClusterQueue ran of each type at once.
func maxUse(recs []kqRecord) map[string]int {
	type ev struct {
		at    float64
		delta int
		key   string
	}
	var evs []ev
	for _, r := range recs {
		k := r.queue + "/" + string(r.typ)
		evs = append(evs, ev{r.start, 1, k}, ev{r.finish, -1, k})
	}
	// Ends before starts at one instant: a pod ends before its successor
	// is admitted.
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	cur, most := map[string]int{}, map[string]int{}
	for _, e := range evs {
		cur[e.key] += e.delta
		most[e.key] = max(most[e.key], cur[e.key])
	}
	return most
}

// kqRestart stops the controller with the clock stopped, once the
// cluster is still (two rounds a second apart that write nothing, decide
// alike and start nothing: every pending workload waits, so nothing
// changes while the clock stands), starts a new one, and compares the new
// one's first round with the old one's last: how many decisions it made,
// how many are unchanged (shares to three digits, the steerer's
// precision), how many writes it made. It leaves the new controller in
// *ctl, not yet running.
func kqRestart(ctx context.Context, t *testing.T, e *kueueEnv, old *kueue.Controller, ctl **kueue.Controller, stop context.CancelFunc,
	done chan error, newController func() *kueue.Controller) (checks, same, writes int) {
	t.Helper()
	var last *kueue.RoundResult
	waitFor(ctx, t, "the cluster still", e.kueueProc, func() (bool, string) {
		r, err := old.Round(ctx)
		if err != nil {
			return false, err.Error()
		}
		starting := 0
		for _, d := range r.Decisions {
			if d.Why == flavor.Start {
				starting++
			}
		}
		still := last != nil && r.Writes == 0 && starting == 0 && kqDecisions(r) == kqDecisions(last)
		last = r
		if !still {
			time.Sleep(time.Second)
		}
		return still, fmt.Sprintf("%d writes, %d starting", r.Writes, starting)
	})
	stop()
	ctlStopped(t, <-done)
	c := newController()
	must(t, c.Start(ctx), "restarted controller")
	r, err := c.Round(ctx)
	must(t, err, "first round after the restart")
	for k, d := range last.Decisions {
		checks++
		if kqDecision(r.Decisions[k]) == kqDecision(d) {
			same++
		} else {
			t.Logf("restart: %s was %+v, now %+v", k, d, r.Decisions[k])
		}
	}
	if len(r.Decisions) != len(last.Decisions) {
		t.Errorf("restart: %d decisions before, %d after", len(last.Decisions), len(r.Decisions))
	}
	t.Logf("restart mid-run: %d pending workloads, %d decisions unchanged, %d writes in the first round", checks, same, r.Writes)
	*ctl = c
	return checks, same, r.Writes
}

// kqDecision is a decision as text, its share to three digits.
func kqDecision(d kueue.Decision) string {
	return fmt.Sprintf("%s %s %s %v %.3f", d.ClusterQueue, d.Type, d.Flavor, d.Why, d.Share)
}

// kqDecisions is a round's decisions as text.
func kqDecisions(r *kueue.RoundResult) string {
	var b strings.Builder
	for _, k := range r.Keys() {
		fmt.Fprintf(&b, "%s: %s\n", k, kqDecision(r.Decisions[k]))
	}
	return b.String()
}

// kqHeld logs what the wait rule did in a run, from the controller's
// events: how many Workloads it held for a faster type, and the events of
// a few.
func kqHeld(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	must(t, err, "events")
	byWorkload := map[string][]string{}
	held := map[string]bool{}
	for _, ev := range evs.Items {
		if !strings.HasPrefix(ev.Reason, "GPUSched") || ev.InvolvedObject.Kind != "Workload" {
			continue
		}
		name := ev.InvolvedObject.Name
		byWorkload[name] = append(byWorkload[name], ev.FirstTimestamp.Format("15:04:05")+" "+ev.Message)
		if strings.Contains(ev.Message, "Kueue never moves") {
			held[name] = true
		}
	}
	t.Logf("wait rule: %d of %d Workloads held for a faster type at some point", len(held), len(byWorkload))
	n := 0
	for name := range held {
		if n++; n > 3 {
			break
		}
		slices.Sort(byWorkload[name])
		t.Logf("  %s: %q", name, byWorkload[name])
	}
}

// kqReport simulates the runs on the arrivals and latencies they had,
// logs them beside their simulations, and fails if a ClusterQueue ran more
// than its quota of a flavor. patient, if set, is the run with the wait
// rule (patience 1).
// kqPolicy is the controller's policy in the comparison: name, else
// GPUSCHED_KUEUE_POLICY, else max-min-fairness, the policy of the
// comparison's recorded runs (docs/kueue.md). The comparison's two
// ClusterQueues share no cohort, so the default's fairness between them
// (admission.DefaultPolicy) has nothing to share: in simulation on twelve
// traces the two give the same mean JCT within 2% (docs/kueue.md). It
// returns the policy and its name.
func kqPolicy(t *testing.T, name string) (allocation.Policy, string) {
	t.Helper()
	if name == "" {
		name = os.Getenv("GPUSCHED_KUEUE_POLICY")
	}
	if name == "" {
		name = "max-min-fairness"
	}
	p, err := admission.PolicyByName(name)
	must(t, err, "GPUSCHED_KUEUE_POLICY")
	return p, name
}

// kqReport prints the runs beside their simulations (the steered ones
// under the policy named, as kqPolicy reads it).
func kqReport(t *testing.T, jobs []kqJob, perHour float64, policy string, alone, steered kqRun, patient *kqRun) {
	pol, policy := kqPolicy(t, policy)
	t.Logf("the controller's policy: %s", policy)
	t.Helper()
	type named struct {
		name string
		run  kqRun
		pred kqPrediction
	}
	runs := []named{
		{"kueue alone", alone, kqPredict(t, jobs, alone, func(func(int) []float64) sim.EventScheduler {
			return &flavor.Kueue{Queues: kqQueues(), QueueOf: kqQueueOf}
		}, perHour)},
		{"kueue+gpusched", steered, kqPredict(t, jobs, steered, func(rates func(int) []float64) sim.EventScheduler {
			return &flavor.Steered{Queues: kqQueues(), QueueOf: kqQueueOf, Types: kqTypes, Rates: rates, Policy: pol}
		}, perHour)},
	}
	if patient != nil {
		runs = append(runs, named{"kueue+gpusched patience 1", *patient, kqPredict(t, jobs, *patient, func(rates func(int) []float64) sim.EventScheduler {
			return &flavor.Steered{Queues: kqQueues(), QueueOf: kqQueueOf, Types: kqTypes, Rates: rates, Patience: 1, Policy: pol}
		}, perHour)})
	}
	for _, r := range runs {
		t.Logf("%s: control plane latency modelled: reservation %.3f h after submission, quota held %.3f h before and %.3f h after the work",
			r.name, r.pred.admitLag, r.pred.startPad, r.pred.finishPad)
	}
	t.Logf("%d jobs, 2 tenants, %d GPUs of each of %v per tenant, %g wall seconds per simulated hour", kqJobs, kqQuota, kqTypes, perHour)
	a := runs[0]
	for _, r := range runs {
		t.Logf("%s: mean JCT %.2f h, makespan %.2f h (simulator: %.2f h; makespan mean %.2f h, median %.2f h, %.2f-%.2f h, the run's above %d of %d)",
			r.name, r.run.meanJCT, r.run.makespan, r.pred.meanJCT, r.pred.makespan, r.pred.median(), r.pred.makespans[0], r.pred.makespans[kqJitters-1],
			r.pred.below(r.run.makespan), kqJitters)
		t.Logf("%s fairness: %v (simulator: %v)", r.name, r.run.fair, r.pred.fair)
		t.Logf("%s: types %v", r.name, r.run.types())
		if r.name != a.name {
			t.Logf("%s / kueue alone: mean JCT %.3f, makespan %.3f (simulator: %.3f, %.3f)", r.name, r.run.meanJCT/a.run.meanJCT, r.run.makespan/a.run.makespan,
				r.pred.meanJCT/a.pred.meanJCT, r.pred.makespan/a.pred.makespan)
		}
		for q, n := range r.run.maxUse {
			if n > kqQuota {
				t.Errorf("%s: ClusterQueue/flavor %s ran %d GPUs at once, quota %d", r.name, q, n, kqQuota)
			}
		}
	}
	for _, r := range runs {
		t.Logf("prediction error: %s JCT %+.1f%%, makespan %+.1f%%", r.name, 100*(r.pred.meanJCT/r.run.meanJCT-1), 100*(r.pred.makespan/r.run.makespan-1))
	}
}

// types counts the run's jobs by the type they ran on.
func (run *kqRun) types() map[topology.GPUType]int {
	out := map[topology.GPUType]int{}
	for _, r := range run.records {
		out[r.typ]++
	}
	return out
}

// kqRecordsFile is the JSON of both runs' records
// (GPUSCHED_E2E_KUEUE_RECORDS writes it, GPUSCHED_E2E_KUEUE_REPLAY reads
// it): per run, each job's times in wall seconds since the run's start
// and the type it ran on.
type kqRecordsFile struct {
	PerHour float64
	// Policy is the controller's policy ("" in records of before #40:
	// max-min-fairness).
	Policy string `json:",omitempty"`
	Runs   map[string][]kqRecordJSON
}

type kqRecordJSON struct {
	Submit, Admit, Start, Finish, Release float64
	Type                                  topology.GPUType
	Queue                                 string
}

// kqSaveRecords writes the runs' records to path, for studying a
// prediction without a control plane (TestE2EKueueReplay).
func kqSaveRecords(t *testing.T, path string, perHour float64, policy string, runs map[string]kqRun) {
	t.Helper()
	out := kqRecordsFile{PerHour: perHour, Policy: policy, Runs: map[string][]kqRecordJSON{}}
	for name, r := range runs {
		for _, rec := range r.records {
			out.Runs[name] = append(out.Runs[name], kqRecordJSON{rec.submit, rec.admit, rec.start, rec.finish, rec.release, rec.typ, rec.queue})
		}
	}
	b, err := json.MarshalIndent(out, "", " ")
	must(t, err, "records")
	must(t, os.WriteFile(path, b, 0o644), "records")
	t.Logf("records of both runs written to %s", path)
}

// TestE2EKueueReplay predicts the runs of records TestE2EKueueComparison
// saved (GPUSCHED_E2E_KUEUE_REPLAY=file.json, written with
// GPUSCHED_E2E_KUEUE_RECORDS) and logs them as that test does, in seconds
// and without a control plane; records of before the wait rule (no run
// "patience") get its prediction on the steered run's arrivals. It fails
// on records that cannot be the comparison's: another number of jobs,
// times out of order, a type or a ClusterQueue the comparison does not
// have.
func TestE2EKueueReplay(t *testing.T) {
	path := os.Getenv("GPUSCHED_E2E_KUEUE_REPLAY")
	if path == "" {
		t.Skip("GPUSCHED_E2E_KUEUE_REPLAY names no records file")
	}
	b, err := os.ReadFile(path)
	must(t, err, "records")
	var in kqRecordsFile
	must(t, json.Unmarshal(b, &in), "records %s", path)
	if in.PerHour < 1 || in.PerHour > 600 {
		t.Fatalf("%s: PerHour %g, want 1 to 600", path, in.PerHour)
	}
	jobs := kqTrace()
	runs := map[string]kqRun{}
	for _, name := range []string{"alone", "gpusched", "patience"} {
		got, ok := in.Runs[name]
		if !ok && name == "patience" {
			continue // records of before the wait rule
		}
		if len(got) != len(jobs) {
			t.Fatalf("%s: run %q has %d records, want %d", path, name, len(got), len(jobs))
		}
		recs := make([]kqRecord, len(got))
		for i, x := range got {
			if !(0 <= x.Submit && x.Submit <= x.Admit && x.Admit <= x.Start && x.Start <= x.Finish && x.Finish <= x.Release) {
				t.Fatalf("%s: run %q job %d: times %+v out of order (submit <= admit <= start <= finish <= release)", path, name, i, x)
			}
			if !slices.Contains(kqTypes, x.Type) || (x.Queue != "kq-"+name+"-a" && x.Queue != "kq-"+name+"-b") {
				t.Fatalf("%s: run %q job %d: type %q, ClusterQueue %q", path, name, i, x.Type, x.Queue)
			}
			recs[i] = kqRecord{x.Submit, x.Admit, x.Start, x.Finish, x.Release, x.Type, x.Queue}
		}
		var r kqRun
		r.summarize(jobs, recs, in.PerHour)
		runs[name] = r
	}
	var patient *kqRun
	if r, ok := runs["patience"]; ok {
		patient = &r
	}
	if in.Policy == "" {
		in.Policy = "max-min-fairness" // records of before #40, all of that policy
	}
	kqReport(t, jobs, in.PerHour, in.Policy, runs["alone"], runs["gpusched"], patient)
	if patient == nil {
		// Records of before the wait rule: what it would have done on the
		// steered run's arrivals and latencies.
		pol, _ := kqPolicy(t, in.Policy)
		p := kqPredict(t, jobs, runs["gpusched"], func(rates func(int) []float64) sim.EventScheduler {
			return &flavor.Steered{Queues: kqQueues(), QueueOf: kqQueueOf, Types: kqTypes, Rates: rates, Patience: 1, Policy: pol}
		}, in.PerHour)
		t.Logf("patience 1, simulated on the kueue+gpusched run's arrivals: mean JCT %.2f h, makespan mean %.2f h, median %.2f h (%.2f-%.2f h)",
			p.meanJCT, p.makespan, p.median(), p.makespans[0], p.makespans[kqJitters-1])
	}
}

// kqPrediction is the simulator's prediction of a run, in simulated
// hours: the mean over jittered simulations of the mean JCT and of the
// makespan, and every simulation's makespan.
type kqPrediction struct {
	meanJCT, makespan float64
	// makespans are the simulations' makespans, in increasing order.
	makespans []float64
	fair      kqFair // of the first jittered simulation
	// admitLag, startPad and finishPad are the control plane's latencies
	// the prediction models (hours).
	admitLag, startPad, finishPad float64
}

// median is the simulations' median makespan.
func (p kqPrediction) median() float64 {
	n := len(p.makespans)
	return (p.makespans[(n-1)/2] + p.makespans[n/2]) / 2
}

// below counts the simulations whose makespan is below m: where a run's
// makespan falls among its simulations'.
func (p kqPrediction) below(m float64) int {
	k, _ := slices.BinarySearch(p.makespans, m)
	return k
}

// kqJitters is how many simulations a prediction averages.
const kqJitters = 16

// kqPredict simulates a run on the arrivals it had, with the scheduler mk
// makes (Kueue's walk, flavor.Kueue, or gpusched's steering,
// flavor.Steered), on the runs' quotas. The control plane takes time the
// simulator's instant decisions do not: Kueue reserves a job's quota a
// moment after its submission (the admission webhook, the Workload's
// creation, a scheduling cycle), and holds it longer than the job's work:
// from the reservation to the pod's binding (Kueue resumes the Job, the job
// controller creates its pod, the scheduler binds it) and from the pod's
// end to the release (the job controller batches pod events by a second,
// then Kueue finishes the Workload). The prediction measures these in the
// run (the reservation lag on the jobs the simulator starts at once):
// each simulated job arrives that lag after its submission, runs the two
// holding times longer than its work (on any type), and ends, as the run
// measures it, when its pod ends; the policy sees Gavel's rates, as the
// controller does. A single run's makespan hangs on which job the last
// free GPU goes to, so the prediction averages kqJitters simulations whose
// arrivals are jittered by half the lag either way, and gives the
// makespan's range.
func kqPredict(t *testing.T, jobs []kqJob, r kqRun, mk func(rates func(int) []float64) sim.EventScheduler, perHour float64) kqPrediction {
	t.Helper()
	n := float64(len(r.records))
	var startPad, finishPad float64
	for _, rec := range r.records {
		startPad += (rec.start - rec.admit) / n
		finishPad += (rec.release - rec.finish) / n
	}
	toSim := func(wall float64) float64 { return wall / perHour * 3600 }
	tab := gavel.Simulation()
	// The policy sees what the controller does: the rates it trusts
	// (tenancy.RateRules: over the fastest, at least 1/10 of it, four
	// digits), not the table's.
	rates := func(id int) []float64 {
		claimed := map[topology.GPUType]float64{}
		for _, ty := range kqTypes {
			claimed[ty], _ = tab.Throughput(jobs[id].key, ty)
		}
		trusted, _ := tenancy.RateRules{}.Trusted(claimed, kqTypes)
		out := make([]float64, len(kqTypes))
		for k, ty := range kqTypes {
			out[k] = trusted[ty]
		}
		return out
	}
	model := paddedModel{jobs: jobs, tab: tab, pad: toSim(startPad + finishPad)}
	simulate := func(lag float64, jitter *rand.Rand) *sim.Result {
		trace := make([]sim.Job, len(jobs))
		for i, j := range jobs {
			at := r.records[i].submit + lag
			if jitter != nil {
				at += (jitter.Float64() - 0.5) * lag
			}
			trace[i] = sim.Job{ID: i, Arrival: toSim(max(at, 0)), Key: perfmodel.JobKey{Model: fmt.Sprintf("kq-%d", i), ScaleFactor: 1}, Steps: j.steps}
		}
		res, err := sim.RunEvents(context.Background(), sim.EventConfig{Types: kqTypes, Capacity: []int{2 * kqQuota, 2 * kqQuota, 2 * kqQuota},
			Throughput: model, Scheduler: mk(rates)}, trace)
		must(t, err, "simulation")
		return res
	}
	// The reservation lag, on the jobs the simulator starts at once.
	var lag float64
	first := simulate(0, nil)
	immediate := 0
	for _, rec := range first.Records {
		if rec.Start == rec.Arrival {
			lag += r.records[rec.ID].admit - r.records[rec.ID].submit
			immediate++
		}
	}
	lag /= float64(max(immediate, 1))
	p := kqPrediction{admitLag: lag / perHour, startPad: startPad / perHour, finishPad: finishPad / perHour}
	jitter := rand.New(rand.NewPCG(kqSeed, 31))
	for k := range kqJitters {
		res := simulate(lag, jitter)
		if k == 0 {
			kqCompare(t, r, res, perHour)
		}
		var jct, firstSubmit, last float64 = 0, math.Inf(1), 0
		jcts := make([]float64, len(jobs))
		for _, rec := range res.Records {
			end := rec.Finish/3600 - finishPad/perHour // the pod's end, simulated hours
			submit := r.records[rec.ID].submit / perHour
			jct += end - submit
			jcts[rec.ID] = end - submit
			firstSubmit, last = min(firstSubmit, submit), max(last, end)
		}
		if k == 0 {
			p.fair = kqFairness(jobs, jcts)
		}
		mk := last - firstSubmit
		p.meanJCT += jct / n / kqJitters
		p.makespan += mk / kqJitters
		p.makespans = append(p.makespans, mk)
	}
	slices.Sort(p.makespans)
	return p
}

// kqFair is how evenly a run treated the jobs and the tenants: a job's
// slowdown is its JCT over its work's time alone on its fastest type
// (Gavel's rates); max-min fairness raises the smallest normalized
// throughput, the reciprocal of the largest slowdown.
type kqFair struct {
	// tenant is each ClusterQueue's mean slowdown (team-a, team-b).
	tenant [2]float64
	// worst is the largest slowdown, jain Jain's index over the jobs'
	// slowdowns (1: all equal).
	worst, jain float64
}

func (f kqFair) String() string {
	return fmt.Sprintf("slowdown team-a %.2f, team-b %.2f, worst %.1f, Jain %.3f", f.tenant[0], f.tenant[1], f.worst, f.jain)
}

// kqFairness measures a run's fairness from its jobs' JCTs (hours).
func kqFairness(jobs []kqJob, jct []float64) kqFair {
	tab := gavel.Simulation()
	var f kqFair
	var n [2]float64
	var sum, sq float64
	for i, j := range jobs {
		best := 0.0
		for _, ty := range kqTypes {
			v, _ := tab.Throughput(j.key, ty)
			best = max(best, v)
		}
		sd := jct[i] / (j.steps / best / 3600)
		q := kqQueueOf(j.id)
		f.tenant[q] += sd
		n[q]++
		f.worst = max(f.worst, sd)
		sum += sd
		sq += sd * sd
	}
	for q := range f.tenant {
		f.tenant[q] /= max(n[q], 1)
	}
	f.jain = sum * sum / (float64(len(jobs)) * max(sq, 1e-300))
	return f
}

// kqQueues are the runs' ClusterQueues as the flavor model's queues.
func kqQueues() []flavor.Queue {
	var queues []flavor.Queue
	for _, n := range []string{"team-a", "team-b"} {
		q := flavor.Queue{Name: n}
		for k, ty := range kqTypes {
			q.Flavors = append(q.Flavors, flavor.Flavor{Name: string(ty), Type: k, Nominal: kqQuota, BorrowingLimit: flavor.NoLimit, LendingLimit: flavor.NoLimit})
		}
		queues = append(queues, q)
	}
	return queues
}

func kqQueueOf(id int) int { return id % 2 }

// paddedModel runs each job of a prediction (model "kq-<index>") for its
// work at Gavel's rate on the type, plus pad seconds.
type paddedModel struct {
	jobs []kqJob
	tab  *perfmodel.Table
	pad  float64
}

func (m paddedModel) Throughput(k perfmodel.JobKey, t topology.GPUType) (float64, error) {
	id, err := strconv.Atoi(strings.TrimPrefix(k.Model, "kq-"))
	if err != nil || id < 0 || id >= len(m.jobs) {
		return 0, fmt.Errorf("%w: %s", perfmodel.ErrUnknownJob, k.Model)
	}
	j := m.jobs[id]
	r, err := m.tab.Throughput(j.key, t)
	if err != nil || r <= 0 {
		return r, err
	}
	return j.steps / (j.steps/r + m.pad), nil
}

// kqCompare logs how a run differs from its simulation: the jobs on each
// type, the mean wait before a job starts, the jobs whose finish differs
// most.
func kqCompare(t *testing.T, r kqRun, res *sim.Result, perHour float64) {
	t.Helper()
	types := map[topology.GPUType][2]int{}
	var wait, simWait, latency, toAdmit, toStart float64
	immediate := 0
	type diff struct {
		id         int
		real, simu float64
		rt, st     topology.GPUType
	}
	var diffs []diff
	for _, rec := range res.Records {
		real := r.records[rec.ID]
		st := topology.GPUType("?")
		for k, g := range rec.GPUSeconds {
			if g > 0 {
				st = res.Types[k]
			}
		}
		c := types[real.typ]
		c[0]++
		types[real.typ] = c
		c = types[st]
		c[1]++
		types[st] = c
		wait += (real.start - real.submit) / perHour
		if rec.Start == rec.Arrival {
			latency += (real.start - real.submit) / perHour
			toAdmit += real.admit - real.submit
			toStart += real.start - real.admit
			immediate++
		}
		simWait += (rec.Start - rec.Arrival) / 3600
		diffs = append(diffs, diff{rec.ID, (real.finish - real.submit) / perHour, (rec.Finish - rec.Arrival) / 3600, real.typ, st})
	}
	n := float64(len(res.Records))
	slices.SortFunc(diffs, func(a, b diff) int { return cmp.Compare(math.Abs(b.real-b.simu), math.Abs(a.real-a.simu)) })
	m := float64(max(immediate, 1))
	t.Logf("  jobs per type (run, simulation): %v; mean wait %.2f h (simulation %.2f h); %d jobs the simulation starts at once waited %.3f h on average (%.2f s to Kueue's reservation, %.2f s more to the pod's binding); largest JCT differences (h): %+v",
		types, wait/n, simWait/n, immediate, latency/m, toAdmit/m, toStart/m, diffs[:min(5, len(diffs))])
}
