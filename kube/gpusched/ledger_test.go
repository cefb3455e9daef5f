package gpusched

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gpusched/gpusched/kube/model"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func anyType(topology.GPUType) bool { return true }

type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) warn(_ any, reason, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, reason+": "+msg)
}

func TestLedgerDGX1PairIsNVLinked(t *testing.T) {
	l := newTestLedger(model.NodeOptions{}, nil)
	l.OnNode(node("dgx", kubeV100, 8, true, map[string]string{model.AnnotationLinks: dgx1Links}, nil))
	devs, err := l.Reserve(gpuPod("a", 2), "dgx", 2)
	require.NoError(t, err)
	// The best pairs of a DGX-1 are its NV2 links (score 200).
	c8, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	require.NoError(t, err)
	require.Len(t, devs, 2)
	assert.Equal(t, topology.Link{Class: topology.LinkNVLink, NVLinks: 2}, c8.Servers[0].Link(devs[0], devs[1]))
	c, err := l.Choose("dgx", 2)
	require.NoError(t, err)
	assert.Equal(t, 200, c.Score, "the next pair is an NV2 pair too")
	assert.Equal(t, 200, c.Best)
	require.NoError(t, l.Check())
}

const kubeV100 = "Tesla-V100-SXM2-16GB"

func TestLedgerRebuildFromAnnotations(t *testing.T) {
	// A first ledger books pods; a second one, fed the same objects in
	// another order (pods before nodes, as informers may deliver them),
	// books the same GPUs, and so never hands them out twice.
	n1 := node("n1", kubeV100, 8, true, map[string]string{model.AnnotationLinks: dgx1Links}, nil)
	n2 := node("n2", kubeV100, 8, true, nil, nil)
	first := newTestLedger(model.NodeOptions{}, nil)
	first.OnNode(n1)
	first.OnNode(n2)
	var bound []*corev1.Pod
	for i, n := range []int{2, 4, 1, 8} {
		p := gpuPod(fmt.Sprint("p", i), n)
		nodeName := "n1"
		if i == 3 {
			nodeName = "n2"
		}
		devs, err := first.Reserve(p, nodeName, n)
		require.NoError(t, err)
		onNode(nodeName, model.FormatIndices(devs))(p)
		bound = append(bound, p)
	}
	second := newTestLedger(model.NodeOptions{}, nil)
	for _, p := range bound {
		second.OnPod(p)
	}
	second.OnNode(n2)
	second.OnNode(n1)
	for _, p := range bound {
		n1, d1, ok1 := first.Booking(p.UID)
		n2, d2, ok2 := second.Booking(p.UID)
		require.True(t, ok1 && ok2)
		assert.Equal(t, n1, n2)
		assert.Equal(t, d1, d2)
	}
	c, err := second.Choose("n1", 1)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Free, "7 of n1's GPUs are booked")
	assert.ErrorIs(t, second.Fit("n2", 1, anyType), ErrNoRoom)
	require.NoError(t, second.Check())
}

func TestLedgerHealth(t *testing.T) {
	l := newTestLedger(model.NodeOptions{}, nil)
	n := node("n", kubeV100, 8, true, nil, nil)
	l.OnNode(n)
	p := gpuPod("p", 2, onNode("n", "0,1"))
	l.OnPod(p)
	require.NoError(t, l.Fit("n", 6, anyType))

	// Not Ready: nothing fits, the bound pod keeps its GPUs.
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	l.OnNode(n)
	assert.ErrorIs(t, l.Fit("n", 1, anyType), ErrNoRoom)
	_, devs, _ := l.Booking(p.UID)
	assert.Equal(t, []int{0, 1}, devs)
	// A pod bound meanwhile (before a restart, say) books failed GPUs too.
	q := gpuPod("q", 1, onNode("n", "2"))
	l.OnPod(q)
	require.NoError(t, l.Check())

	// Ready again, two GPUs marked unhealthy by annotation.
	n.Status.Conditions[0].Status = corev1.ConditionTrue
	n.Annotations = map[string]string{model.AnnotationUnhealthy: "6,7"}
	l.OnNode(n)
	assert.NoError(t, l.Fit("n", 3, anyType))
	assert.ErrorIs(t, l.Fit("n", 4, anyType), ErrNoRoom, "8 - 3 booked - 2 failed")
	devs, err := l.Reserve(gpuPod("r", 3), "n", 3)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4, 5}, devs)

	// Deleted: unknown; the pods free their GPUs when they go.
	l.OnNodeDelete("n")
	assert.ErrorIs(t, l.Fit("n", 1, anyType), ErrUnknownNode)
	l.OnPodDelete(p.UID)
	require.NoError(t, l.Check())
}

