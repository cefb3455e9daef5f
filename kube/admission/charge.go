package admission

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

// The GPU time a workload holds after its lease ended is charged to it
// (issue #40, item 5). A preempted workload's pods keep their GPUs for
// the controller's grace (Config.Grace: they run on, annotated), then
// for their deletion's grace (at most Config.MaxDeletionGrace), or until
// force-deleted (grace.go); no other job can use those GPUs meanwhile.
//
// The controller follows each such workload from the moment its lease
// ends (its preemption: the round's, a grown workload's, or the
// enforcement of one found running without admission) until its pods are
// gone: at every count (each sweep, every second under Run, and each
// round) it adds up the GPUs its pods held at the count before (bound to
// a ready node, not ended, by the type of their node) over the time since
// then, within the round's window (from the round's start on the wall
// clock, for the round's length). A round is reported to the core when it
// is over, at the start of the next (before anything changes the core's
// jobs, and before the core's next round, which so sees the charge): the
// jobs it ran, written at its start (ctrlState.Report, saved with the
// core's snapshot), and scheduler.RoundReport.Held, what each followed
// workload's pods held in it, per type, at most its GPUs for the round (a
// workload the round ran is not charged again for what it held after its
// lease, which is its run: heldRan; a workload the core does not know, or
// a type it no longer has, is not charged). The time is
// that of the counts: a pod that went between two counts is charged to
// the later one (at most a second late under Run). The core planned the
// round that preempted them before it did, on the GPUs their pods still
// held: a workload that round admitted is charged its round less the time
// its pods were not all bound while followed workloads' pods held GPUs of
// its type (it waited for them). A workload admitted
// again is followed only for what its terminating pods hold beyond its
// lease (its lease covers its pods but those).
//
// A workload that has a lease may hold more than it (review of #40): a
// tenant deletes its admitted Job's pods (or lowers its parallelism and
// restores it), the job controller replaces them at once, and the old
// pods hold their GPUs until gone (at most Config.MaxDeletionGrace and
// forceSlack), while the new ones take GPUs the core gave to others. Such
// a workload is followed from the first count that finds it with
// terminating pods (followBeyond, by the controller's records) for what
// its bound pods, live and terminating, hold past its lease (at most
// what the terminating ones hold: beyondLease); that time is charged to
// it (RoundReport.Held, beside its run), the GPUs are out of the next
// round's plan while held (heldGPUs), and a workload admitted meanwhile
// waits on them as on those of a workload whose lease ended.
//
// The followed workloads are in memory only: after a restart, those whose
// pods still hold GPUs are followed again from the first round
// (terminating pods, preempted pods in their grace) or count.

// afterLease is one workload followed after its lease ended, or while it
// has one for what its terminating pods hold beyond it.
type afterLease struct {
	// index is its pods' key in the pod cache's workload index.
	index string
	// lease is the GPUs its lease covers (0: the lease ended), of type
	// typ, in namespace ns: while it has one, only what its terminating
	// pods hold beyond it is counted (beyondLease).
	lease int
	typ   topology.GPUType
	ns    string
	// gpus is what its pods held at the last count, by type.
	gpus map[topology.GPUType]int
	// held is the GPU-seconds held in the round's window so far after
	// its lease, by type; beyond, those held beyond its lease.
	held, beyond map[topology.GPUType]float64
}

// admittedWait is a workload the round admitted, whose pods may wait for
// GPUs that workloads followed after their leases still hold.
type admittedWait struct {
	index string
	typ   topology.GPUType
	// waiting: at the last count, some of its pods were not bound (or it
	// had none yet) while followed workloads' pods held GPUs of its type.
	waiting bool
	// waited is the time it waited so, in the round's window, in seconds.
	waited float64
}

// chargeWindow is the wall-clock time of the round being measured.
type chargeWindow struct {
	start  time.Time
	length time.Duration
}

// clip returns t within the window.
func (w chargeWindow) clip(t time.Time) time.Time {
	if end := w.start.Add(w.length); t.After(end) {
		return end
	}
	if t.Before(w.start) {
		return w.start
	}
	return t
}

// podIndex is the key of a workload's pods in the pod cache's workload
// index.
func (w *workload) podIndex() string {
	if w.kind == kindJob && w.job != nil {
		return jobPodIndex(w.job.Namespace, w.job.UID)
	}
	return w.key
}

// follow starts following a workload whose lease ended, or goes on
// following it so if it was followed for what it held beyond its lease.
func (c *Controller) follow(key, index string) {
	a := c.afterLease[key]
	if a == nil {
		a = &afterLease{index: index, held: map[topology.GPUType]float64{}, beyond: map[topology.GPUType]float64{}}
		c.afterLease[key] = a
	} else if a.lease == 0 {
		return
	}
	a.lease = 0
	a.gpus = c.holds(a)
}

