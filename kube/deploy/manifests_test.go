// Package deploy_test keeps the manifests of kube/deploy consistent with
// the code: the names the admission policies match are the controllers',
// the RBAC rules cover every call the controllers make and no more
// namespaces than they need, the example tenancy parses and sits where
// the controller reads it.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/admission"
	"github.com/gpusched/gpusched/kube/gpusched"
	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/kube/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Yaml: true, Strict: true})

// objects decodes a multi-document manifest strictly into typed objects.
func objects(t *testing.T, file string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []runtime.Object
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err, file)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 {
			continue
		}
		// Strictly: a field the type lacks (a typo) is an error.
		obj, _, err := strict.Decode(raw.Raw, nil, nil)
		require.NoError(t, err, file)
		out = append(out, obj)
	}
}

// admissionDeployment is the Deployment of admission-deployment.yaml.
func admissionDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return deploymentOf(t, "admission-deployment.yaml")
}

// deploymentOf is the Deployment of a manifest.
func deploymentOf(t *testing.T, file string) *appsv1.Deployment {
	t.Helper()
	for _, o := range objects(t, file) {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d
		}
	}
	t.Fatalf("no Deployment in %s", file)
	return nil
}

// tenantFairPolicy is the policy the controllers' Deployments run: water
// filling over tenants (the tenancy's tenants; Kueue's ClusterQueues) by
// their weights, within their quotas. max-min-fairness, fair per job, let
// a tenant that split its work into 32 jobs take 92% of the GPUs (#40).
const tenantFairPolicy = admission.DefaultPolicy

// flagValue is the value of the last --name=value of a command line.
func flagValue(cmd []string, name string) string {
	var v string
	for _, f := range cmd {
		if s, ok := strings.CutPrefix(f, name+"="); ok {
			v = s
		}
	}
	return v
}

// need is a right a controller's code uses.
type need struct{ group, resource, verb string }

// rules returns the rights a set of RBAC objects grants a subject, by
// namespace ("" for a ClusterRole).
func rules(objs []runtime.Object, sa string) map[string][]rbacv1.PolicyRule {
	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			roles["ClusterRole/"+r.Name] = r.Rules
		case *rbacv1.Role:
			roles["Role/"+r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	out := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		ns := ""
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			subjects, ref = b.Subjects, b.RoleRef
		case *rbacv1.RoleBinding:
			subjects, ref, ns = b.Subjects, b.RoleRef, b.Namespace
		default:
			continue
		}
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Namespace+"/"+s.Name == sa }) {
			continue
		}
		key := ref.Kind + "/" + ref.Name
		if ref.Kind == "Role" {
			key = "Role/" + ns + "/" + ref.Name
		}
		out[ns] = append(out[ns], roles[key]...)
	}
	return out
}

func allows(rs []rbacv1.PolicyRule, n need) bool {
	return slices.ContainsFunc(rs, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, n.group) && slices.Contains(r.Resources, n.resource) && slices.Contains(r.Verbs, n.verb)
	})
}