func TestLedgerStandInsAndConflicts(t *testing.T) {
	w := &warnings{}
	l := newTestLedger(model.NodeOptions{}, w.warn)
	l.OnNode(node("n", kubeV100, 4, true, nil, nil))
	// Bound by another scheduler, without the annotation: stand-ins, reported.
	l.OnPod(gpuPod("other", 2, onNode("n", "")))
	_, devs, _ := l.Booking("uid-other")
	assert.Equal(t, []int{0, 1}, devs)
	require.NotEmpty(t, w.got)
	assert.Contains(t, w.got[len(w.got)-1], "InvalidGPUAnnotation")
	// A verified record naming GPUs a stand-in holds: the stand-in moves.
	l.OnPod(gpuPod("mine", 2, onNode("n", "1,2")))
	_, devs, _ = l.Booking("uid-mine")
	assert.Equal(t, []int{1, 2}, devs)
	_, devs, _ = l.Booking("uid-other")
	assert.Equal(t, []int{0, 3}, devs)
	_, err := l.Choose("n", 1)
	require.ErrorIs(t, err, ErrNoRoom)
	require.NoError(t, l.Check())
	// Two verified records of one GPU (a double booking): the second is a
	// stand-in, reported; with no GPU free it holds none.
	l.OnPod(gpuPod("twice", 1, onNode("n", "2")))
	assert.Contains(t, strings.Join(w.got, "\n"), "GPUConflict")
	_, devs, _ = l.Booking("uid-twice")
	assert.Empty(t, devs)
	require.NoError(t, l.Check())
	// A malformed or forged annotation is a stand-in, reported.
	l.OnPodDelete("uid-twice")
	l.OnPodDelete("uid-mine")
	l.OnPod(gpuPod("bad", 1, onNode("n", "x")))
	assert.Contains(t, w.got[len(w.got)-1], "InvalidGPUAnnotation")
	l.OnPod(gpuPod("forger", 1, forged("n", "0")))
	assert.Contains(t, w.got[len(w.got)-1], "does not verify")
	_, devs, _ = l.Booking("uid-forger")
	assert.Len(t, devs, 1)
	assert.NotEqual(t, []int{0}, devs, "GPU 0 is the other pod's")
	require.NoError(t, l.Check())
}

