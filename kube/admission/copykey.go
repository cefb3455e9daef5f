package admission

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The copies of preempted bare pods. deleteWrites keeps a gated copy of
// each in a ConfigMap of the controller's namespace (requeueName) before
// it deletes the pod, and requeueOne creates the pod again from it. A
// copy is a request to create a pod in a tenant's namespace, written
// where whoever may write ConfigMaps in the controller's namespace could
// write one too: so each is signed (HMAC-SHA256 under Config.CopyKey,
// kept in a Secret of that namespace, over the pod's namespace, name and
// former UID, which the state's record names, and the copy's bytes), as
// the scheduler plugin signs its device records (kube/gpusched,
// RecordKey), and before a pod is created from one the signature is
// checked, and that the tenancy manages its namespace, and that it is the
// copy of the record's pod, gated and unbound. A copy that fails is
// dropped with a Warning event ([ReasonBadCopy]) on the state ConfigMap.

// Names and bounds of the copies and their key.
const (
	// copyMACKey is the key of a copy's signature in its ConfigMap (the
	// pod's JSON is under requeueKey).
	copyMACKey = "mac"
	// MinCopyKeyBytes is the shortest Config.CopyKey accepted.
	MinCopyKeyBytes = 16
	maxCopyKeyBytes = 4096
	// CopyKeySecretKey is the key of the Secret's data that holds the
	// copy key (LoadCopyKey).
	CopyKeySecretKey = "key"
	// DefaultCopyKeySecret is the name kube/deploy gives the copy key's
	// Secret in the controller's namespace (made at install; the
	// controller may only get it).
	DefaultCopyKeySecret = "gpusched-admission-copy-key"
	// copyMACPrefix versions the signature.
	copyMACPrefix = "v1:"
)

// Event reasons of the removal paths (preemption, deletion, requeue).
const (
	// ReasonNotRequeued: a preempted bare pod was deleted without a copy
	// (one would be larger than a ConfigMap may hold): it is not created
	// again.
	ReasonNotRequeued = "GPUSchedNotRequeued"
	// ReasonBadCopy: the copy of a requeued pod failed its checks (its
	// signature, its namespace, its content) and was dropped; the event
	// is on the state ConfigMap.
	ReasonBadCopy = "GPUSchedBadCopy"
	// ReasonGraceCapped: a terminating GPU pod's deletion was cut short
	// to the admin's maximum grace (Normal), or the pod, still there past
	// it, was force-deleted (Warning).
	ReasonGraceCapped = "GPUSchedGraceCapped"
)

// ErrBadCopy is wrapped by the errors of a requeued pod's copy that fails
// its checks.
var ErrBadCopy = errors.New("admission: bad copy of a requeued pod")

// copyKey signs the copies. Immutable: safe for concurrent use.
type copyKey struct{ key []byte }

// newCopyKey returns the key of the bytes, or a random one of this
// process for none.
func newCopyKey(b []byte) *copyKey {
	if len(b) == 0 {
		b = make([]byte, 32)
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	}
	return &copyKey{key: append([]byte(nil), b...)}
}

// sign returns the signature of the copy b of pod ns/name, former UID
// uid. The fields are length-prefixed, so that no two inputs share one.
func (k *copyKey) sign(rq requeued, b []byte) string {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("gpusched.io/pod-copy/v1\x00"))
	var n [8]byte
	for _, f := range [][]byte{[]byte(rq.NS), []byte(rq.Name), []byte(rq.Old), b} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write(f)
	}
	return copyMACPrefix + hex.EncodeToString(m.Sum(nil))
}

// verify reports whether mac is the signature of the copy.
func (k *copyKey) verify(rq requeued, b []byte, mac string) bool {
	if len(mac) != len(copyMACPrefix)+2*sha256.Size {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(k.sign(rq, b)))
}

// decodeCopy reads the copy b of the requeued pod rq, signed mac (trusted
// skips the signature: a copy this process made and kept in memory), and
// checks it: the signature, its size, that it is the pod rq names (its
// namespace and name), that managed(namespace), and that it is gated,
// unbound and without the identity of an existing object. Every failure
// wraps ErrBadCopy; it never panics, whatever the bytes.
func (k *copyKey) decodeCopy(rq requeued, b []byte, mac string, trusted bool, managed func(string) bool) (*corev1.Pod, error) {
	bad := func(format string, args ...any) (*corev1.Pod, error) {
		return nil, fmt.Errorf("%w %s/%s (copy %s): %s", ErrBadCopy, cut(rq.NS), cut(rq.Name), cut(rq.Copy), fmt.Sprintf(format, args...))
	}
	switch {
	case len(b) == 0:
		return bad("no copy")
	case len(b) > maxPodCopy:
		return bad("%d bytes, more than %d", len(b), maxPodCopy)
	case !trusted && !k.verify(rq, b, mac):
		return bad("its signature does not verify (not written by a controller holding the copy key)")
	case managed == nil || !managed(rq.NS):
		return bad("namespace %s is not one the tenancy manages", cut(rq.NS))
	}
	var p corev1.Pod
	if err := json.Unmarshal(b, &p); err != nil {
		return bad("%v", cut(err.Error()))
	}
	switch {
	case p.Namespace != rq.NS || p.Name != rq.Name:
		return bad("it is the copy of pod %s/%s", cut(p.Namespace), cut(p.Name))
	case !hasGate(p.Spec.SchedulingGates):
		return bad("it has no scheduling gate %s", GateName)
	case p.Spec.NodeName != "" || p.UID != "" || p.ResourceVersion != "" || p.DeletionTimestamp != nil:
		return bad("it names a node, a UID, a resource version or a deletion")
	}
	return &p, nil
}

// LoadCopyKey reads Config.CopyKey from the Secret ns/name (data key
// CopyKeySecretKey), which the admin creates at install time (a random
// key: `kubectl -n NS create secret generic NAME
// --from-literal=key=$(openssl rand -hex 32)`): the controller needs only
// get on it, never create. Surrounding white space is trimmed.
func LoadCopyKey(ctx context.Context, cs kubernetes.Interface, ns, name string) ([]byte, error) {
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: reading the copy key's Secret %s/%s: %w", ErrConfig, ns, name, err)
	}
	return copyKeyBytes(s.Data[CopyKeySecretKey], "Secret "+ns+"/"+name+" key "+CopyKeySecretKey)
}

// ReadCopyKeyFile reads Config.CopyKey from a file (a mounted Secret).
func ReadCopyKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: copy key: %w", ErrConfig, err)
	}
	return copyKeyBytes(b, path)
}

func copyKeyBytes(b []byte, where string) ([]byte, error) {
	k := []byte(strings.TrimSpace(string(b)))
	if len(k) < MinCopyKeyBytes || len(k) > maxCopyKeyBytes {
		return nil, fmt.Errorf("%w: the copy key in %s has %d bytes (want %d to %d)", ErrConfig, where, len(k), MinCopyKeyBytes, maxCopyKeyBytes)
	}
	return k, nil
}
