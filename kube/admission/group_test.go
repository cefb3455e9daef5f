package admission

import (
	"testing"

	"github.com/gpusched/gpusched/perfmodel/learn"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With --learn a workload's group is its program as the cluster sees it
// (model.ProgramGroup: namespace, images, commands, GPU count): a is
// measured 3x faster on V100 than K80, b (another namespace, the same
// container) 1.2x; then a2 arrives in a's namespace and x in b's, both
// the same container: before either runs or reports, a2 starts from
// a's measurements, x from b's, never the other namespace's.
func TestProgramGroupsInAdmission(t *testing.T) {
	l, err := learn.New(learn.Config{})
	require.NoError(t, err)
	p := newPlayground(t, DefaultPolicy, "", func(cfg *Config) { cfg.Estimator = l },
		gatedPod("v1", "a", 4, nil), gatedPod("v2", "b", 4, nil), gpuNode("k1", "Tesla-K80", 4))
	truth := map[string]map[topology.GPUType]float64{
		"pod/v1/a": {topology.V100: 3, topology.K80: 1}, "pod/v2/b": {topology.V100: 1.2, topology.K80: 1},
	}
	runAtTruth(t, p, truth, map[string]float64{}, 0, 12)
	for _, pod := range []struct{ ns, name string }{{"v1", "a2"}, {"v2", "x"}} {
		_, err := p.cs.CoreV1().Pods(pod.ns).Create(p.ctx, gatedPod(pod.ns, pod.name, 4, nil), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, p.c.SyncCaches(p.ctx))
	// Past the next refit of the population, which takes the groups.
	p.round(12 + 5)
	for key, want := range map[string]float64{"pod/v1/a2": 3, "pod/v2/x": 1.2} {
		st, err := p.c.Scheduler().Status(key)
		require.NoError(t, err, key)
		assert.NotEmpty(t, st.Spec.Group, key)
		byType := map[topology.GPUType]learn.Estimate{}
		for _, e := range st.Estimates {
			byType[e.Type] = e
		}
		v, k := byType[topology.V100], byType[topology.K80]
		assert.Equal(t, learn.SourceGroup, v.Source, "%s on V100: %+v", key, v)
		assert.Equal(t, learn.SourceGroup, k.Source, "%s on K80: %+v", key, k)
		assert.InDelta(t, want, v.Mean/k.Mean, 0.15*want, "%s: V100/K80 is its own namespace's program's", key)
	}
}