// leased follows a workload that has a lease (of type typ, in namespace
// ns; the core's size of the workload) for what its terminating pods hold
// beyond it: from now on, whether or not it was followed (after an
// earlier lease, or beyond this one). A workload the core does not know
// is not followed.
func (c *Controller) leased(key, index, ns string, typ topology.GPUType) {
	lease := c.leaseGPUs(key)
	if lease <= 0 {
		delete(c.afterLease, key)
		return
	}
	a := c.afterLease[key]
	if a == nil {
		a = &afterLease{index: index, held: map[topology.GPUType]float64{}, beyond: map[topology.GPUType]float64{}}
		c.afterLease[key] = a
	}
	a.lease, a.typ, a.ns = lease, typ, ns
	a.gpus = c.holds(a)
}

// leaseGPUs returns the GPUs an admitted workload's lease covers: its
// size in the core (what it is charged for), 0 if the core does not know
// it.
func (c *Controller) leaseGPUs(key string) int {
	st, err := c.sched.Status(key)
	if err != nil {
		return 0
	}
	return st.Spec.GPUs
}

// holds returns what a followed workload's pods hold now, by type: all
// its pods that hold GPUs after its lease (podsHold), its terminating
// pods' GPUs beyond its lease while it has one (beyondLease).
func (c *Controller) holds(a *afterLease) map[topology.GPUType]int {
	if a.lease == 0 {
		return c.podsHold(a.index)
	}
	out := map[topology.GPUType]int{}
	for _, g := range c.beyondLease(a.ns, a.index, a.lease, a.typ) {
		out[g.typ] += g.gpus
	}
	return out
}

// podsHold returns the GPUs the pods of a workload (by their index key)
// hold now, by the type of their nodes: bound to a ready node of the
// controller's, not ended (terminating or not).
func (c *Controller) podsHold(index string) map[topology.GPUType]int {
	out := map[topology.GPUType]int{}
	for _, p := range c.podsOf(index) {
		n, ok := c.nodes[p.Spec.NodeName]
		if p.Spec.NodeName == "" || !ok || !n.ready || terminal(p) {
			continue
		}
		if g, err := model.PodGPUs(p, c.cfg.Resource); err == nil && g > 0 {
			out[n.typ()] += g
		}
	}
	return out
}

// followBeyond follows, for what they hold beyond its lease, each
// admitted workload (by the controller's record) that has terminating
// pods and is not followed yet: a tenant may delete its admitted Job's
// pods, which the job controller replaces at once while they hold their
// GPUs until gone. (They may hold nothing beyond it yet: while the pods
// that replace them wait.)
func (c *Controller) followBeyond() {
	for _, p := range c.terminatingPods() {
		key, owner := c.podWorkload(p)
		if c.afterLease[key] != nil {
			continue
		}
		rec := c.state.Admitted[key]
		if rec == nil || rec.DeleteAfter != "" || rec.NS != p.Namespace || owner != "" && !rec.has(owner) {
			continue // not admitted (a preempted one is followed already)
		}
		// The first index key is the workload's pods' (jobPodIndex for a
		// Job's; a Job's pod has Sweep's second, jobOwnedIndex).
		if index, err := podWorkloadIndex(p); err == nil && len(index) > 0 {
			c.leased(key, index[0], rec.NS, rec.Type)
		}
	}
}

// countAfterLease adds to each followed workload what its pods held since
// the last count (after its lease, or beyond it), and to each workload
// the round admitted the time it waited, within the round's window; and
// counts them again, following the admitted workloads whose terminating
// pods may hold GPUs beyond their leases.
func (c *Controller) countAfterLease(now time.Time) {
	d := c.window.clip(now).Sub(c.window.clip(c.lastCount)).Seconds()
	c.lastCount = now
	if d > 0 {
		for _, a := range c.afterLease {
			into := a.held
			if a.lease > 0 {
				into = a.beyond
			}
			for t, g := range a.gpus {
				into[t] += float64(g) * d
			}
		}
		for _, w := range c.admittedWaits {
			if w.waiting {
				w.waited += d
			}
		}
	}
	for _, a := range c.afterLease {
		a.gpus = c.holds(a)
	}
	c.followBeyond()
	c.countWaits()
}

// countWaits marks the workloads the round admitted that wait for GPUs
// while followed workloads hold some of their type (after their leases,
// or beyond them): some of their pods not bound (or none created yet).
// Their runs are charged without that time: the followed workloads are
// charged for it.
func (c *Controller) countWaits() {
	held := map[topology.GPUType]int{}
	for _, a := range c.afterLease {
		for t, g := range a.gpus {
			held[t] += g
		}
	}
	for _, w := range c.admittedWaits {
		w.waiting = held[w.typ] > 0 && !c.allBound(w.index) // the pods are read only then
	}
}

// allBound reports whether a workload has pods, not ended or going, and
// all of them bound to nodes.
func (c *Controller) allBound(index string) bool {
	live := 0
	for _, p := range c.podsOf(index) {
		if terminal(p) || p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			return false
		}
		live++
	}
	return live > 0
}

