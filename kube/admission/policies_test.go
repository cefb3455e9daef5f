package admission

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Every policy PolicyByName knows runs rounds over jobs of two tenants
// (queue label) with weights and steps, and keeps the invariants.
func TestEveryPolicy(t *testing.T) {
	for _, name := range Policies() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cs := fake.NewClientset(gpuNode("v1", "Tesla-V100-SXM2-16GB", 4), gpuNode("k1", "Tesla-K80", 4))
			for i := range 5 {
				p := gatedPod(testNS, fmt.Sprint("j", i), 1+i%2, map[string]string{
					AnnotationThroughput: fmt.Sprintf("v100=%d,k80=1", 2+i), AnnotationSteps: fmt.Sprint(1e5 * (i + 1)),
					AnnotationWeight: fmt.Sprint(1 + i%3)})
				p.Labels = map[string]string{LabelQueue: fmt.Sprint("q", i%2)}
				_, err := cs.CoreV1().Pods(testNS).Create(ctx, p, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			pol, err := PolicyByName(name)
			require.NoError(t, err)
			clk := &testClock{}
			c := newController(t, cs, clk, func(cfg *Config) {
				cfg.Policy = pol
				cfg.TenantLabel = LabelQueue
				cfg.TenantWeights = map[string]float64{"q0": 2}
			})
			admitted := 0
			for round := range 4 {
				clk.t = float64(round) * 360
				res, err := c.Round(ctx)
				require.NoError(t, err)
				require.Empty(t, res.Skipped)
				checkInvariants(t, cs, res)
				admitted += len(res.Admitted)
			}
			require.Positive(t, admitted)
		})
	}
}
