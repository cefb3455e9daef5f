package gpusched

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RecordKey signs the device records the plugin writes on the pods it
// binds (model.AnnotationGPUs with model.AnnotationGPUsMAC), so that a
// restarted plugin believes a pod's devices only where a plugin holding
// the key wrote them: a tenant can edit its pods' annotations, not forge
// the record. It is immutable: safe for concurrent use.
type RecordKey struct{ key []byte }

// Bounds on a record key.
const (
	// MinRecordKeyBytes is the shortest key accepted.
	MinRecordKeyBytes = 16
	maxRecordKeyBytes = 4096
	// recordKeySecretKey is the key of the Secret's data that holds it.
	recordKeySecretKey = "key"
)

// NewRecordKey returns a key of the given bytes (at least
// MinRecordKeyBytes).
func NewRecordKey(key []byte) (*RecordKey, error) {
	if len(key) < MinRecordKeyBytes || len(key) > maxRecordKeyBytes {
		return nil, fmt.Errorf("%w: a record key of %d bytes (want %d to %d)", ErrArgs, len(key), MinRecordKeyBytes, maxRecordKeyBytes)
	}
	return &RecordKey{key: append([]byte(nil), key...)}, nil
}

// RandomRecordKey returns a fresh random key: records written under it do
// not verify after a restart (their pods are booked as stand-ins).
func RandomRecordKey() *RecordKey {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return &RecordKey{key: b}
}

// Sign returns the record of a pod's devices on a node.
func (k *RecordKey) Sign(uid types.UID, node string, devices []int) string {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("gpusched.io/gpus/v1\x00"))
	m.Write([]byte(uid))
	m.Write([]byte{0})
	m.Write([]byte(node))
	m.Write([]byte{0})
	m.Write([]byte(model.FormatIndices(devices)))
	return "v1:" + hex.EncodeToString(m.Sum(nil)[:16])
}

// Verify reports whether mac is the record of the devices.
func (k *RecordKey) Verify(uid types.UID, node string, devices []int, mac string) bool {
	if k == nil || len(mac) > 64 {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(k.Sign(uid, node, devices)))
}

// RecordKeyCommand is the install step that makes the Secret
// namespace/name holding a record key: 32 random bytes, hex (64 bytes of
// key). A Secret with a random key cannot be a static manifest, and the
// scheduler may read its Secret only (#40: its right to create Secrets in
// kube-system let it create any), so the admin runs this once.
func RecordKeyCommand(namespace, name string) string {
	return "kubectl -n " + namespace + " create secret generic " + name + ` --from-literal=key="$(openssl rand -hex 32)"`
}

// Tries of the record key's Secret at start, recordKeyWait apart and
// doubling, for errors that may pass (the API server unreachable); a
// missing Secret or a refusal fails at once.
const recordKeyTries = 4

var recordKeyWait = time.Second // a variable for the tests

// loadRecordKey finds the plugin's key: the file Args.RecordKeyFile (a
// mounted Secret), else the Secret Args.RecordKeySecret, which must exist
// (ErrNoRecordKey, naming the Secret and RecordKeyCommand), else a random
// key for this process only.
func loadRecordKey(ctx context.Context, a *Args, cs kubernetes.Interface) (*RecordKey, error) {
	if a.RecordKeyFile != "" {
		b, err := os.ReadFile(a.RecordKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: recordKeyFile: %w", ErrArgs, err)
		}
		return NewRecordKey([]byte(strings.TrimSpace(string(b))))
	}
	if a.RecordKeySecret == "" {
		return RandomRecordKey(), nil
	}
	ns, name, _ := strings.Cut(a.RecordKeySecret, "/")
	if cs == nil {
		return nil, fmt.Errorf("%w: no client to read the Secret %s", ErrNoRecordKey, a.RecordKeySecret)
	}
	s, err := getSecret(ctx, cs, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: the Secret %s does not exist; create it once at install: %s", ErrNoRecordKey, a.RecordKeySecret, RecordKeyCommand(ns, name))
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%w: reading the Secret %s is forbidden (the scheduler's Role needs get on it: kube/deploy/rbac.yaml): %w", ErrNoRecordKey, a.RecordKeySecret, err)
	case err != nil:
		return nil, fmt.Errorf("%w: reading the Secret %s: %w", ErrNoRecordKey, a.RecordKeySecret, err)
	}
	k, err := NewRecordKey(s.Data[recordKeySecretKey])
	if err != nil {
		return nil, fmt.Errorf("%w: the Secret %s, key %q: %w; make it again: kubectl -n %s delete secret %s && %s",
			ErrNoRecordKey, a.RecordKeySecret, recordKeySecretKey, err, ns, name, RecordKeyCommand(ns, name))
	}
	return k, nil
}

// getSecret reads a Secret, trying again (recordKeyTries in all) while
// the error may pass.
func getSecret(ctx context.Context, cs kubernetes.Interface, ns, name string) (*corev1.Secret, error) {
	wait := recordKeyWait
	for try := 1; ; try++ {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil || try == recordKeyTries || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}
