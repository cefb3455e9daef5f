package kubetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// KueueVersion is the Kueue release hack/e2e-binaries.sh builds.
const KueueVersion = "v0.17.0"

// KueueBinaries are the programs of the Kueue tests besides the control
// plane's (a value, safe for concurrent use).
type KueueBinaries struct {
	Binaries
	ControllerManager, Kubectl, Kueue string
	// KueueConfig is the folder of Kueue's CRDs (crd/) and webhook
	// manifests (webhook/manifests.yaml), copied from its module.
	KueueConfig string
}

// FindKueueBinaries returns the binaries if all are there.
func FindKueueBinaries() (KueueBinaries, error) {
	b, err := FindBinaries()
	if err != nil {
		return KueueBinaries{}, err
	}
	dir := filepath.Dir(b.Etcd)
	k := KueueBinaries{Binaries: b,
		ControllerManager: filepath.Join(dir, "kube-controller-manager"), Kubectl: filepath.Join(dir, "kubectl"),
		Kueue: filepath.Join(dir, "kueue"), KueueConfig: filepath.Join(dir, "kueue-"+KueueVersion)}
	for _, p := range []string{k.ControllerManager, k.Kubectl, k.Kueue, filepath.Join(k.KueueConfig, "webhook", "manifests.yaml")} {
		if _, err := os.Stat(p); err != nil {
			return k, fmt.Errorf("kubetest: %w", err)
		}
	}
	return k, nil
}

var (
	kueueOnce sync.Once
	kueueBins KueueBinaries
	kueueErr  error
)

// RequireKueueBinaries returns the binaries of the Kueue tests, building
// the missing ones with hack/e2e-binaries.sh first; if they cannot be
// built it skips the test, saying why and how to build them.
func RequireKueueBinaries(t testing.TB) KueueBinaries {
	t.Helper()
	RequireBinaries(t)
	kueueOnce.Do(func() {
		if kueueBins, kueueErr = FindKueueBinaries(); kueueErr == nil {
			return
		}
		ctx := context.Background()
		if d, ok := deadline(t); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-2*time.Minute))
			defer cancel()
		}
		if kueueErr = buildBinaries(ctx); kueueErr != nil {
			return
		}
		kueueBins, kueueErr = FindKueueBinaries()
	})
	if kueueErr != nil {
		t.Skipf("Kueue end-to-end test skipped: kube-controller-manager, kubectl or Kueue %s are missing and could not be built "+
			"(run kube/hack/e2e-binaries.sh, or set %s to a folder holding them): %v", KueueVersion, EnvBin, kueueErr)
	}
	return kueueBins
}

