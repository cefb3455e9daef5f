package admission

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Every policy PolicyByName knows runs rounds over jobs of two tenants
// (weighted by the tenancy) with queues of their own weights and expected
// run times, and keeps the invariants.
func TestEveryPolicy(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4))
			for i := range 5 {
				ns := fmt.Sprint("ns", i%2)
				p := gatedPod(ns, fmt.Sprint("j", i), 1+i%2, map[string]string{
					model.AnnotationThroughput: fmt.Sprintf("v100=%d,k80=1", 2+i)})
				p.Labels = map[string]string{LabelQueue: fmt.Sprintf("q%d-%d", i%2, i%3%2)}
				_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			ten, err := tenancy.Parse([]byte(`
tenants:
- {name: t0, weight: 2, namespaces: [ns0], queues: [{name: q0-0, expectedSeconds: 3600}, {name: q0-1, jobWeight: 3, expectedSeconds: 600}]}
- {name: t1, namespaces: [ns1], queues: [{name: q1-0}, {name: q1-1, jobWeight: 2, expectedSeconds: 7200}]}`))
			require.NoError(t, err)
			pol, err := PolicyByName(name)
			require.NoError(t, err)
			clk := &testClock{}
			c := newController(t, cs, clk, func(cfg *Config) {
				cfg.Policy = pol
				cfg.Tenancy = ten
			})
			admitted := 0
			for round := range 4 {
				clk.t = float64(round) * 360
				res, err := syncRound(ctx, c)
				require.NoError(t, err)
				require.Empty(t, res.Skipped)
				checkInvariants(t, cs, res)
				admitted += len(res.Admitted)
			}
			require.Positive(t, admitted)
		})
	}
}
