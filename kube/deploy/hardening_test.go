package deploy_test

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// controllerDeployments are the Deployments of the manifests, by file.
var controllerDeployments = []string{"deployment.yaml", "admission-deployment.yaml", "kueue-deployment.yaml"}

// monitoringLabel marks the namespaces whose pods may scrape the
// controllers' /metrics (networkpolicy.yaml).
const monitoringLabel = "gpusched.io/monitoring"

// Peak resident memory measured (docs/operations.md), the largest run of
// each binary: the scheduler at 5,000 nodes, the admission controller at
// 10,000 workloads, gpusched-kueue's benchmark at 15,000 Workloads.
var measuredPeak = map[string]resource.Quantity{
	"gpusched-scheduler": resource.MustParse("468Mi"),
	"gpusched-admission": resource.MustParse("697Mi"),
	"gpusched-kueue":     resource.MustParse("393Mi"),
}

// Every controller Deployment runs under seccomp's RuntimeDefault profile,
// with a memory request and a limit of at least twice its measured peak
// (so a leak or an attack that grows it ends in a restart, not in the
// node's memory), at a priority class of the system's (it gates every
// GPU workload: not the pod to evict first), non-root, read-only, no
// capabilities (#40, item 13; before: no seccompProfile, no limit, no
// priorityClassName on the controllers).
func TestDeploymentsHardened(t *testing.T) {
	for _, f := range controllerDeployments {
		t.Run(f, func(t *testing.T) {
			d := deploymentOf(t, f)
			ps := d.Spec.Template.Spec
			assert.Contains(t, []string{"system-cluster-critical", "system-node-critical"}, ps.PriorityClassName, "priorityClassName")
			require.Len(t, ps.Containers, 1)
			c := ps.Containers[0]
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, seccomp(ps.SecurityContext, c.SecurityContext), "seccompProfile")
			req, lim := c.Resources.Requests[corev1.ResourceMemory], c.Resources.Limits[corev1.ResourceMemory]
			require.False(t, req.IsZero(), "a memory request")
			require.False(t, lim.IsZero(), "a memory limit")
			assert.GreaterOrEqual(t, lim.Cmp(req), 0, "limit %s under request %s", lim.String(), req.String())
			peak, ok := measuredPeak[d.Name]
			require.True(t, ok, "no measured memory for %s", d.Name)
			peak.Add(peak)
			assert.GreaterOrEqual(t, lim.Cmp(peak), 0, "limit %s under twice the measured peak (%s)", lim.String(), peak.String())
			sc := c.SecurityContext
			require.NotNil(t, sc)
			assert.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "allowPrivilegeEscalation false")
			assert.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "readOnlyRootFilesystem")
			assert.True(t, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, "runAsNonRoot")
			require.NotNil(t, sc.Capabilities)
			assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
		})
	}
}

// seccomp is the profile a container runs under: its own, else its pod's.
func seccomp(pod *corev1.PodSecurityContext, c *corev1.SecurityContext) corev1.SeccompProfileType {
	if c != nil && c.SeccompProfile != nil {
		return c.SeccompProfile.Type
	}
	if pod != nil && pod.SeccompProfile != nil {
		return pod.SeccompProfile.Type
	}
	return ""
}

// networkpolicy.yaml admits into gpusched-system only the controllers'
// metrics port, only from namespaces labelled gpusched.io/monitoring=true:
// it selects every pod there, allows nothing else, and the port it names
// is the one each controller serves /metrics on (#40, item 13: before,
// no NetworkPolicy shipped and /metrics answered anyone).
func TestMetricsNetworkPolicy(t *testing.T) {
	var nps []*networkingv1.NetworkPolicy
	for _, o := range objects(t, "networkpolicy.yaml") {
		np, ok := o.(*networkingv1.NetworkPolicy)
		require.True(t, ok, "unexpected %T", o)
		nps = append(nps, np)
	}
	require.Len(t, nps, 1)
	np := nps[0]
	const ns = "gpusched-system"
	assert.Equal(t, ns, np.Namespace)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	require.Len(t, np.Spec.Ingress, 1, "one way in")
	in := np.Spec.Ingress[0]
	require.Len(t, in.From, 1)
	from := in.From[0]
	assert.Nil(t, from.IPBlock, "no address range: pods of labelled namespaces only")
	assert.Nil(t, from.PodSelector)
	require.NotNil(t, from.NamespaceSelector)
	assert.Equal(t, map[string]string{monitoringLabel: "true"}, from.NamespaceSelector.MatchLabels)
	assert.Empty(t, from.NamespaceSelector.MatchExpressions)
	require.Len(t, in.Ports, 1)
	port := in.Ports[0]
	require.NotNil(t, port.Port)
	assert.Equal(t, intstr.FromString("metrics"), *port.Port)
	assert.Nil(t, port.EndPort)
	found := 0
	for _, f := range controllerDeployments {
		d := deploymentOf(t, f)
		if d.Namespace != ns {
			continue
		}
		found++
		assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s's pods are not selected", d.Name)
		c := d.Spec.Template.Spec.Containers[0]
		assert.True(t, slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return p.Name == "metrics" && p.Protocol != corev1.ProtocolUDP && metricsPort(c) == p.ContainerPort
		}), "%s serves /metrics on the port named metrics", d.Name)
	}
	assert.Equal(t, 2, found, "gpusched-admission and gpusched-kueue")
}

// metricsPort is the port of a controller's --metrics-address or
// --metrics-bind-address flag (":8080"), -1 if none.
func metricsPort(c corev1.Container) int32 {
	for _, name := range []string{"--metrics-address", "--metrics-bind-address"} {
		if _, port, err := net.SplitHostPort(flagValue(c.Command, name)); err == nil {
			if p, err := strconv.ParseInt(port, 10, 32); err == nil {
				return int32(p)
			}
		}
	}
	return -1
}

// The namespace of the controllers enforces Pod Security's restricted
// level, in both manifests that make it.
func TestControllerNamespaceRestricted(t *testing.T) {
	for _, f := range []string{"admission-rbac.yaml", "kueue-rbac.yaml"} {
		found := false
		for _, o := range objects(t, f) {
			if n, ok := o.(*corev1.Namespace); ok {
				found = true
				assert.Equal(t, "restricted", n.Labels["pod-security.kubernetes.io/enforce"], f)
			}
		}
		assert.True(t, found, "%s makes no namespace", f)
	}
}
