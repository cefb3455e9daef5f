package tenancy

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

// exampleConfigMap reads deploy/tenancy.yaml, the example the docs show.
func exampleConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	b, err := os.ReadFile("../deploy/tenancy.yaml")
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(b, &cm))
	return &cm
}

// The shipped example parses, and places workloads as its comments say.
func TestExampleTenancy(t *testing.T) {
	cm := exampleConfigMap(t)
	require.Equal(t, DefaultConfigMap, cm.Name)
	ten, err := Parse([]byte(cm.Data[ConfigKey]))
	require.NoError(t, err)
	assert.Equal(t, []string{"vision", "nlp", "students"}, ten.Tenants())
	assert.Equal(t, map[string]float64{"vision": 2, "nlp": 1, "students": 0.5}, ten.Weights())
	assert.Equal(t, []string{"course-101", "nlp", "vision", "vision-dev"}, ten.Namespaces())
	assert.Equal(t, 1024, ten.MaxJobs())
	assert.InDelta(t, 10, ten.Rates().Ratio(), 0)

	p, err := ten.Resolve("vision", nil)
	require.NoError(t, err)
	assert.Equal(t, "vision", p.Tenant.Name)
	assert.Equal(t, "vision-batch", p.Queue.Name)
	assert.Equal(t, 0, p.Queue.Priority(100000), "batch: no priority above 0")
	assert.InDelta(t, 14400, p.Queue.RemainingSteps(1), 0)

	p, err = ten.Resolve("vision", map[string]string{LabelQueue: "vision-urgent"})
	require.NoError(t, err)
	assert.Equal(t, "vision-urgent", p.Queue.Name)
	assert.Equal(t, 1000, p.Queue.Priority(2000000000))
	assert.Equal(t, -5, p.Queue.Priority(-5))
	assert.InDelta(t, 2, p.Queue.JobWeight, 0)

	// vision-dev may not use the urgent queue; nobody may use another
	// tenant's queue.
	_, err = ten.Resolve("vision-dev", map[string]string{LabelQueue: "vision-urgent"})
	assert.ErrorIs(t, err, ErrQueue)
	_, err = ten.Resolve("nlp", map[string]string{LabelQueue: "vision-urgent"})
	assert.ErrorIs(t, err, ErrQueue)
	assert.Contains(t, err.Error(), "may use queues nlp")
	_, err = ten.Resolve("kube-system", nil)
	assert.ErrorIs(t, err, ErrNotManaged)
	assert.False(t, ten.Managed("kube-system"))
	assert.True(t, ten.Managed("course-101"))

	// A tenant without queues has one of its name.
	p, err = ten.Resolve("course-101", nil)
	require.NoError(t, err)
	assert.Equal(t, "students", p.Queue.Name)
	vision, ok := ten.Tenant("vision")
	require.True(t, ok)
	assert.InDelta(t, 0.25, vision.Guaranteed.Throughput, 0)
	assert.Equal(t, map[topology.GPUType]float64{topology.A100: 16}, vision.Limit.GPUs)
	nlp, _ := ten.Tenant("nlp")
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 8}, nlp.Guaranteed.GPUs)
	assert.Nil(t, nlp.Limit)
	assert.Equal(t, DefaultTenantMaxJobs, nlp.MaxJobs)
	assert.Equal(t, map[string]allocation.Quota{
		"vision":   {GuaranteedShare: 0.25, MaxGPUs: map[topology.GPUType]float64{topology.A100: 16}},
		"nlp":      {GuaranteedGPUs: map[topology.GPUType]float64{topology.V100: 8}},
		"students": {MaxShare: 0.2},
	}, ten.Quotas())
	require.NoError(t, (&allocation.Problem{EntityQuotas: ten.Quotas()}).Validate(), "the quotas are valid for the policy")
}

func TestLoad(t *testing.T) {
	cm := exampleConfigMap(t)
	cs := fake.NewClientset(cm)
	ten, _, err := Load(context.Background(), cs, cm.Namespace, cm.Name)
	require.NoError(t, err)
	assert.Len(t, ten.Tenants(), 3)
	_, _, err = Load(context.Background(), cs, cm.Namespace, "nope")
	require.Error(t, err)
	cs = fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "t"}, Data: map[string]string{"other": ""}})
	_, _, err = Load(context.Background(), cs, "x", "t")
	require.ErrorIs(t, err, ErrConfig)
}

