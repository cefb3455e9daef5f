package blobstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func small(t *testing.T) {
	t.Helper()
	in, ch := inlineMax, chunkMax
	inlineMax, chunkMax = 1<<10, 1<<10
	t.Cleanup(func() { inlineMax, chunkMax = in, ch })
}

func newStore() (*Store, *fake.Clientset) {
	cs := fake.NewClientset()
	return &Store{Client: cs, Namespace: "ns", Name: "st", ManagedBy: "test"}, cs
}

// noise is n bytes that do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func configMaps(t *testing.T, cs *fake.Clientset) []string {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	return out
}

func TestEmptyLoadsNothing(t *testing.T) {
	s, _ := newStore()
	doc, err := s.Load(context.Background())
	require.NoError(t, err)
	assert.Nil(t, doc)
}

// Inline, then chunked, then inline again: each load returns the last
// save, a new store (a restart) reads it, and the chunks of other
// generations are dropped.
func TestSaveLoadInlineAndChunked(t *testing.T) {
	small(t)
	ctx := context.Background()
	s, cs := newStore()
	for i, doc := range [][]byte{[]byte(`{"a":1}`), noise(3500), noise(2100), []byte(`{"b":2}`)} {
		require.NoError(t, s.Save(ctx, doc), "save %d", i)
		fresh := &Store{Client: cs, Namespace: "ns", Name: "st"}
		got, err := fresh.Load(ctx)
		require.NoError(t, err, "load %d", i)
		assert.Equal(t, doc, got, "load %d", i)
		assert.Equal(t, int64(i+1), fresh.gen)
		switch i {
		case 1:
			assert.ElementsMatch(t, []string{"st", "st-0-0", "st-0-1", "st-0-2", "st-0-3"}, configMaps(t, cs), "generation 2: slot 0")
		case 2:
			assert.ElementsMatch(t, []string{"st", "st-1-0", "st-1-1", "st-1-2"}, configMaps(t, cs), "generation 3: slot 1, slot 0 dropped")
		case 3:
			assert.ElementsMatch(t, []string{"st"}, configMaps(t, cs))
		}
	}
}

// A save whose head write fails leaves the last document; the next save
// (its generation read again) goes on from the head.
func TestFailedHeadKeepsTheLast(t *testing.T) {
	small(t)
	ctx := context.Background()
	s, cs := newStore()
	first := noise(2500)
	require.NoError(t, s.Save(ctx, first))
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).Name == "st" {
			return true, nil, errors.New("the API is down")
		}
		return false, nil, nil
	})
	require.Error(t, s.Save(ctx, noise(2500)))
	got, err := (&Store{Client: cs, Namespace: "ns", Name: "st"}).Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, first, got, "the chunks of the failed save are in the other slot")
	cs.ReactionChain = cs.ReactionChain[1:]
	last := noise(2500)
	require.NoError(t, s.Save(ctx, last))
	got, err = (&Store{Client: cs, Namespace: "ns", Name: "st"}).Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, last, got)
}