// The forged-annotation attack: a tenant rewrites its bound pod's
// gpus annotation to name a victim's GPUs, or indices the node lacks.
// The ledger keeps its own booking (every GPU in use stays booked; Check
// holds), and a restarted ledger, fed the pods in either order, books the
// victim on its GPUs and the forger as a stand-in on the others.
func TestLedgerForgedAnnotation(t *testing.T) {
	n := node("n", kubeV100, 8, true, nil, nil)
	victim := gpuPod("victim", 4)
	forger := gpuPod("forger", 4)
	l := newTestLedger(model.NodeOptions{}, nil)
	l.OnNode(n)
	for _, p := range []*corev1.Pod{victim, forger} {
		devs, err := l.Reserve(p, "n", 4)
		require.NoError(t, err)
		onNode("n", model.FormatIndices(devs))(p)
		l.OnPod(p)
	}
	for _, lie := range []string{"0,1,2,3", "12,13,14,15", "9"} {
		f := forger.DeepCopy()
		f.Annotations[model.AnnotationGPUs] = lie
		l.OnPod(f)
		assert.Zero(t, l.Free(anyType), "%s: GPUs in use shown free", lie)
		_, devs, _ := l.Booking(forger.UID)
		assert.Equal(t, []int{4, 5, 6, 7}, devs, lie)
		require.NoError(t, l.Check())
	}
	f := forger.DeepCopy()
	f.Annotations[model.AnnotationGPUs] = "0,1,2,3"
	for _, order := range [][]*corev1.Pod{{f, victim}, {victim, f}} {
		r := newTestLedger(model.NodeOptions{}, nil)
		r.OnNode(n)
		for _, p := range order {
			r.OnPod(p)
		}
		_, vd, _ := r.Booking(victim.UID)
		_, fd, _ := r.Booking(forger.UID)
		assert.Equal(t, []int{0, 1, 2, 3}, vd)
		assert.Equal(t, []int{4, 5, 6, 7}, fd)
		assert.Zero(t, r.Free(anyType))
		require.NoError(t, r.Check())
	}
	// A record signed under another key (another cluster's scheduler) is
	// not believed either.
	other, err := NewRecordKey([]byte("another-key-of-16-bytes"))
	require.NoError(t, err)
	p := gpuPod("elsewhere", 2, onNode("n", "0,1"))
	p.Annotations[model.AnnotationGPUsMAC] = other.Sign(p.UID, "n", []int{0, 1})
	assert.False(t, testKey.Verify(p.UID, "n", []int{0, 1}, p.Annotations[model.AnnotationGPUsMAC]))
	assert.False(t, testKey.Verify("uid-other", "n", []int{0, 1}, testKey.Sign(p.UID, "n", []int{0, 1})), "a record is its pod's only")
	assert.False(t, testKey.Verify(p.UID, "m", []int{0, 1}, testKey.Sign(p.UID, "n", []int{0, 1})), "and its node's")
}

func TestLedgerReserveRelease(t *testing.T) {
	l := newTestLedger(model.NodeOptions{}, nil)
	l.OnNode(node("n", kubeV100, 8, true, nil, nil))
	p := gpuPod("p", 4)
	_, err := l.Reserve(p, "n", 4)
	require.NoError(t, err)
	_, err = l.Reserve(gpuPod("q", 5), "n", 5)
	require.ErrorIs(t, err, ErrNoRoom)
	l.Release(p.UID)
	_, err = l.Reserve(gpuPod("q", 5), "n", 5)
	require.NoError(t, err)
	// A bound pod is not released by Unreserve.
	l.MarkBound("uid-q")
	l.Release("uid-q")
	_, _, ok := l.Booking("uid-q")
	assert.True(t, ok)
	_, err = l.Reserve(gpuPod("r", 1), "nowhere", 1)
	assert.True(t, errors.Is(err, ErrUnknownNode))
}

func TestLedgerNodeChanges(t *testing.T) {
	w := &warnings{}
	l := newTestLedger(model.NodeOptions{}, w.warn)
	n := node("n", kubeV100, 8, true, map[string]string{model.AnnotationLinks: "not a matrix"}, nil)
	l.OnNode(n)
	require.Len(t, w.got, 1)
	assert.Contains(t, w.got[0], model.AnnotationLinks)
	l.OnNode(n) // the same problem is reported once
	assert.Len(t, w.got, 1)
	l.OnPod(gpuPod("p", 2, onNode("n", "6,7")))
	// Links fixed: the node is rebuilt, its pods booked again.
	n.Annotations[model.AnnotationLinks] = dgx1Links
	l.OnNode(n)
	_, devs, _ := l.Booking("uid-p")
	assert.Equal(t, []int{6, 7}, devs)
	c, err := l.Choose("n", 6)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, c.Devices)
	// A node that loses its GPU labels and capacity leaves the ledger.
	n.Labels = nil
	n.Status.Capacity = nil
	l.OnNode(n)
	assert.ErrorIs(t, l.Fit("n", 1, anyType), ErrUnknownNode)
	require.NoError(t, l.Check())
}