// The admission controller's manifests: its RBAC covers what it calls,
// cluster-wide for the workloads and only in its own namespace for its
// state and the tenancy; the Deployment runs there with the tenancy
// ConfigMap of tenancy.yaml.
func TestAdmissionManifests(t *testing.T) {
	deploy := admissionDeployment(t)
	ns := deploy.Namespace
	sa := ns + "/" + deploy.Spec.Template.Spec.ServiceAccountName
	rb := rules(objects(t, "admission-rbac.yaml"), sa)
	// Its informers list and watch; its pod conditions are patches of
	// pods/status; its event broadcaster creates and patches events.
	cluster := []need{
		{"", "nodes", "list"}, {"", "nodes", "watch"}, {"", "pods", "list"}, {"", "pods", "watch"}, {"", "pods", "get"},
		{"", "pods", "update"}, {"", "pods", "delete"}, {"", "pods", "create"}, {"", "pods/status", "patch"},
		{"", "pods/resize", "update"},
		{"batch", "jobs", "list"}, {"batch", "jobs", "watch"}, {"batch", "jobs", "get"}, {"batch", "jobs", "update"},
		{"scheduling.k8s.io", "priorityclasses", "list"}, {"scheduling.k8s.io", "priorityclasses", "watch"},
		{"", "events", "create"}, {"", "events", "patch"},
	}
	for _, n := range cluster {
		assert.True(t, allows(rb[""], n), "cluster-wide %+v", n)
	}
	for _, n := range []need{{"", "configmaps", "get"}, {"", "configmaps", "list"}, {"", "configmaps", "watch"}, {"", "configmaps", "create"}, {"", "configmaps", "update"},
		{"", "configmaps", "delete"}, {"coordination.k8s.io", "leases", "get"}, {"coordination.k8s.io", "leases", "create"}, {"coordination.k8s.io", "leases", "update"}} {
		assert.True(t, allows(rb[ns], n), "in %s: %+v", ns, n)
		assert.False(t, allows(rb[""], n), "%+v must not be cluster-wide: the state is its namespace's only", n)
	}
	for k := range rb {
		assert.Contains(t, []string{"", ns}, k, "rights in a namespace not its own")
	}
	onlyGetsItsSecret(t, rb, ns, admissionCopyKeySecret)
	b, err := os.ReadFile("admission-rbac.yaml")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), gpusched.RecordKeyCommand(ns, admissionCopyKeySecret)), "admission-rbac.yaml names the install step that makes the copy key")
	// Its flags: the tenancy ConfigMap of tenancy.yaml, in its namespace;
	// a policy fair between tenants.
	c := deploy.Spec.Template.Spec.Containers[0]
	policy := flagValue(c.Command, "--policy")
	_, err = admission.PolicyByName(policy)
	require.NoError(t, err)
	assert.Equal(t, tenantFairPolicy, policy, "the tenant, with its weight and quota, is the unit of fairness (#40)")
	assert.Contains(t, c.Command, "--tenancy-configmap="+tenancy.DefaultConfigMap)
	assert.Contains(t, c.Command, "--host-profiles=synergy", "workloads that name a host profile get Synergy's split (#45)")
	assert.Contains(t, c.Command, "--copy-key-secret="+admissionCopyKeySecret, "the copies of preempted pods signed with the key made at install")
	assert.True(t, slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}), "the state namespace is the pod's own")
	for _, f := range c.Command {
		assert.False(t, strings.HasPrefix(f, "--tenant-label") || strings.HasPrefix(f, "--default-throughput"), "removed flag %s", f)
	}
	var cm *corev1.ConfigMap
	for _, o := range objects(t, "tenancy.yaml") {
		cm, _ = o.(*corev1.ConfigMap)
	}
	require.NotNil(t, cm)
	assert.Equal(t, ns, cm.Namespace)
	assert.Equal(t, tenancy.DefaultConfigMap, cm.Name)
	_, err = tenancy.Parse([]byte(cm.Data[tenancy.ConfigKey]))
	require.NoError(t, err)
}

// policies are the admission policies of a file, by name, and their
// bindings' match resources.
type policies struct {
	maps  map[string]*admissionv1.MutatingAdmissionPolicy
	vaps  map[string]*admissionv1.ValidatingAdmissionPolicy
	bound map[string]*admissionv1.MatchResources
}

func policiesOf(t *testing.T, file string) policies {
	t.Helper()
	ps := policies{maps: map[string]*admissionv1.MutatingAdmissionPolicy{}, vaps: map[string]*admissionv1.ValidatingAdmissionPolicy{},
		bound: map[string]*admissionv1.MatchResources{}}
	for _, o := range objects(t, file) {
		switch p := o.(type) {
		case *admissionv1.MutatingAdmissionPolicy:
			ps.maps[p.Name] = p
		case *admissionv1.ValidatingAdmissionPolicy:
			ps.vaps[p.Name] = p
		case *admissionv1.MutatingAdmissionPolicyBinding:
			ps.bound[p.Spec.PolicyName] = p.Spec.MatchResources
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			ps.bound[p.Spec.PolicyName] = p.Spec.MatchResources
			assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, p.Spec.ValidationActions)
		default:
			t.Errorf("%s: unexpected %T", file, o)
		}
	}
	return ps
}

// names are the policies' names, sorted.
func (ps policies) names() []string {
	out := slices.Collect(maps.Keys(ps.maps))
	out = append(out, slices.Collect(maps.Keys(ps.vaps))...)
	slices.Sort(out)
	return out
}

