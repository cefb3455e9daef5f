package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
)

// kueueDeployment is the Deployment of kueue-deployment.yaml.
func kueueDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return deploymentOf(t, "kueue-deployment.yaml")
}

// gpusched-kueue's manifests: its RBAC covers what it calls (watches of
// Kueue's objects and of the namespaces, patches of Workloads and of the jobs whose gate it
// removes, events) cluster-wide, its lease only in its namespace, and
// nothing else; its flags name a known policy and the code's gate.
func TestKueueManifests(t *testing.T) {
	d := kueueDeployment(t)
	ns := d.Namespace
	sa := ns + "/" + d.Spec.Template.Spec.ServiceAccountName
	rb := rules(objects(t, "kueue-rbac.yaml"), sa)
	for _, n := range []need{
		{"kueue.x-k8s.io", "workloads", "list"}, {"kueue.x-k8s.io", "workloads", "watch"}, {"kueue.x-k8s.io", "workloads", "patch"},
		{"kueue.x-k8s.io", "clusterqueues", "list"}, {"kueue.x-k8s.io", "clusterqueues", "watch"},
		{"kueue.x-k8s.io", "localqueues", "list"}, {"kueue.x-k8s.io", "localqueues", "watch"},
		{"kueue.x-k8s.io", "resourceflavors", "list"}, {"kueue.x-k8s.io", "resourceflavors", "watch"},
		{"", "namespaces", "list"}, {"", "namespaces", "watch"}, // the ClusterQueues' namespaceSelectors (review of #40)
		{"batch", "jobs", "patch"}, {"batch", "jobs", "get"}, {"jobset.x-k8s.io", "jobsets", "patch"}, {"kubeflow.org", "pytorchjobs", "patch"},
		{"", "events", "create"},
	} {
		assert.True(t, allows(rb[""], n), "cluster-wide %+v", n)
	}
	for _, n := range []need{{"coordination.k8s.io", "leases", "get"}, {"coordination.k8s.io", "leases", "create"}, {"coordination.k8s.io", "leases", "update"}} {
		assert.True(t, allows(rb[ns], n), "in %s: %+v", ns, n)
		assert.False(t, allows(rb[""], n), "%+v must not be cluster-wide", n)
	}
	for _, r := range rb[""] {
		assert.NotContains(t, r.Resources, "secrets")
		assert.NotContains(t, r.Resources, "pods", "it writes no pod")
		if !slices.Contains(r.Resources, "events") {
			assert.NotContains(t, r.Verbs, "update", "patches only (JSON patches of its own fields): %+v", r)
		}
		if slices.Contains(r.Resources, "namespaces") {
			assert.ElementsMatch(t, []string{"get", "list", "watch"}, r.Verbs, "namespaces are read only")
		}
		if slices.Contains(r.APIGroups, "kueue.x-k8s.io") && !slices.Contains(r.Resources, "workloads") {
			assert.ElementsMatch(t, []string{"get", "list", "watch"}, r.Verbs, "Kueue's queues and flavors are read only")
		}
	}
	for k := range rb {
		assert.Contains(t, []string{"", ns}, k, "rights in a namespace not its own")
	}
	c := d.Spec.Template.Spec.Containers[0]
	policy := flagValue(c.Command, "--policy")
	_, err := admission.PolicyByName(policy)
	require.NoError(t, err)
	assert.Equal(t, tenantFairPolicy, policy, "the ClusterQueue, with its fair-sharing weight, is the unit of fairness (#40)")
	assert.Contains(t, c.Command, "--gate="+kueue.DefaultGate)
}

// Kinds of gpusched-kueue's gate (kueue-policies.yaml), as group/resource.
var kueueGatedKinds = []string{"batch/jobs", "jobset.x-k8s.io/jobsets", "kubeflow.org/jaxjobs", "kubeflow.org/mpijobs",
	"kubeflow.org/paddlejobs", "kubeflow.org/pytorchjobs", "kubeflow.org/tfjobs", "kubeflow.org/xgboostjobs"}

