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

// loadRecordKey finds the plugin's key: the file Args.RecordKeyFile (a
// mounted Secret), else the Secret Args.RecordKeySecret (created with a
// random key if missing), else a random key for this process only.
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
		return nil, errors.New("gpusched: no client to read the record key's Secret")
	}
	secrets := cs.CoreV1().Secrets(ns)
	for range 3 {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return NewRecordKey(s.Data[recordKeySecretKey])
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("gpusched: reading the record key's Secret %s: %w", a.RecordKeySecret, err)
		}
		k := RandomRecordKey()
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "gpusched-scheduler"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{recordKeySecretKey: []byte(hex.EncodeToString(k.key))},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("gpusched: creating the record key's Secret %s: %w", a.RecordKeySecret, err)
		}
		// Created (or another replica did): read it back, so that every
		// replica signs with the same key.
	}
	return nil, fmt.Errorf("gpusched: the record key's Secret %s keeps changing", a.RecordKeySecret)
}