// boundTo checks that every policy has a binding to the namespaces of
// label=true, and nothing else.
func (ps policies) boundTo(t *testing.T, label string) {
	t.Helper()
	for _, name := range ps.names() {
		m := ps.bound[name]
		require.NotNil(t, m, "policy %s has no binding", name)
		require.NotNil(t, m.NamespaceSelector, name)
		assert.Equal(t, map[string]string{label: "true"}, m.NamespaceSelector.MatchLabels, name)
	}
	assert.Len(t, ps.bound, len(ps.names()), "a binding of no policy")
}

func variables(vs []admissionv1.Variable) map[string]string {
	out := map[string]string{}
	for _, v := range vs {
		out[v.Name] = v.Expression
	}
	return out
}

func conditions(cs []admissionv1.MatchCondition) string {
	var out string
	for _, c := range cs {
		out += c.Expression + "\n"
	}
	return out
}

// resourcesOf lists the group/resource pairs a policy's rules match.
func resourcesOf(rs []admissionv1.NamedRuleWithOperations, op admissionv1.OperationType) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(r.Operations, op) {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out = append(out, g+"/"+res)
			}
		}
	}
	slices.Sort(out)
	return out
}

// gpuCheck checks a policy's test of GPU requests: the GPU resources it
// names (a variable, the code's model.ResourceGPU among them), tested by
// limit and by request in the containers and the init containers
// (sidecars included), and nowhere in a match condition (#40: the gates
// looked at containers only, and with the test in a match condition a
// GPU or a queue label that a later webhook adds was never seen: the API
// server reinvokes only the policies that matched the first time).
func gpuCheck(t *testing.T, name string, vars map[string]string, conds string) {
	t.Helper()
	assert.Contains(t, vars["gpuResources"], "'"+string(model.ResourceGPU)+"'", "%s: its GPU resources", name)
	asks := vars["asksForGPUs"]
	for _, s := range []string{"containers.exists", "initContainers.exists", "resources.limits", "resources.requests", "variables.gpuResources"} {
		assert.Contains(t, asks, s, "%s: asksForGPUs", name)
	}
	assert.NotContains(t, conds, "resources", "%s: a GPU test in a match condition is not reinvoked", name)
}

// The admission policies name the code's gate, label, annotations and the
// admission controller's account, and hold the rules the threat model
// says (SECURITY.md): the gates see every GPU the controller counts, in
// any container, with reinvocation; GPUs it does not count are refused.
func TestAdmissionPolicies(t *testing.T) {
	deploy := admissionDeployment(t)
	user := "system:serviceaccount:" + deploy.Namespace + ":" + deploy.Spec.Template.Spec.ServiceAccountName
	ps := policiesOf(t, "admission-policies.yaml")
	assert.Equal(t, []string{"gpusched-decisions", "gpusched-gate-jobs", "gpusched-gate-pods", "gpusched-uncounted-gpus"}, ps.names())
	ps.boundTo(t, tenancy.LabelManaged)
	kinds := map[string][]string{"gpusched-gate-pods": {"/pods"}, "gpusched-gate-jobs": {"batch/jobs"}}
	for name, p := range ps.maps {
		assert.Equal(t, kinds[name], resourcesOf(p.Spec.MatchConstraints.ResourceRules, admissionv1.Create), name)
		require.Len(t, p.Spec.Mutations, 1)
		expr := p.Spec.Mutations[0].ApplyConfiguration.Expression
		assert.Contains(t, expr, `"`+admission.GateName+`"`, name)
		assert.True(t, strings.HasPrefix(expr, "variables.asksForGPUs ?"), "%s: the test in the mutation: %s", name, expr)
		assert.Equal(t, admissionv1.Fail, *p.Spec.FailurePolicy)
		assert.Equal(t, admissionv1.IfNeededReinvocationPolicy, p.Spec.ReinvocationPolicy, name)
		gpuCheck(t, name, variables(p.Spec.Variables), conditions(p.Spec.MatchConditions))
	}
	// Only the job controller's pods of a Job it controls go ungated.
	exempt := conditions(ps.maps["gpusched-gate-pods"].Spec.MatchConditions)
	assert.Contains(t, exempt, "'system:serviceaccount:kube-system:job-controller'")
	assert.Contains(t, exempt, "o.kind == 'Job'", "kube-controller-manager's own identity is exempt only for a Job's pods")
	assert.Empty(t, ps.maps["gpusched-gate-jobs"].Spec.MatchConditions, "every Job")

	v := ps.vaps["gpusched-decisions"]
	require.NotNil(t, v)
	assert.Contains(t, conditions(v.Spec.MatchConditions), "'"+user+"'", "the controller's account is exempt")
	vars := variables(v.Spec.Variables)
	for _, a := range append(slices.Clone(admission.DecisionAnnotations), model.AnnotationGPUs, model.AnnotationGPUsMAC) {
		assert.Contains(t, vars["decisions"], "'"+a+"'", "decision annotation %s not protected", a)
	}
	var rules string
	for _, x := range v.Spec.Validations {
		rules += x.Expression
	}
	assert.Contains(t, rules, "'"+admission.GateName+"'")
	assert.Contains(t, rules, "oldObject.spec.suspend")
	assert.Equal(t, admissionv1.Fail, *v.Spec.FailurePolicy)

	u := ps.vaps["gpusched-uncounted-gpus"]
	require.NotNil(t, u, "no policy for the GPUs the controller does not count")
	assert.Equal(t, []string{"/pods", "batch/jobs"}, resourcesOf(u.Spec.MatchConstraints.ResourceRules, admissionv1.Create))
	assert.Equal(t, "['nvidia.com/mig-']", variables(u.Spec.Variables)["uncounted"], "MIG slices, which the controller does not count")
	require.Len(t, u.Spec.Validations, 2)
	assert.Contains(t, u.Spec.Validations[0].Expression, "initContainers")
	assert.Contains(t, u.Spec.Validations[1].Expression, "resourceClaims", "DRA claims, which the controller does not count")
	assert.False(t, strings.HasPrefix(string(model.ResourceGPU), "nvidia.com/mig-"), "a counted GPU refused")
}

