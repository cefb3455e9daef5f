package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ControlPlane is etcd and kube-apiserver on loopback. Its methods and its
// Client are safe for concurrent use (the e2e tests share one); Stop ends
// it for all of them.
type ControlPlane struct {
	// Dir holds the data, certificates, logs and the kubeconfig.
	Dir string
	// Kubeconfig is the path of a kubeconfig with admin rights.
	Kubeconfig string
	// Config and Client reach the API server as admin.
	Config *rest.Config
	Client kubernetes.Interface

	etcd, apiserver *Process
}

const adminToken = "gpusched-e2e-admin-token"

// Start starts etcd and kube-apiserver in dir on free loopback ports and
// waits (within ctx) until the API server is ready and the default
// ServiceAccount exists. Stop ends both.
func Start(ctx context.Context, b Binaries, dir string) (cp *ControlPlane, err error) {
	cp = &ControlPlane{Dir: dir}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for attempt := 0; ; attempt++ {
		err = cp.start(ctx, b)
		if err == nil || attempt == 2 || ctx.Err() != nil {
			break
		}
		cp.Stop() // a port taken meanwhile: try others
	}
	if err != nil {
		return cp, err
	}
	if err := cp.waitReady(ctx); err != nil {
		return cp, err
	}
	if err := EnsureNamespace(ctx, cp.Client, "default"); err != nil {
		return cp, err
	}
	return cp, nil
}

func (cp *ControlPlane) start(ctx context.Context, b Binaries) error {
	ports, err := FreePorts(3)
	if err != nil {
		return err
	}
	client, peer, secure := ports[0], ports[1], ports[2]
	etcdDir := filepath.Join(cp.Dir, "etcd-data")
	_ = os.RemoveAll(etcdDir)
	cp.etcd, err = StartProcess(cp.Dir, "etcd", b.Etcd,
		"--data-dir", etcdDir,
		"--listen-client-urls", "http://"+hostPort(client),
		"--advertise-client-urls", "http://"+hostPort(client),
		"--listen-peer-urls", "http://"+hostPort(peer),
		"--initial-advertise-peer-urls", "http://"+hostPort(peer),
		"--initial-cluster", "default=http://"+hostPort(peer),
		"--unsafe-no-fsync", "--quota-backend-bytes", "4294967296")
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, "http://"+hostPort(client)+"/health", nil, cp.etcd, 60*time.Second); err != nil {
		return fmt.Errorf("kubetest: etcd: %w\n%s", err, cp.etcd.LogTail(2000))
	}
	pub, key, err := writeKeys(cp.Dir)
	if err != nil {
		return err
	}
	tokens := filepath.Join(cp.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	cp.apiserver, err = StartProcess(cp.Dir, "kube-apiserver", b.APIServer,
		"--etcd-servers", "http://"+hostPort(client),
		"--secure-port", fmt.Sprint(secure), "--bind-address", "127.0.0.1",
		"--cert-dir", filepath.Join(cp.Dir, "certs"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", pub, "--service-account-signing-key-file", key,
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--max-requests-inflight", "1000", "--max-mutating-requests-inflight", "500",
		// No node-lifecycle controller runs to take the not-ready taint
		// off new nodes (scheduler_perf's test server disables it too).
		"--disable-admission-plugins", "TaintNodesByCondition",
		// Kubernetes 1.37's gang scheduling (Workload and PodGroup), beta
		// but off by default: on here, for the scheduler that turns its
		// gate on too (TestE2EPodGroups); nothing else changes without
		// spec.schedulingGroup.
		"--feature-gates", "GenericWorkload=true",
		"--runtime-config", "scheduling.k8s.io/v1beta1=true")
	if err != nil {
		return err
	}
	url := "https://" + hostPort(secure)
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, []byte(kubeconfig(url, adminToken)), 0o600); err != nil {
		return err
	}
	cp.Config = &rest.Config{
		Host:            url,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             500,
		Burst:           1000,
	}
	cp.Client, err = kubernetes.NewForConfig(cp.Config)
	return err
}

// waitReady polls /readyz until it answers ok.
func (cp *ControlPlane) waitReady(ctx context.Context) error {
	hdr := http.Header{"Authorization": []string{"Bearer " + adminToken}}
	if err := waitHTTP(ctx, cp.Config.Host+"/readyz", hdr, cp.apiserver, 4*time.Minute); err != nil {
		return fmt.Errorf("kubetest: kube-apiserver: %w\n%s", err, cp.apiserver.LogTail(3000))
	}
	return nil
}

// Stop ends the API server and etcd (SIGTERM, then SIGKILL after 10 s).
func (cp *ControlPlane) Stop() {
	if cp == nil {
		return
	}
	cp.apiserver.Stop(10 * time.Second)
	cp.etcd.Stop(10 * time.Second)
}

// APIServerLog returns the tail of the API server's log.
func (cp *ControlPlane) APIServerLog(n int) string { return cp.apiserver.LogTail(n) }

// WriteKubeconfig writes a kubeconfig that reaches the API server with a
// bearer token (a ServiceAccount's, say).
func (cp *ControlPlane) WriteKubeconfig(path, token string) error {
	return os.WriteFile(path, []byte(kubeconfig(cp.Config.Host, token)), 0o600)
}

func kubeconfig(url, token string) string {
	return strings.Join([]string{
		"apiVersion: v1",
		"kind: Config",
		"clusters:",
		"- name: e2e",
		"  cluster:",
		"    server: " + url,
		"    insecure-skip-tls-verify: true",
		"users:",
		"- name: admin",
		"  user:",
		"    token: " + token,
		"contexts:",
		"- name: e2e",
		"  context:",
		"    cluster: e2e",
		"    user: admin",
		"current-context: e2e",
		"",
	}, "\n")
}

// writeKeys writes the service-account signing key pair.
func writeKeys(dir string) (pub, key string, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return "", "", err
	}
	pub, key = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	kb := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return pub, key, os.WriteFile(key, kb, 0o600)
}

// waitHTTP polls url until it answers 200, the process exits, or the
// timeout or ctx ends.
func waitHTTP(ctx context.Context, url string, hdr http.Header, p *Process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a loopback test server's self-signed certificate
	}
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header = hdr
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if done, perr := p.Exited(); done {
			return fmt.Errorf("%w (%w) before %s answered", errExited, perr, url)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %s", url, timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// EnsureNamespace creates the namespace (unless it is "default") and its
// default ServiceAccount, which pods need and no controller creates here.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	return retry(ctx, func() error {
		if ns != "default" {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
}

// retry runs f until it succeeds or ctx ends (the API server may still be
// settling right after /readyz says ok).
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