// Nodes keep their own GPUs when another leaves, is rebuilt or comes
// back (the ledger caches each node's position in its cluster.State, and
// the servers after a removed one move down), and Usable tells deleted,
// NotReady and cordoned nodes apart.
func TestLedgerPositionsAndUsable(t *testing.T) {
	l := newTestLedger(model.NodeOptions{}, nil)
	sizes := map[string]int{"a": 8, "b": 4, "c": 2, "d": 1}
	for _, name := range []string{"a", "b", "c", "d"} {
		l.OnNode(node(name, kubeV100, sizes[name], true, nil, nil))
	}
	l.OnPod(gpuPod("p", 1, onNode("c", "")))
	check := func(live ...string) {
		t.Helper()
		for _, name := range live {
			_, total, err := l.Room(name)
			require.NoError(t, err, name)
			assert.Equal(t, sizes[name], total, name)
			require.NoError(t, l.Fit(name, 1, anyType), name)
			require.NoError(t, l.Usable(name), name)
		}
		free, _, err := l.Room("c")
		require.NoError(t, err)
		assert.Equal(t, 1, free, "c keeps its pod")
		require.NoError(t, l.Check())
	}
	l.OnNodeDelete("a")
	assert.ErrorIs(t, l.Usable("a"), ErrUnknownNode)
	check("b", "c", "d")
	l.OnNode(node("b", kubeV100, 4, true, map[string]string{model.AnnotationLinks: dgx1Links[:0] + "x"}, nil)) // rebuilt (warned)
	l.OnNode(node("a", kubeV100, 8, true, nil, nil))
	check("a", "b", "c", "d")
	notReady := node("d", kubeV100, 1, false, nil, nil)
	l.OnNode(notReady)
	assert.ErrorIs(t, l.Usable("d"), ErrNodeNotReady)
	cordoned := node("b", kubeV100, 4, true, nil, nil)
	cordoned.Spec.Unschedulable = true
	l.OnNode(cordoned)
	assert.ErrorIs(t, l.Usable("b"), ErrNodeNotReady)
	cordoned.Spec.Unschedulable = false
	l.OnNode(cordoned)
	require.NoError(t, l.Usable("b"))
}

func TestLedgerConcurrent(t *testing.T) {
	l := newTestLedger(model.NodeOptions{}, nil)
	for i := range 4 {
		l.OnNode(node(fmt.Sprint("n", i), kubeV100, 8, true, map[string]string{model.AnnotationLinks: dgx1Links}, nil))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				p := gpuPod(fmt.Sprintf("p%d-%d", g, i), 1+i%3)
				nn := fmt.Sprint("n", (g+i)%4)
				_ = l.Fit(nn, 2, anyType)
				_, _ = l.Choose(nn, 2)
				if devs, err := l.Reserve(p, nn, 1+i%3); err == nil {
					if i%2 == 0 {
						l.Release(p.UID)
					} else {
						onNode(nn, model.FormatIndices(devs))(p)
						l.OnPod(p)
						l.OnPodDelete(p.UID)
					}
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Check())
	for i := range 4 {
		c, err := l.Choose(fmt.Sprint("n", i), 8)
		require.NoError(t, err)
		assert.Equal(t, 8, c.Free)
	}
}

// A node whose device plugin lowered its allocatable GPUs (devices it
// found unhealthy, without saying which) takes no more pods' GPUs than
// that, bound or reserved, and gets them back when it raises it again.
func TestLedgerAllocatable(t *testing.T) {
	l := newTestLedger(model.NodeOptions{}, nil)
	n := node("n", kubeV100, 8, true, map[string]string{model.AnnotationLinks: dgx1Links}, nil)
	n.Status.Allocatable[model.ResourceGPU] = resourceMust("3")
	l.OnNode(n)
	require.NoError(t, l.Fit("n", 3, anyType))
	err := l.Fit("n", 4, anyType)
	require.ErrorIs(t, err, ErrNoRoom)
	assert.Contains(t, err.Error(), "allocatable nvidia.com/gpu is 3 with 0 in use")
	l.OnPod(gpuPod("bound", 2, onNode("n", "0,1")))
	_, err = l.Reserve(gpuPod("reserved", 1), "n", 1)
	require.NoError(t, err)
	err = l.Fit("n", 1, anyType)
	require.ErrorIs(t, err, ErrNoRoom)
	assert.Contains(t, err.Error(), "with 3 in use")
	n.Status.Allocatable[model.ResourceGPU] = resourceMust("8")
	l.OnNode(n)
	require.NoError(t, l.Fit("n", 5, anyType))
	assert.ErrorIs(t, l.Fit("n", 6, anyType), ErrNoRoom)
	require.NoError(t, l.Check())
}
