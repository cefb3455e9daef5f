package admission

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime"
)

// splitRun plays the split of issue #40 (item 1): on 8 V100s, tenant att
// runs its work as k jobs of 1 GPU (k = 1: honestly, as one job of 4
// GPUs), each victim one job of 4 GPUs, for 20 rounds.
func splitRun(t *testing.T, policy string, k int) *playground {
	t.Helper()
	objs := victimPods()
	if k == 1 {
		objs = append(objs, gatedPod("att", "job", 4, rates("v100=1")))
	} else {
		for i := range k {
			objs = append(objs, runtime.Object(gatedPod("att", fmt.Sprintf("job-%02d", i), 1, rates("v100=1"))))
		}
	}
	p := newPlayground(t, policy, "", nil, objs...)
	p.run(20, nil)
	return p
}

// Splitting its work into more jobs wins a tenant nothing under the
// default policy (per-tenant water filling, DefaultPolicy): with 4, 8 or
// 32 jobs the attacker gets its honest share, 40 GPU-rounds, plus at most
// one round of its jobs, and each victim loses at most one round of its
// 4-GPU job. Under max-min fairness, whose unit is the job, the same
// split wins 76, 112 and 148 GPU-rounds (48%, 70%, 92%; victims 28, 16
// and 4 each): the "before", which max-min fairness keeps, as
// documented (per-job).
func TestSplitWinsNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("single-goroutine test: nothing for -race to find, and slow under it")
	}
	const share = 40 // GPU-rounds: 8 GPUs x 20 rounds / 4 tenants
	honest := splitRun(t, DefaultPolicy, 1)
	assert.Equal(t, share, honest.held["att"], "honest: %v", honest)
	assert.Equal(t, []int{share, share, share}, honest.victims(), "honest: %v", honest)
	perJob := map[int][2]int{4: {76, 28}, 8: {112, 16}, 32: {148, 4}} // attacker, each victim
	var rows []string
	for _, k := range []int{4, 8, 32} {
		def := splitRun(t, DefaultPolicy, k)
		mmf := splitRun(t, "max-min-fairness", k)
		rows = append(rows, fmt.Sprintf("| split into %d jobs | %s: %v | %s: %v |", k, "max-min-fairness", mmf, DefaultPolicy, def))
		assert.LessOrEqual(t, def.held["att"], share+4, "%d jobs: the attacker gained one round or more: %v", k, def)
		for i, v := range def.victims() {
			assert.GreaterOrEqual(t, v, share-4, "%d jobs: victim %d lost more than a round: %v", k, i+1, def)
		}
		assert.Zero(t, def.over+def.admittedOver, "%v", def)
		assert.Equal(t, perJob[k][0], mmf.held["att"], "max-min fairness is per job: %v", mmf)
		assert.Equal(t, []int{perJob[k][1], perJob[k][1], perJob[k][1]}, mmf.victims(), "%v", mmf)
	}
	t.Logf("attack | before (max-min-fairness) | after (%s)\n%s", DefaultPolicy, strings.Join(rows, "\n"))
}