// The scheduler's manifests: its profile's args decode, and its RBAC lets
// it read (and create) exactly the Secret of its record key.
func TestSchedulerManifests(t *testing.T) {
	b, err := os.ReadFile("scheduler-config.yaml")
	require.NoError(t, err)
	var cfg struct {
		Profiles []struct {
			PluginConfig []struct {
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	require.NoError(t, yaml.Unmarshal(b, &cfg))
	var args gpusched.Args
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == gpusched.Name {
			require.NoError(t, yaml.UnmarshalStrict(pc.Args, &args))
		}
	}
	require.NotEmpty(t, args.RecordKeySecret)
	ns, name, _ := strings.Cut(args.RecordKeySecret, "/")
	rb := rules(objects(t, "rbac.yaml"), "kube-system/gpusched-scheduler")
	onlyGetsItsSecret(t, rb, ns, name)
	// The install step that makes the key is in the manifest's header,
	// the same the plugin's error names.
	b, err = os.ReadFile("rbac.yaml")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(b), gpusched.RecordKeyCommand(ns, name)), "rbac.yaml names the install step: %s", gpusched.RecordKeyCommand(ns, name))
}

// admissionCopyKeySecret is the Secret, in the admission controller's
// namespace, of the key that signs the copies of the pods it preempts
// (#40, item 9); the admin makes it at install.
const admissionCopyKeySecret = admission.DefaultCopyKeySecret

// onlyGetsItsSecret checks that the rights rb (by namespace) touch
// Secrets only to get the one Secret ns/name: no create (before #40 the
// scheduler could create any Secret in kube-system, to make its key), no
// list or watch, nothing cluster-wide.
func onlyGetsItsSecret(t *testing.T, rb map[string][]rbacv1.PolicyRule, ns, name string) {
	t.Helper()
	found := false
	for where, rs := range rb {
		for _, r := range rs {
			if !slices.Contains(r.Resources, "secrets") && !slices.Contains(r.Resources, "*") {
				continue
			}
			assert.Equal(t, ns, where, "Secrets outside %s: %+v", ns, r)
			assert.Equal(t, []string{name}, r.ResourceNames, "only the Secret %s/%s: %+v", ns, name, r)
			assert.Equal(t, []string{"get"}, r.Verbs, "get only (the key is made at install): %+v", r)
			found = true
		}
	}
	assert.True(t, found, "no rule to read the Secret %s/%s", ns, name)
}
