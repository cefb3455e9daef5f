package admission

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// arrivalRun: under FIFO, the victims' three 4-GPU pods and tenant att's
// pod group of two 4-GPU members enter the rounds in the same round (all
// created between rounds 0 and 1, the group completed last). With
// backdate, the group's first member is a placeholder att created before
// round 0 (the group waits incomplete until its second member).
func arrivalRun(t *testing.T, backdate bool) *playground {
	t.Helper()
	p := newPlayground(t, "fifo", "", nil)
	if backdate {
		p.create(groupMember("att", "g", "g-0", 4))
	}
	p.tenant = func(r int) {
		if r != 0 {
			return
		}
		for _, v := range victimPods() {
			p.create(v)
		}
		if !backdate {
			p.create(groupMember("att", "g", "g-0", 4))
		}
		p.create(groupMember("att", "g", "g-1", 4))
	}
	p.run(20, nil)
	return p
}

// A pod group arrives when it becomes complete: its FIFO place is the
// creation of the member that completed it, not that of a placeholder
// member created long before. Before the fix the placeholder backdated
// the group ahead of the victims' jobs, and FIFO gave it the cluster for
// good.
func TestGroupArrivesWhenComplete(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	honest := arrivalRun(t, false)
	p := arrivalRun(t, true)
	t.Logf("pod group backdated by a placeholder member, under FIFO: %v (honest: %v)", p, honest)
	assert.Zero(t, honest.held["att"], "honest: the group is last in FIFO order: %v", honest)
	assert.Equal(t, []int{76, 76, 0}, honest.victims(), "honest: %v", honest)
	assert.Equal(t, honest.held, p.held, "the placeholder changed the group's place")
}

// A group arrives at the creation of the member that completed it (the
// min-th oldest), the newest while incomplete.
func TestGroupArrival(t *testing.T) {
	at := func(secs ...int64) []*corev1.Pod {
		var out []*corev1.Pod
		for _, s := range secs {
			p := &corev1.Pod{}
			p.CreationTimestamp = metav1.NewTime(time.Unix(s, 0))
			out = append(out, p)
		}
		return out
	}
	assert.Equal(t, int64(9), arrival(at(5, 1, 9), 3))
	assert.Equal(t, int64(5), arrival(at(5, 1, 9), 2))
	assert.Equal(t, int64(9), arrival(at(5, 1, 9), 4), "incomplete")
	assert.Equal(t, int64(1), arrival(at(5, 1, 9), 0))
	assert.Zero(t, arrival(nil, 2))
}