// Every way a document can be wrong is an ErrConfig naming the place.
func TestParseErrors(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"unknown field":      {`tenants: [{name: a, namespaces: [a], wieght: 2}]`, "wieght"},
		"bad yaml":           {`tenants: [`, ""},
		"kind":               {"kind: Other\ntenants: []", "kind"},
		"apiVersion":         {"apiVersion: v2\ntenants: []", "apiVersion"},
		"tenant name":        {`tenants: [{name: A_1, namespaces: [a]}]`, "tenants[0].name"},
		"no namespaces":      {`tenants: [{name: a}]`, "owns no namespace"},
		"namespace twice":    {`tenants: [{name: a, namespaces: [x]}, {name: b, namespaces: [x]}]`, "namespace x is in tenants a and b"},
		"tenant twice":       {`tenants: [{name: a, namespaces: [x]}, {name: a, namespaces: [w]}]`, "given twice"},
		"weight":             {`tenants: [{name: a, namespaces: [x], weight: -1}]`, "weight -1"},
		"weight huge":        {`tenants: [{name: a, namespaces: [x], weight: 1e300}]`, "weight"},
		"queue of another":   {`tenants: [{name: a, namespaces: [x]}, {name: b, namespaces: [w], queues: [{name: q, namespaces: [x]}]}]`, `namespace "x" is not tenant b's`},
		"queue twice":        {`tenants: [{name: a, namespaces: [x], queues: [{name: q}]}, {name: b, namespaces: [w], queues: [{name: q}]}]`, "already used by tenant a"},
		"default queue":      {`tenants: [{name: a, namespaces: [x], defaultQueue: z}]`, "defaultQueue"},
		"namespace no queue": {`tenants: [{name: a, namespaces: [x, w], queues: [{name: q, namespaces: [x]}]}]`, "namespace w may use none"},
		"job weight":         {`tenants: [{name: a, namespaces: [x], queues: [{name: q, jobWeight: 1e300}]}]`, "jobWeight"},
		"expected":           {`tenants: [{name: a, namespaces: [x], queues: [{name: q, expectedSeconds: -1}]}]`, "expectedSeconds"},
		"share":              {`tenants: [{name: a, namespaces: [x], quota: {guaranteed: {throughput: 1.5}}}]`, "quota.guaranteed.throughput"},
		"gpus":               {`tenants: [{name: a, namespaces: [x], quota: {limit: {gpus: {v100: -2}}}}]`, "quota.limit.gpus.v100"},
		"gpu type":           {`tenants: [{name: a, namespaces: [x], quota: {limit: {gpus: {"V 100": 2}}}}]`, "not a GPU type"},
		"type twice":         {`tenants: [{name: a, namespaces: [x], quota: {limit: {gpus: {v100: 2, Tesla-V100-SXM2-16GB: 3}}}}]`, "given twice"},
		"above limit":        {`tenants: [{name: a, namespaces: [x], quota: {guaranteed: {gpus: {v100: 4}}, limit: {gpus: {v100: 2}}}}]`, "above the limit"},
		"above limit share":  {`tenants: [{name: a, namespaces: [x], quota: {guaranteed: {throughput: 0.5}, limit: {throughput: 0.2}}}]`, "above the limit"},
		"over guaranteed":    {`tenants: [{name: a, namespaces: [x], quota: {guaranteed: {throughput: 0.6}}}, {name: b, namespaces: [w], quota: {guaranteed: {throughput: 0.6}}}]`, "add up to 1.2"},
		"ratio":              {"rates: {maxRatio: 0.5}\ntenants: []", "maxRatio"},
		"reference":          {"rates: {reference: 1e12}\ntenants: []", "reference"},
		"max jobs":           {"maxJobs: -1\ntenants: []", "maxJobs"},
		"tenant max jobs":    {`tenants: [{name: a, namespaces: [x], maxJobs: 1000000000}]`, "maxJobs"},
		"namespace name":     {`tenants: [{name: a, namespaces: ["../x"]}]`, "namespace"},
	} {
		_, err := Parse([]byte(c.doc))
		require.ErrorIs(t, err, ErrConfig, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
	_, err := Parse([]byte(strings.Repeat(" ", MaxConfigBytes+1)))
	require.ErrorIs(t, err, ErrConfig)
}

func TestPerNamespace(t *testing.T) {
	ten := PerNamespace()
	assert.True(t, ten.Open())
	assert.True(t, ten.Managed("anything"))
	p, err := ten.Resolve("team-a", nil)
	require.NoError(t, err)
	assert.Equal(t, "team-a", p.Tenant.Name)
	assert.Equal(t, "team-a", p.Queue.Name)
	assert.Equal(t, 0, p.Queue.Priority(1000))
	_, err = ten.Resolve("team-a", map[string]string{LabelQueue: "team-b"})
	assert.ErrorIs(t, err, ErrQueue)
	_, err = ten.Resolve("team-a", map[string]string{LabelQueue: "team-a"})
	assert.NoError(t, err)
}

// Claimed rates count only relative to each other, within the ratio.
func TestTrustedRates(t *testing.T) {
	types := []topology.GPUType{topology.K80, topology.P100, topology.V100}
	r := RateRules{}
	honest, clamped := r.Trusted(map[topology.GPUType]float64{topology.K80: 1, topology.P100: 2, topology.V100: 4}, types)
	assert.False(t, clamped)
	assert.Equal(t, map[topology.GPUType]float64{topology.K80: 0.25, topology.P100: 0.5, topology.V100: 1}, honest)
	// 1e9 times the claim is the same job.
	huge, _ := r.Trusted(map[topology.GPUType]float64{topology.K80: 1e9, topology.P100: 2e9, topology.V100: 4e9}, types)
	assert.Equal(t, honest, huge)
	// A skew past the ratio is clamped to it.
	skew, clamped := r.Trusted(map[topology.GPUType]float64{topology.K80: 1e-9, topology.V100: 1e9}, types)
	assert.True(t, clamped)
	assert.Equal(t, map[topology.GPUType]float64{topology.K80: 0.1, topology.V100: 1}, skew)
	// Types the claim omits, rates 0 or not finite: the job does not run there.
	some, _ := r.Trusted(map[topology.GPUType]float64{topology.V100: 3, topology.K80: 0, topology.P100: nan(), topology.A100: 9}, types)
	assert.Equal(t, map[topology.GPUType]float64{topology.V100: 1}, some, "a100 is not a cluster type")
	none, _ := r.Trusted(map[topology.GPUType]float64{topology.A100: 9}, types)
	assert.Empty(t, none)
	// No claim: the reference everywhere.
	r = RateRules{MaxRatio: 2, Reference: 5}
	agn, _ := r.Trusted(nil, types)
	assert.Equal(t, map[topology.GPUType]float64{topology.K80: 5, topology.P100: 5, topology.V100: 5}, agn)
	third, _ := r.Trusted(map[topology.GPUType]float64{topology.K80: 1, topology.V100: 3}, types)
	assert.Equal(t, map[topology.GPUType]float64{topology.K80: 2.5, topology.V100: 5}, third)
	// Four significant digits.
	r = RateRules{}
	odd, _ := r.Trusted(map[topology.GPUType]float64{topology.K80: 1, topology.V100: 3}, types)
	assert.InDelta(t, 0.3333, odd[topology.K80], 0)
}

func nan() float64 { z := 0.0; return z / z }

func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("../deploy/tenancy.yaml")
	require.NoError(f, err)
	var cm corev1.ConfigMap
	require.NoError(f, yaml.Unmarshal(b, &cm))
	f.Add([]byte(cm.Data[ConfigKey]))
	f.Add([]byte(`tenants: [{name: a, namespaces: [x], queues: [{name: q, maxPriority: 5}]}]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		ten, err := Parse(doc)
		if err != nil {
			require.ErrorIs(t, err, ErrConfig)
			return
		}
		for _, ns := range ten.Namespaces() {
			p, err := ten.Resolve(ns, nil)
			require.NoError(t, err)
			require.NotNil(t, p.Queue)
			require.True(t, p.Queue.namespaces[ns])
		}
	})
}

// The guide's example is deploy/tenancy.yaml's, word for word, and the
// guide names every field of the document.
func TestGuideExample(t *testing.T) {
	b, err := os.ReadFile("../docs/shared-cluster.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "```yaml\n")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(doc[start+8:], "```")
	require.GreaterOrEqual(t, end, 0)
	example := doc[start+8 : start+8+end]
	assert.Equal(t, exampleConfigMap(t).Data[ConfigKey], example)
	_, err = Parse([]byte(example))
	require.NoError(t, err)
	for _, f := range []string{"rates.maxRatio", "rates.reference", "`maxJobs`", "tenants[].weight", "tenants[].namespaces", "tenants[].maxJobs",
		"tenants[].defaultQueue", "quota.guaranteed", "quota.limit", "queues[].namespaces", "queues[].jobWeight", "queues[].maxPriority", "queues[].expectedSeconds"} {
		assert.Contains(t, doc, f)
	}
}