// CanRunKueue says whether Kueue's manager can run here: it reads its
// certificates from fixed paths under /etc/kueue, which the tests provide
// in a private mount namespace (unshare --mount) over an overlay of /etc,
// so that the real /etc is never touched; that needs root and the
// unshare and mount programs (util-linux).
func CanRunKueue(ctx context.Context, dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("not root: Kueue's manager reads its certificates from /etc/kueue, which the test mounts in a private mount namespace (unshare --mount), and that needs root")
	}
	for _, p := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s not found (util-linux): %w", p, err)
		}
	}
	probe := filepath.Join(dir, "probe")
	if err := os.MkdirAll(probe, 0o755); err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(probe) }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	script := overlayScript(probe) + "test -d /etc/kueue/metrics/certs\n"
	out, err := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-ec", script).CombinedOutput()
	if err != nil {
		return fmt.Errorf("a private overlay of /etc (unshare --mount, mount -t overlay) failed: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// overlayScript mounts, in the current mount namespace, an overlay of /etc
// whose upper layer is a tmpfs under dir, and creates
// /etc/kueue/metrics/certs in it.
func overlayScript(dir string) string {
	return fmt.Sprintf(`ovl=%[1]s/etc-overlay
mkdir -p "$ovl"
mount -t tmpfs tmpfs "$ovl"
mkdir -p "$ovl/upper" "$ovl/work"
mount -t overlay overlay -o lowerdir=/etc,upperdir="$ovl/upper",workdir="$ovl/work" /etc
mkdir -p /etc/kueue/metrics/certs
`, shellQuote(dir))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// StartControllerManager runs kube-controller-manager with the job,
// garbage-collector, namespace and service-account controllers (so Jobs
// create and delete their pods), without leader election or serving.
func StartControllerManager(cp *ControlPlane, bin, dir string) (*Process, error) {
	return StartProcess(dir, "kube-controller-manager", bin,
		"--kubeconfig", cp.Kubeconfig,
		"--controllers", "job,garbagecollector,namespace,serviceaccount",
		"--service-account-private-key-file", filepath.Join(cp.Dir, "sa.key"),
		"--use-service-account-credentials=false", "--leader-elect=false", "--secure-port=0",
		"--concurrent-job-syncs=10", "--kube-api-qps=500", "--kube-api-burst=1000", "--v=1")
}

// KueueOptions configure Kueue's manager (a value, safe for concurrent
// reads).
type KueueOptions struct {
	// FeatureGates are set in its configuration (VisibilityOnDemand is
	// always off: it needs a certificate at another fixed path).
	FeatureGates map[string]bool
	// Frameworks are its job integrations; nil means batch/job.
	Frameworks []string
}

// StartKueue installs Kueue's CRDs and webhooks on the control plane and
// runs its manager in dir (see CanRunKueue): the webhooks on loopback,
// the API server reaching them by URL with the CA bundle of a certificate
// made here, as controller-runtime's envtest arranges. It returns once the
// manager is ready and its webhooks answer. The caller stops the process.
func StartKueue(ctx context.Context, cp *ControlPlane, b KueueBinaries, dir string, o KueueOptions) (*Process, error) {
	kubectl := exec.CommandContext(ctx, b.Kubectl, "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "-f", filepath.Join(b.KueueConfig, "crd"))
	if out, err := kubectl.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubetest: kubectl apply Kueue's CRDs: %w\n%s", err, tail(out, 2000))
	}
	// kubectl wait fails, rather than waits, on a CRD without conditions
	// yet: it is asked again until the CRDs are established.
	if err := retry(ctx, func() error {
		wait := exec.CommandContext(ctx, b.Kubectl, "--kubeconfig", cp.Kubeconfig, "wait", "--for=condition=Established", "--timeout=30s",
			"crd/workloads.kueue.x-k8s.io", "crd/clusterqueues.kueue.x-k8s.io", "crd/localqueues.kueue.x-k8s.io", "crd/resourceflavors.kueue.x-k8s.io")
		if out, err := wait.CombinedOutput(); err != nil {
			return fmt.Errorf("kubetest: Kueue's CRDs not established: %w\n%s", err, tail(out, 2000))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := EnsureNamespace(ctx, cp.Client, "kueue-system"); err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "kueue-certs")
	ca, err := writeServingCert(certs)
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	webhook, health := ports[0], ports[1]
	if err := installWebhooks(ctx, cp, filepath.Join(b.KueueConfig, "webhook", "manifests.yaml"), webhook, ca); err != nil {
		return nil, err
	}
	gates := map[string]bool{"VisibilityOnDemand": false}
	for k, v := range o.FeatureGates {
		gates[k] = v
	}
	frameworks := o.Frameworks
	if frameworks == nil {
		frameworks = []string{"batch/job"}
	}
	cfg := map[string]any{
		"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
		"namespace":              "kueue-system",
		"health":                 map[string]any{"healthProbeBindAddress": hostPort(health)},
		"metrics":                map[string]any{"bindAddress": "0"},
		"webhook":                map[string]any{"host": "127.0.0.1", "port": webhook, "certDir": certs},
		"leaderElection":         map[string]any{"leaderElect": false},
		"internalCertManagement": map[string]any{"enable": false},
		"integrations":           map[string]any{"frameworks": frameworks},
		"featureGates":           gates,
		"clientConnection":       map[string]any{"qps": 500, "burst": 1000},
	}
	cb, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "kueue.yaml")
	if err := os.WriteFile(cfgPath, cb, 0o600); err != nil {
		return nil, err
	}
	script := "set -e\n" + overlayScript(dir) +
		fmt.Sprintf("cp %s/tls.crt %s/tls.key /etc/kueue/metrics/certs/\nexec %s --config %s --kubeconfig %s --zap-log-level=info\n",
			shellQuote(certs), shellQuote(certs), shellQuote(b.Kueue), shellQuote(cfgPath), shellQuote(cp.Kubeconfig))
	sh := filepath.Join(dir, "run-kueue.sh")
	if err := os.WriteFile(sh, []byte(script), 0o700); err != nil {
		return nil, err
	}
	p, err := StartProcess(dir, "kueue", "unshare", "--mount", "--propagation", "private", "sh", sh)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+hostPort(health)+"/readyz", nil, p, 2*time.Minute); err != nil {
		p.Stop(10 * time.Second)
		return nil, fmt.Errorf("kubetest: Kueue: %w\n%s", err, p.LogTail(3000))
	}
	return p, nil
}

// writeServingCert writes a CA and a serving certificate for 127.0.0.1
// (tls.crt, tls.key) into dir and returns the CA's PEM.
func writeServingCert(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpusched-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// installWebhooks creates Kueue's webhook configurations from its
// manifests, keeping the webhooks of Kueue's own API and of batch Jobs
// (the pod webhooks match every pod of every namespace and fail closed),
// each reached at https://127.0.0.1:port<path> with the CA bundle.
func installWebhooks(ctx context.Context, cp *ControlPlane, manifests string, port int, ca []byte) error {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	keep := func(rules []admissionv1.RuleWithOperations) bool {
		return slices.ContainsFunc(rules, func(r admissionv1.RuleWithOperations) bool {
			return slices.Contains(r.APIGroups, "kueue.x-k8s.io") || slices.Contains(r.APIGroups, "batch")
		})
	}
	clientConfig := func(cc admissionv1.WebhookClientConfig) admissionv1.WebhookClientConfig {
		path := ""
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		url := fmt.Sprintf("https://%s%s", hostPort(port), path)
		return admissionv1.WebhookClientConfig{URL: &url, CABundle: ca}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("kubetest: %s: %w", manifests, err)
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := yaml.Unmarshal(raw, &m); err != nil {
				return err
			}
			var hooks []admissionv1.MutatingWebhook
			for _, h := range m.Webhooks {
				if keep(h.Rules) {
					h.ClientConfig = clientConfig(h.ClientConfig)
					hooks = append(hooks, h)
				}
			}
			m.Webhooks, m.ObjectMeta = hooks, metav1.ObjectMeta{Name: "kueue-" + m.Name}
			if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &m, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal(raw, &v); err != nil {
				return err
			}
			var hooks []admissionv1.ValidatingWebhook
			for _, h := range v.Webhooks {
				if keep(h.Rules) {
					h.ClientConfig = clientConfig(h.ClientConfig)
					hooks = append(hooks, h)
				}
			}
			v.Webhooks, v.ObjectMeta = hooks, metav1.ObjectMeta{Name: "kueue-" + v.Name}
			if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &v, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
}
