package deploy_test

import (
	"encoding/json"
	"flag"
	"maps"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"testing"

	"github.com/gpusched/gpusched/kube/kueue"
	"github.com/gpusched/gpusched/kube/progress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// patched is a controller's Deployment with a learning patch applied as
// kubectl patch applies it (a strategic merge patch).
func patched(t *testing.T, file, patch string) (base, out *appsv1.Deployment) {
	t.Helper()
	base = deploymentOf(t, file)
	orig, err := json.Marshal(base)
	require.NoError(t, err)
	p, err := os.ReadFile(patch)
	require.NoError(t, err)
	pj, err := yaml.YAMLToJSONStrict(p)
	require.NoError(t, err, patch)
	merged, err := strategicpatch.StrategicMergePatch(orig, pj, appsv1.Deployment{})
	require.NoError(t, err, patch)
	out = &appsv1.Deployment{}
	require.NoError(t, json.Unmarshal(merged, out))
	return base, out
}

// The learning manifests (learning.yaml and the two patches): each patched
// Deployment runs its base command, then flags that progress.Flags
// accepts and that serve the channel on the port the Service and the
// NetworkPolicy name, with the certificate of the Secret it mounts; the
// base's ports, probes and hardening are kept. Both service accounts may
// create TokenReviews (system:auth-delegator) and get pods and Jobs; the
// Kueue controller's ConfigMaps (what it learned) are in its namespace
// only.
func TestLearningManifests(t *testing.T) {
	objs := objects(t, "learning.yaml")
	const ns = "gpusched-system"
	services := map[string]*corev1.Service{}
	var np *networkingv1.NetworkPolicy
	delegated := map[string]bool{}
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Service:
			services[v.Spec.Selector["app"]] = v
		case *networkingv1.NetworkPolicy:
			np = v
		case *rbacv1.ClusterRoleBinding:
			if v.RoleRef.Name == "system:auth-delegator" {
				for _, s := range v.Subjects {
					delegated[s.Namespace+"/"+s.Name] = true
				}
			}
		}
	}
	require.NotNil(t, np)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	require.Len(t, np.Spec.Ingress, 1)
	in := np.Spec.Ingress[0]
	var from []map[string]string
	for _, f := range in.From {
		assert.Nil(t, f.IPBlock)
		assert.Nil(t, f.PodSelector)
		require.NotNil(t, f.NamespaceSelector)
		from = append(from, f.NamespaceSelector.MatchLabels)
	}
	// The namespaces the controllers manage: their policies' bindings'.
	var managed []map[string]string
	for _, f := range []string{"admission-policies.yaml", "kueue-policies.yaml"} {
		for _, m := range policiesOf(t, f).bound {
			if !slices.ContainsFunc(managed, func(l map[string]string) bool { return maps.Equal(l, m.NamespaceSelector.MatchLabels) }) {
				managed = append(managed, m.NamespaceSelector.MatchLabels)
			}
		}
	}
	require.Len(t, managed, 2)
	assert.ElementsMatch(t, managed, from)
	require.Len(t, in.Ports, 1)
	assert.Equal(t, intstr.FromString("progress"), *in.Ports[0].Port)

	for _, c := range []struct{ file, patch, container, state string }{
		{"admission-deployment.yaml", "learning-admission-patch.yaml", "admission", ""},
		{"kueue-deployment.yaml", "learning-kueue-patch.yaml", "kueue-steering", "gpusched-kueue-state"},
	} {
		t.Run(c.patch, func(t *testing.T) {
			base, d := patched(t, c.file, c.patch)
			require.Equal(t, ns, d.Namespace)
			require.Len(t, d.Spec.Template.Spec.Containers, 1, "the patch names the base's container")
			ctr := d.Spec.Template.Spec.Containers[0]
			require.Equal(t, c.container, ctr.Name)
			baseCmd := base.Spec.Template.Spec.Containers[0].Command
			require.Greater(t, len(ctr.Command), len(baseCmd))
			assert.Equal(t, baseCmd, ctr.Command[:len(baseCmd)], "the base's command first: change them together")
			var f progress.Flags
			fs := flag.NewFlagSet("learning", flag.ContinueOnError)
			f.Register(fs, "")
			require.NoError(t, fs.Parse(ctr.Command[len(baseCmd):]), "only the learning flags are added")
			require.NoError(t, f.Check())
			assert.True(t, f.Learn)
			require.True(t, f.Serving())
			_, portText, err := net.SplitHostPort(f.Addr)
			require.NoError(t, err)
			var port corev1.ContainerPort
			for _, p := range ctr.Ports {
				if p.Name == "progress" {
					port = p
				}
			}
			assert.Equal(t, portText, strconv.Itoa(int(port.ContainerPort)), "the port named progress is the channel's")
			assert.True(t, slices.ContainsFunc(ctr.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }), "the base's ports are kept")
			assert.Equal(t, base.Spec.Template.Spec.Containers[0].SecurityContext, ctr.SecurityContext, "hardening kept")
			var mount corev1.VolumeMount
			for _, m := range ctr.VolumeMounts {
				if m.Name == "progress-tls" {
					mount = m
				}
			}
			assert.True(t, mount.ReadOnly)
			assert.Equal(t, mount.MountPath, path.Dir(f.Cert))
			assert.Equal(t, mount.MountPath, path.Dir(f.Key))
			var secret string
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "progress-tls" && v.Secret != nil {
					secret = v.Secret.SecretName
				}
			}
			assert.Equal(t, d.Name+"-progress-tls", secret)

			svc := services[d.Spec.Template.Labels["app"]]
			require.NotNil(t, svc, "a Service for %s", d.Name)
			assert.Equal(t, ns, svc.Namespace)
			assert.Equal(t, d.Name+"-progress", svc.Name, "the name its certificate is for")
			require.Len(t, svc.Spec.Ports, 1)
			assert.Equal(t, intstr.FromString("progress"), svc.Spec.Ports[0].TargetPort)
			assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "the NetworkPolicy admits its pods")

			sa := ns + "/" + d.Spec.Template.Spec.ServiceAccountName
			assert.True(t, delegated[sa], "%s may create TokenReviews", sa)
			rb := rules(objs, sa)
			for _, n := range []need{{"", "pods", "get"}, {"batch", "jobs", "get"}} {
				assert.True(t, allows(rb[""], n), "%s: %+v", sa, n)
			}
			for _, r := range rb[""] {
				assert.Equal(t, []string{"get"}, r.Verbs, "read one object at a time: %+v", r)
			}
			if c.state != "" {
				for _, v := range []string{"get", "list", "create", "update", "delete"} {
					n := need{"", "configmaps", v}
					assert.True(t, allows(rb[ns], n), "%+v in %s", n, ns)
					assert.False(t, allows(rb[""], n), "%+v must not be cluster-wide", n)
				}
				// get, update and delete only of the state's ConfigMaps.
				for _, r := range rb[ns] {
					if slices.Contains(r.Resources, "configmaps") && slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "get" || v == "update" || v == "delete" }) {
						assert.ElementsMatch(t, kueue.StateConfigMaps(c.state), r.ResourceNames, "%+v", r)
					}
				}
			}
		})
	}
}
