package deploy_test

import (
	"slices"
	"testing"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/kueue"
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
// Kueue's objects, patches of Workloads and of the jobs whose gate it
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

// The policies add the code's gate name to Kueue's annotation, and let
// only gpusched-kueue's account remove it.
func TestKueuePolicies(t *testing.T) {
	d := kueueDeployment(t)
	user := "system:serviceaccount:" + d.Namespace + ":" + d.Spec.Template.Spec.ServiceAccountName
	var mut *admissionv1.MutatingAdmissionPolicy
	var val *admissionv1.ValidatingAdmissionPolicy
	bound := map[string]*admissionv1.MatchResources{}
	for _, o := range objects(t, "kueue-policies.yaml") {
		switch p := o.(type) {
		case *admissionv1.MutatingAdmissionPolicy:
			mut = p
		case *admissionv1.ValidatingAdmissionPolicy:
			val = p
		case *admissionv1.MutatingAdmissionPolicyBinding:
			bound[p.Spec.PolicyName] = p.Spec.MatchResources
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			bound[p.Spec.PolicyName] = p.Spec.MatchResources
			assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, p.Spec.ValidationActions)
		default:
			t.Errorf("unexpected %T", o)
		}
	}
	require.NotNil(t, mut)
	require.NotNil(t, val)
	for _, name := range []string{mut.Name, val.Name} {
		require.Contains(t, bound, name)
		assert.Equal(t, map[string]string{"gpusched.io/kueue": "true"}, bound[name].NamespaceSelector.MatchLabels)
	}
	require.Len(t, mut.Spec.Mutations, 1)
	expr := mut.Spec.Mutations[0].JSONPatch.Expression
	assert.Contains(t, expr, `"`+kueue.DefaultGate+`"`)
	assert.Contains(t, expr, `",`+kueue.DefaultGate+`"`, "appended to the gates already there")
	assert.Contains(t, expr, `"`+kueue.AnnotationAdmissionGatedBy+`"`)
	var cond string
	for _, c := range mut.Spec.MatchConditions {
		cond += c.Expression
	}
	assert.Contains(t, cond, "'"+kueue.LabelQueueName+"'")
	var exempt string
	for _, c := range val.Spec.MatchConditions {
		exempt += c.Expression
	}
	assert.Contains(t, exempt, "'"+user+"'", "the controller's account is exempt")
	for _, v := range val.Spec.Variables {
		assert.Contains(t, v.Expression, "'"+kueue.DefaultGate+"'")
	}
	assert.Equal(t, admissionv1.Fail, *mut.Spec.FailurePolicy)
	assert.Equal(t, admissionv1.Fail, *val.Spec.FailurePolicy)
}