// The policies add the code's gate name to Kueue's annotation of every
// queued GPU job of the gated kinds (the test in the mutation, reinvoked:
// a queue label a later webhook adds is seen), let only gpusched-kueue's
// account remove it from any of them, whose gate its RBAC lets it remove,
// refuse an update that puts an ungated GPU job into a queue (the gate is
// added at creation only), and refuse the queued GPU workloads of the
// kinds the gate cannot hold. Before #40: batch/v1 Jobs only, containers
// only, reinvocationPolicy Never with the queue label in a match
// condition; before its review, the queue label could be added after
// creation (no gpusched-kueue-gate-queue).
func TestKueuePolicies(t *testing.T) {
	d := kueueDeployment(t)
	user := "system:serviceaccount:" + d.Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
	ps := policiesOf(t, "kueue-policies.yaml")
	assert.Equal(t, []string{"gpusched-kueue-gate", "gpusched-kueue-gate-owner", "gpusched-kueue-gate-queue", "gpusched-kueue-other-kinds"}, ps.names())
	ps.boundTo(t, "gpusched.io/kueue")
	mut := ps.maps["gpusched-kueue-gate"]
	require.NotNil(t, mut)
	assert.Equal(t, kueueGatedKinds, resourcesOf(mut.Spec.MatchConstraints.ResourceRules, admissionv1.Create))
	require.Len(t, mut.Spec.Mutations, 1)
	expr := mut.Spec.Mutations[0].JSONPatch.Expression
	assert.Contains(t, expr, `"`+kueue.DefaultGate+`"`)
	assert.Contains(t, expr, `",`+kueue.DefaultGate+`"`, "appended to the gates already there")
	assert.Contains(t, expr, `"`+kueue.AnnotationAdmissionGatedBy+`"`)
	assert.True(t, strings.HasPrefix(expr, "!(variables.queued && variables.asksForGPUs)"), "the tests in the mutation: %s", expr)
	assert.Equal(t, admissionv1.IfNeededReinvocationPolicy, mut.Spec.ReinvocationPolicy)
	assert.Empty(t, mut.Spec.MatchConditions, "a condition that fails at the first call is never reinvoked")
	vars := variables(mut.Spec.Variables)
	assert.Contains(t, vars["queued"], "'"+kueue.LabelQueueName+"'")
	gpuCheck(t, mut.Name, vars, "")
	for _, k := range kueueGatedKinds {
		_, res, _ := strings.Cut(k, "/")
		assert.Contains(t, vars["podSpecs"], "'"+res+"'", "the pod specs of %s", k)
	}

	owner := ps.vaps["gpusched-kueue-gate-owner"]
	require.NotNil(t, owner)
	assert.Equal(t, kueueGatedKinds, resourcesOf(owner.Spec.MatchConstraints.ResourceRules, admissionv1.Update), "the gate guarded on every kind it is added to")
	assert.Contains(t, conditions(owner.Spec.MatchConditions), "'"+user+"'", "the controller's account is exempt")
	for _, v := range owner.Spec.Variables {
		assert.Contains(t, v.Expression, "'"+kueue.DefaultGate+"'")
	}

	queue := ps.vaps["gpusched-kueue-gate-queue"]
	require.NotNil(t, queue, "no policy against a queue label added after creation")
	assert.Equal(t, kueueGatedKinds, resourcesOf(queue.Spec.MatchConstraints.ResourceRules, admissionv1.Update), "every gated kind")
	assert.Equal(t, conditions(owner.Spec.MatchConditions), conditions(queue.Spec.MatchConditions[:1]), "the gate owner's exemptions")
	assert.Contains(t, conditions(queue.Spec.MatchConditions), "'"+kueue.LabelQueueName+"' in object.metadata.labels")
	qvars := variables(queue.Spec.Variables)
	gpuCheck(t, queue.Name, qvars, conditions(queue.Spec.MatchConditions))
	assert.Equal(t, vars["gpuResources"], qvars["gpuResources"], "the gate's GPU resources")
	for _, k := range kueueGatedKinds {
		_, res, _ := strings.Cut(k, "/")
		assert.Contains(t, qvars["podSpecs"], "'"+res+"'", "the pod specs of %s", k)
	}
	assert.Contains(t, qvars["sameQueue"], "oldObject.metadata.labels['"+kueue.LabelQueueName+"'] == object.metadata.labels['"+kueue.LabelQueueName+"']")
	assert.Contains(t, qvars["gated"], "'"+kueue.AnnotationAdmissionGatedBy+"'")
	assert.Contains(t, qvars["gated"], "'"+kueue.DefaultGate+"'")
	require.Len(t, queue.Spec.Validations, 1)
	assert.Equal(t, "!variables.asksForGPUs[0] || variables.gated || (variables.sameQueue && variables.asksForGPUs[1])", queue.Spec.Validations[0].Expression)
	assert.Equal(t, admissionv1.Fail, *queue.Spec.FailurePolicy)

	// gpusched-kueue can remove its gate from every kind the gate holds.
	rb := rules(objects(t, "kueue-rbac.yaml"), d.Namespace+"/"+d.Spec.Template.Spec.ServiceAccountName)
	for _, k := range kueueGatedKinds {
		g, res, _ := strings.Cut(k, "/")
		for _, verb := range []string{"get", "patch"} {
			assert.True(t, allows(rb[""], need{g, res, verb}), "gpusched-kueue cannot %s %s: its gated workloads would wait for ever", verb, k)
		}
	}

	other := ps.vaps["gpusched-kueue-other-kinds"]
	require.NotNil(t, other, "no policy for the kinds the gate cannot hold")
	refused := resourcesOf(other.Spec.MatchConstraints.ResourceRules, admissionv1.Create)
	assert.Equal(t, []string{"/pods", "apps/deployments", "apps/statefulsets", "leaderworkerset.x-k8s.io/leaderworkersets",
		"ray.io/rayclusters", "ray.io/rayjobs", "trainer.kubeflow.org/trainjobs", "workload.codeflare.dev/appwrappers"}, refused)
	for _, k := range refused {
		assert.NotContains(t, kueueGatedKinds, k)
	}
	assert.Contains(t, conditions(other.Spec.MatchConditions), "'"+kueue.LabelQueueName+"'", "queued workloads only")
	ovars := variables(other.Spec.Variables)
	assert.Contains(t, ovars["gpuResources"], "'"+string(model.ResourceGPU)+"'")
	assert.Contains(t, ovars["asksForGPUs"], "initContainers.exists")
	assert.Equal(t, admissionv1.Fail, *mut.Spec.FailurePolicy)
	assert.Equal(t, admissionv1.Fail, *owner.Spec.FailurePolicy)
	assert.Equal(t, admissionv1.Fail, *other.Spec.FailurePolicy)
}