// Every way a saved document can be wrong is ErrCorrupt naming it.
func TestCorruptIsAnError(t *testing.T) {
	small(t)
	ctx := context.Background()
	cases := map[string]struct {
		edit func(cs *fake.Clientset)
		want string
	}{
		"no header": {func(cs *fake.Clientset) { edit(cs, "st", func(cm *corev1.ConfigMap) { cm.Data = nil }) }, "no head.json"},
		"bad json":  {func(cs *fake.Clientset) { edit(cs, "st", func(cm *corev1.ConfigMap) { cm.Data[keyHead] = "{" }) }, "head.json"},
		"version": {func(cs *fake.Clientset) {
			edit(cs, "st", func(cm *corev1.ConfigMap) { cm.Data[keyHead] = `{"version":9,"generation":1,"bytes":1,"sha256":""}` })
		}, "version 9"},
		"chunks": {func(cs *fake.Clientset) {
			edit(cs, "st", func(cm *corev1.ConfigMap) {
				cm.Data[keyHead] = fmt.Sprintf(`{"version":1,"generation":1,"bytes":1,"sha256":"%064d","chunks":1000}`, 0)
			})
		}, "1000 chunks"},
		"missing chunk": {func(cs *fake.Clientset) {
			require.NoError(t, cs.CoreV1().ConfigMaps("ns").Delete(ctx, "st-1-1", metav1.DeleteOptions{}))
		}, "chunk 1 of 3 is missing"},
		"chunk of another generation": {func(cs *fake.Clientset) {
			edit(cs, "st-1-0", func(cm *corev1.ConfigMap) { cm.Labels[labelGen] = "7" })
		}, "not of generation 1"},
		"flipped byte": {func(cs *fake.Clientset) {
			edit(cs, "st-1-2", func(cm *corev1.ConfigMap) { cm.BinaryData[keyChunk][0] ^= 1 })
		}, "SHA-256"},
		"short": {func(cs *fake.Clientset) {
			edit(cs, "st-1-2", func(cm *corev1.ConfigMap) { cm.BinaryData[keyChunk] = cm.BinaryData[keyChunk][1:] })
		}, "bytes, the header says"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, cs := newStore()
			require.NoError(t, s.Save(ctx, noise(2500)))
			tc.edit(cs)
			_, err := (&Store{Client: cs, Namespace: "ns", Name: "st"}).Load(ctx)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "ns/st")
		})
	}
}

func edit(cs *fake.Clientset, name string, f func(*corev1.ConfigMap)) {
	cm, err := cs.CoreV1().ConfigMaps("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	f(cm)
	if _, err := cs.CoreV1().ConfigMaps("ns").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		panic(err)
	}
}

func TestTooLargeIsNotSaved(t *testing.T) {
	small(t)
	s, cs := newStore()
	err := s.Save(context.Background(), noise(DefaultMaxChunks*chunkMax+1))
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Empty(t, configMaps(t, cs))
}

func TestNotGzipIsAnError(t *testing.T) {
	_, err := gunzip([]byte("not gzip"))
	require.Error(t, err)
}

func FuzzReadHeader(f *testing.F) {
	f.Add(`{"version":1,"generation":3,"bytes":10,"sha256":"` + fmt.Sprintf("%064d", 0) + `","chunks":2}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		h, err := readHeader(s, DefaultMaxChunks)
		if err == nil && (h.Chunks > DefaultMaxChunks || h.Bytes > max(h.Chunks, 1)*chunkMax || h.Gen < 1) {
			t.Fatalf("accepted %+v", h)
		}
	})
}

// Two writers in turn (a leader handing over to the next, each with its
// own Store): each save goes past the live head's generation, so that its
// chunks never overwrite the slot the live head names.
func TestSecondWriterGoesPastTheHead(t *testing.T) {
	small(t)
	ctx := context.Background()
	a, cs := newStore()
	b := &Store{Client: cs, Namespace: "ns", Name: "st"}
	for i, w := range []*Store{a, b, a, b, a} {
		doc := noise(2500)
		require.NoError(t, w.Save(ctx, doc), "save %d", i)
		fresh := &Store{Client: cs, Namespace: "ns", Name: "st"}
		got, err := fresh.Load(ctx)
		require.NoError(t, err)
		assert.Equal(t, doc, got)
		assert.Equal(t, int64(i+1), fresh.gen, "save %d: generation", i)
	}
}

// A store of few chunks refuses what needs more, and names every
// ConfigMap it may write.
func TestMaxChunks(t *testing.T) {
	small(t)
	s, cs := newStore()
	s.MaxChunks = 2
	require.ErrorIs(t, s.Save(context.Background(), noise(3*chunkMax)), ErrTooLarge)
	assert.Empty(t, configMaps(t, cs))
	require.NoError(t, s.Save(context.Background(), noise(chunkMax+10)))
	assert.Equal(t, []string{"st", "st-0-0", "st-0-1", "st-1-0", "st-1-1"}, s.Names())
	assert.Subset(t, s.Names(), configMaps(t, cs))
}