// reportLast reports the last round, now over, to the core: the jobs it
// ran, as written at its start, and the GPU time the workloads followed
// after their leases held in it. It starts the window of the next round
// at now. A report the core refuses for an entry of its Held part
// (scheduler.ReportError naming scheduler.FieldHeld) is sent again
// without it (the runs are credited, the held time not); one it refuses
// otherwise is logged, not sent again (the core took none of it, and
// credits the round in full at the next).
func (c *Controller) reportLast(now time.Time) {
	c.countAfterLease(now)
	rep := c.state.Report
	c.state.Report = nil
	if rep != nil {
		c.withoutWaits(rep)
		rep.Held = c.heldInRound(rep)
		c.sendReport(rep)
	}
	for key, a := range c.afterLease {
		clear(a.held)
		clear(a.beyond)
		if len(a.gpus) == 0 {
			delete(c.afterLease, key) // its pods are gone
		}
	}
	clear(c.admittedWaits)
	c.window = chargeWindow{start: now, length: time.Duration(c.cfg.roundSeconds() * float64(time.Second))}
}

// sendReport sends a round's report to the core, and again without its
// Held part if the core refuses an entry of that part.
func (c *Controller) sendReport(rep *scheduler.RoundReport) {
	err := c.sched.Report(*rep)
	var re *scheduler.ReportError
	if errors.As(err, &re) && re.Field == scheduler.FieldHeld {
		c.log.Warn("report: the GPU time held after leases is not charged", "round", rep.Start, "err", err)
		rep.Held = nil
		err = c.sched.Report(*rep)
	}
	if err != nil {
		c.log.Warn("report", "round", rep.Start, "err", err)
	}
}

// withoutWaits takes from the runs of a round's report the time the
// workloads it admitted waited for GPUs that followed workloads held
// (those are charged for it), and their steps in proportion.
func (c *Controller) withoutWaits(rep *scheduler.RoundReport) {
	for i := range rep.Ran {
		r := &rep.Ran[i]
		w := c.admittedWaits[r.Job]
		if w == nil || w.waited <= 0 || r.Seconds <= 0 {
			continue
		}
		s := max(0, r.Seconds-w.waited)
		r.Steps *= s / r.Seconds
		r.Seconds = s
	}
}

// heldInRound returns the Held part of a round's report: for each
// followed workload the core knows, the GPU-seconds its pods held on each
// type the core has, beyond its lease while it had one and, if the round
// did not run it, after its lease (what a workload the round ran held
// after its lease is its run: heldRan), at most its GPUs for the round in
// all.
func (c *Controller) heldInRound(rep *scheduler.RoundReport) []scheduler.Held {
	ran := make(map[string]bool, len(rep.Ran))
	for _, r := range rep.Ran {
		ran[r.Job] = true
	}
	var out []scheduler.Held
	for _, key := range slices.Sorted(maps.Keys(c.afterLease)) {
		a := c.afterLease[key]
		held := maps.Clone(a.beyond)
		if !ran[key] {
			for t, v := range a.held {
				held[t] += v
			}
		}
		if len(held) == 0 {
			continue
		}
		st, err := c.sched.Status(key)
		if err != nil {
			continue
		}
		left := c.window.length.Seconds() * float64(st.Spec.GPUs)
		for _, t := range slices.Sorted(maps.Keys(held)) {
			v := min(held[t], left)
			if _, ok := c.products[t]; !ok || v <= 0 {
				continue
			}
			out = append(out, scheduler.Held{Job: key, Type: t, GPUSeconds: v})
			left -= v
		}
	}
	return out
}

// followAfterRound follows the workloads the round admitted for what
// their terminating pods hold beyond their leases (their leases cover
// their pods but those), and those of the round whose pods hold GPUs
// without a lease that no preemption of this process began (after a
// restart, or a tenant's own deletion): terminating pods (c.hold) and
// preempted pods in their grace (records with DeleteAfter). It watches
// the workloads the round admitted newly (started) for waits: the core
// planned the round before its preemptions, on GPUs their pods still
// held (a later round plans without the GPUs terminating pods hold).
func (c *Controller) followAfterRound(present map[string]*workload, started []string) {
	defer c.countWaits()
	for _, key := range started {
		if w := present[key]; w != nil && w.admitted != "" {
			c.admittedWaits[key] = &admittedWait{index: w.podIndex(), typ: w.admitted}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(c.afterLease)) {
		if w := present[key]; w != nil && w.admitted != "" {
			c.leased(key, w.podIndex(), w.ns, w.admitted)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(c.hold.until)) {
		if w := present[key]; w != nil && w.admitted == "" {
			c.follow(key, w.podIndex())
		}
	}
	for _, key := range slices.Sorted(maps.Keys(c.state.Admitted)) {
		if w := present[key]; w != nil && w.admitted == "" && c.state.Admitted[key].DeleteAfter != "" {
			c.follow(key, w.podIndex())
		}
	}
	c.followBeyond()
}
