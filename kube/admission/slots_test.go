package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// slotsTenancy: nine tenants of weight 1 and the tenancy's maxJobs at 16,
// each tenant's at 2: the defaults (2048 / 256) scaled down 128 times,
// so that eight tenants at their maxJobs fill the tenancy's.
func slotsTenancy() string {
	var b strings.Builder
	b.WriteString("maxJobs: 16\ntenants:\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "- {name: t%d, namespaces: [t%d], maxJobs: 2}\n", i, i)
	}
	return b.String()
}

// The tenancy's maxJobs is shared by the tenants, water-filled by their
// weights: eight older tenants with three 1-GPU jobs each hold 2 slots
// each, all 16; the ninth tenant's job, created before round 1, enters
// the rounds at round 1 and runs. Before the fix (the 16 slots to the
// oldest jobs of any tenant) it waited outside for good. The slot it takes
// is one of an older tenant's jobs that waits in the rounds and never ran
// (not one that runs, nor one that ran): it leaves the rounds, back to
// waiting outside, with an event that says why.
func TestNewTenantEntersAFullTenancy(t *testing.T) {
	p := fullTenancy(t)
	entered, ran := -1, 0
	for r := range 12 {
		if r == 1 {
			p.create(gatedPod("t9", "job", 1, rates("v100=1")))
		}
		res := p.round(r)
		assert.LessOrEqual(t, len(p.c.sched.Jobs()), 16, "round %d: the rounds hold at most maxJobs (none of them runs over it)", r)
		in := slices.Contains(p.c.sched.Jobs(), "pod/t9/job")
		if in && entered < 0 {
			entered = r
		}
		if _, ok := res.Admitted["pod/t9/job"]; ok {
			ran++
		}
		if r < 1 {
			assert.Len(t, res.Waiting, 8, "round %d: each older tenant's third job waits", r)
		}
	}
	t.Logf("the new tenant's job entered at round %d (created before round 1), ran %d of 11 rounds (%d GPU-rounds of t9)", entered, ran, p.held["t9"])
	assert.Equal(t, 1, entered, "the new tenant's job enters the rounds at once")
	assert.GreaterOrEqual(t, ran, 9, "9 tenants share 8 GPUs: the new one runs 8 rounds of 9, within one")
	assert.Positive(t, reasons(t, p.cs, "t9")[ReasonAdmitted])
	evs := reasonMessages(t, p.cs, ReasonWaiting)
	require.NotEmpty(t, evs)
	var left []string
	for _, m := range evs {
		assert.Contains(t, m, "maxJobs", m)
		if strings.Contains(m, "left the rounds") {
			left = append(left, m)
		}
	}
	// The parts of 16 over 9 tenants: t9 1, t1 to t7 2, t8 1 (waterFill):
	// t8's job that waited in the rounds, and never ran, left them for
	// t9's.
	require.Len(t, left, 1, "%q", evs)
	assert.True(t, strings.HasPrefix(left[0], "t8/"), left[0])
	t.Log(left[0])
}

// fullTenancy is the playground of slotsTenancy with eight tenants of
// three 1-GPU jobs each; the policy solves at every change of the jobs
// (not once in 1920 s), so that a new tenant's share shows from the
// round it enters.
func fullTenancy(t *testing.T) *playground {
	var objs []runtime.Object
	for i := 1; i <= 8; i++ {
		for j := range 3 {
			objs = append(objs, gatedPod(fmt.Sprintf("t%d", i), fmt.Sprintf("job-%d", j), 1, rates("v100=1")))
		}
	}
	return newPlayground(t, DefaultPolicy, slotsTenancy(), func(cfg *Config) { cfg.MinResetInterval = -1 }, objs...)
}

// A job that ran never leaves the rounds to make room: it would come back
// as a new job, without the time it ran (a head start). The ninth tenant
// comes before round 3, when each older tenant's jobs in the rounds have
// all run: none leaves, and the rounds hold 17 (the tenancy's 16, and the
// new tenant's part of one) until a job ends; the new tenant's job runs
// at once all the same. Its job deleted before round 7 (and t8's third,
// which waited outside), the rounds hold 16 again. No job's attained time
// ever goes down. Before the fix t8's job-1, which had run a round (360
// s), left the rounds at round 3 and came back at round 7 as a new job,
// with 0 s.
func TestJobThatRanStaysInTheRounds(t *testing.T) {
	p := fullTenancy(t)
	attained := map[string]float64{}
	ran := 0
	for r := range 12 {
		switch r {
		case 3:
			p.create(gatedPod("t9", "job", 1, rates("v100=1")))
		case 7:
			require.NoError(t, p.cs.CoreV1().Pods("t9").Delete(p.ctx, "job", metav1.DeleteOptions{}))
			require.NoError(t, p.cs.CoreV1().Pods("t8").Delete(p.ctx, "job-2", metav1.DeleteOptions{}))
		}
		res := p.round(r)
		if _, ok := res.Admitted["pod/t9/job"]; ok {
			ran++
		}
		for _, k := range p.c.sched.Jobs() {
			st, err := p.c.sched.Status(k)
			require.NoError(t, err)
			got := 0.0
			for _, v := range st.Attained {
				got += v
			}
			assert.GreaterOrEqual(t, got, attained[k], "round %d: %s lost the time it ran (%v s, %d rounds)", r, k, got, st.Rounds)
			attained[k] = max(attained[k], got)
		}
		want := 16
		if r >= 3 && r < 7 {
			want = 17
		}
		assert.Len(t, p.c.sched.Jobs(), want, "round %d", r)
	}
	assert.GreaterOrEqual(t, ran, 3, "the new tenant's job runs 3 or 4 of its 4 rounds")
	for _, m := range reasonMessages(t, p.cs, ReasonWaiting) {
		assert.NotContains(t, m, "left the rounds", "no job that ran leaves them")
	}
}

