package admission

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func managedNS(ns string) bool { return ns == "team-a" || ns == "team-b" }

// signedCopy is a genuine copy of a gated pod team-a/x (former UID u1),
// its record and signature under testCopyKey.
func signedCopy(t testing.TB) (requeued, []byte, string) {
	t.Helper()
	p := requeueCopy(gatedPod("team-a", "x", 2, rates("v100=1")), nil)
	b, err := podCopy(p)
	require.NoError(t, err)
	rq := requeued{NS: "team-a", Name: "x", Old: "u1", Copy: "c"}
	return rq, b, newCopyKey(testCopyKey).sign(rq, b)
}

// A copy is created only as it was signed: any change to its bytes, to
// the namespace, name or former UID its record names, or another key,
// fails; so does a copy of a namespace no tenant has, or one ungated,
// bound, of another pod or not a pod.
func TestDecodeCopyChecks(t *testing.T) {
	k := newCopyKey(testCopyKey)
	rq, b, mac := signedCopy(t)
	p, err := k.decodeCopy(rq, b, mac, false, managedNS)
	require.NoError(t, err)
	assert.Equal(t, "x", p.Name)
	assert.True(t, hasGate(p.Spec.SchedulingGates))

	flip := append([]byte(nil), b...)
	flip[len(flip)/2] ^= 1
	other := rq
	other.Old = "u2"
	moved := rq
	moved.NS = "team-b"
	for name, c := range map[string]struct {
		rq  requeued
		b   []byte
		mac string
		key *copyKey
	}{
		"bytes changed":   {rq, flip, mac, k},
		"another UID":     {other, b, mac, k},
		"another ns":      {moved, b, mac, k},
		"another key":     {rq, b, mac, newCopyKey([]byte("another key of 16+ bytes"))},
		"a random key":    {rq, b, mac, newCopyKey(nil)},
		"no signature":    {rq, b, "", k},
		"signature cut":   {rq, b, mac[:20], k},
		"signature upper": {rq, b, strings.ToUpper(mac), k},
		"no copy":         {rq, nil, mac, k},
	} {
		_, err := c.key.decodeCopy(c.rq, c.b, c.mac, false, managedNS)
		assert.ErrorIs(t, err, ErrBadCopy, name)
	}

	// Signed, but not a pod to create.
	resign := func(mod func(*corev1.Pod), rq requeued) (requeued, []byte, string) {
		p := requeueCopy(gatedPod("team-a", "x", 2, nil), nil)
		mod(p)
		b, err := json.Marshal(p)
		require.NoError(t, err)
		return rq, b, k.sign(rq, b)
	}
	for name, mod := range map[string]func(*corev1.Pod){
		"ungated":    func(p *corev1.Pod) { p.Spec.SchedulingGates = nil },
		"bound":      func(p *corev1.Pod) { p.Spec.NodeName = "n1" },
		"with a UID": func(p *corev1.Pod) { p.UID = "u9" },
		"other name": func(p *corev1.Pod) { p.Name = "y" },
		"other ns":   func(p *corev1.Pod) { p.Namespace = "team-b" },
	} {
		rq, b, mac := resign(mod, rq)
		_, err := k.decodeCopy(rq, b, mac, false, managedNS)
		assert.ErrorIs(t, err, ErrBadCopy, name)
	}
	kube := requeued{NS: "kube-system", Name: "x", Old: "u1", Copy: "c"}
	_, b2, mac2 := resign(func(p *corev1.Pod) { p.Namespace = "kube-system" }, kube)
	_, err = k.decodeCopy(kube, b2, mac2, false, managedNS)
	require.ErrorIs(t, err, ErrBadCopy, "signed, but in a namespace no tenant has")
	assert.Contains(t, err.Error(), "not one the tenancy manages")
	_, err = k.decodeCopy(rq, []byte("{"), "", true, managedNS)
	assert.ErrorIs(t, err, ErrBadCopy, "not JSON, even in memory")
	_, err = k.decodeCopy(rq, make([]byte, maxPodCopy+1), "", true, managedNS)
	assert.ErrorIs(t, err, ErrBadCopy, "too large")
	_, err = k.decodeCopy(rq, b, mac, false, nil)
	assert.ErrorIs(t, err, ErrBadCopy, "no tenancy")
}

// FuzzDecodeCopy: whatever a copy's ConfigMap and its record hold, the
// decoder returns a gated, unbound pod of the record's managed namespace
// and name, signed, or an error wrapping ErrBadCopy; never a panic.
func FuzzDecodeCopy(f *testing.F) {
	rq, b, mac := signedCopy(f)
	f.Add(rq.NS, rq.Name, string(rq.Old), b, mac)
	f.Add(rq.NS, rq.Name, string(rq.Old), []byte(`{"metadata":{"name":"x","namespace":"team-a"}}`), mac)
	f.Add("kube-system", "x", "u1", b, "")
	f.Add("", "", "", []byte("null"), "v1:")
	k := newCopyKey(testCopyKey)
	f.Fuzz(func(t *testing.T, ns, name, uid string, b []byte, mac string) {
		rq := requeued{NS: ns, Name: name, Old: types.UID(uid), Copy: "c"}
		for _, trusted := range []bool{false, true} {
			p, err := k.decodeCopy(rq, b, mac, trusted, managedNS)
			if err != nil {
				if p != nil || !errors.Is(err, ErrBadCopy) {
					t.Fatalf("pod %v with error %v", p, err)
				}
				continue
			}
			if !trusted && !k.verify(rq, b, mac) {
				t.Fatal("accepted without a signature")
			}
			if p.Namespace != ns || p.Name != name || !managedNS(ns) || !hasGate(p.Spec.SchedulingGates) || p.Spec.NodeName != "" || p.UID != "" {
				t.Fatalf("accepted %s/%s node %q uid %q gates %v", p.Namespace, p.Name, p.Spec.NodeName, p.UID, p.Spec.SchedulingGates)
			}
		}
	})
}

// The copy key comes from a Secret the admin made (get only) or a file
// (a mounted Secret), trimmed, at least MinCopyKeyBytes.
func TestLoadCopyKey(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpusched", Name: "copy-key"},
		Data: map[string][]byte{CopyKeySecretKey: []byte(string(testCopyKey) + "\n")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gpusched", Name: "short"}, Data: map[string][]byte{CopyKeySecretKey: []byte("abc")}})
	k, err := LoadCopyKey(ctx, cs, "gpusched", "copy-key")
	require.NoError(t, err)
	assert.Equal(t, testCopyKey, k)
	_, err = LoadCopyKey(ctx, cs, "gpusched", "short")
	assert.ErrorIs(t, err, ErrConfig)
	_, err = LoadCopyKey(ctx, cs, "gpusched", "missing")
	assert.ErrorIs(t, err, ErrConfig)
	for _, a := range cs.Actions() {
		assert.Equal(t, "get", a.GetVerb(), "the controller only reads the Secret")
	}
	path := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(path, append([]byte("  "), testCopyKey...), 0o600))
	k, err = ReadCopyKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, testCopyKey, k)
	_, err = ReadCopyKeyFile(filepath.Join(t.TempDir(), "none"))
	assert.ErrorIs(t, err, ErrConfig)
}