// Jobs that run never keep a tenant out: four tenants' 2-GPU jobs run on
// all 8 GPUs and fill the tenancy's maxJobs of 4; a fifth tenant's job
// enters at the next round (the rounds then hold 5: none of the others
// waits in them to make room, each tenant has one job, its part), and it
// runs its share: 5 tenants, 4 of whose jobs run each round.
func TestRunningJobsNeverKeepATenantOut(t *testing.T) {
	var b strings.Builder
	b.WriteString("maxJobs: 4\ntenants:\n")
	var objs []runtime.Object
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, "- {name: t%d, namespaces: [t%d]}\n", i, i)
		if i < 5 {
			objs = append(objs, gatedPod(fmt.Sprintf("t%d", i), "job", 2, rates("v100=1")))
		}
	}
	p := newPlayground(t, DefaultPolicy, b.String(), func(cfg *Config) { cfg.MinResetInterval = -1 }, objs...)
	ran := 0
	for r := range 12 {
		if r == 2 {
			p.create(gatedPod("t5", "job", 2, rates("v100=1")))
		}
		res := p.round(r)
		switch {
		case r < 2:
			assert.Len(t, res.Admitted, 4, "round %d: the limit is full of running jobs", r)
		default:
			assert.Len(t, p.c.sched.Jobs(), 5, "round %d: the new tenant's job is in the rounds, and none left them", r)
		}
		if _, ok := res.Admitted["pod/t5/job"]; ok {
			ran++
		}
	}
	t.Logf("the fifth tenant's job ran %d of 10 rounds", ran)
	assert.GreaterOrEqual(t, ran, 7, "5 tenants share 8 GPUs in 2-GPU jobs: 4 of 5 rounds, within one")
}

// reasonMessages lists the messages of the events of a reason, in every
// namespace.
func reasonMessages(t *testing.T, cs *fake.Clientset, reason string) []string {
	t.Helper()
	evs, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, e := range evs.Items {
		if e.Reason == reason {
			out = append(out, e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name+": "+e.Message)
		}
	}
	return out
}

// waterFill's parts, by hand: a tenant that needs fewer than its share
// leaves the rest to the others; whole jobs go to the largest fractions
// (ties by name); weights count.
func TestWaterFill(t *testing.T) {
	ones := func(names ...string) map[string]float64 {
		out := map[string]float64{}
		for _, n := range names {
			out[n] = 1
		}
		return out
	}
	nine := map[string]int{"t9": 1}
	for i := 1; i <= 8; i++ {
		nine[fmt.Sprintf("t%d", i)] = 2
	}
	w9 := ones("t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9")
	// t9 needs 1 of its 16/9; the other 15 go to t1..t8 by 15/8 = 1.875:
	// one each, and the seven left to t1..t7.
	assert.Equal(t, map[string]int{"t1": 2, "t2": 2, "t3": 2, "t4": 2, "t5": 2, "t6": 2, "t7": 2, "t8": 1, "t9": 1}, waterFill(16, nine, w9))
	assert.Equal(t, map[string]int{"a": 2, "b": 4, "c": 4}, waterFill(10, map[string]int{"a": 2, "b": 100, "c": 100}, ones("a", "b", "c")))
	// 3:1 of 10 is 7.5 and 2.5: the half job to a (by name).
	assert.Equal(t, map[string]int{"a": 8, "b": 2}, waterFill(10, map[string]int{"a": 100, "b": 100}, map[string]float64{"a": 3, "b": 1}))
	assert.Equal(t, map[string]int{"a": 3, "b": 5}, waterFill(2048, map[string]int{"a": 3, "b": 5}, ones("a", "b")), "room for all")
	assert.Empty(t, waterFill(0, map[string]int{"a": 3}, ones("a")))
	// 2048 over nine tenants of 256 waiting each: 227 or 228 each.
	big := map[string]int{}
	for n := range w9 {
		big[n] = 256
	}
	sum := 0
	for _, p := range waterFill(2048, big, w9) {
		assert.InDelta(t, 2048.0/9, p, 1)
		sum += p
	}
	assert.Equal(t, 2048, sum)
}

// waterFill's invariants on any demands and weights: the parts add up to
// min(limit, the demands), none exceeds its demand, and a tenant held
// below its demand has, per weight, at least what any other has, but for
// a job of rounding each: (q-1)/w_m <= (p+1)/w_n.
func FuzzWaterFill(f *testing.F) {
	f.Add(uint16(16), []byte{2, 2, 2, 2, 2, 2, 2, 2, 1})
	f.Add(uint16(10), []byte{100, 100, 2})
	f.Add(uint16(0), []byte{3})
	f.Fuzz(func(t *testing.T, limit uint16, tenants []byte) {
		if len(tenants) > 40 {
			tenants = tenants[:40]
		}
		demand, weight := map[string]int{}, map[string]float64{}
		sum := 0
		for i, b := range tenants {
			n := fmt.Sprintf("t%02d", i)
			demand[n] = int(b)
			weight[n] = []float64{1, 0.5, 2, 3, 0.01}[i%5]
			sum += int(b)
		}
		part := waterFill(int(limit), demand, weight)
		got := 0
		for n, p := range part {
			require.GreaterOrEqual(t, p, 0, n)
			require.LessOrEqual(t, p, demand[n], n)
			got += p
		}
		require.Equal(t, min(int(limit), sum), got)
		for n, p := range part {
			if p >= demand[n] {
				continue
			}
			for m, q := range part {
				require.LessOrEqual(t, float64(q-1)/weight[m], float64(p+1)/weight[n]+1e-9, "%s has %d of %d, %s %d", n, p, demand[n], m, q)
			}
		}
	})
}
