package gpusched

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/model"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// BenchmarkSchedulingCycle measures the plugin's share of one scheduling
// cycle through the framework over 100 nodes of 16 GPUs (half NVSwitch
// V100s, half dual-socket PCIe A100s), a quarter of their GPUs held: PreFilter,
// Filter and Score on every node, PreScore, Reserve and Permit (then
// Unreserve, so every iteration sees the same state). It is the plugin
// latency per pod of docs/kubernetes.md without the API server.
//
// The cases named nodes=5000 do the same over 5,000 nodes, the size of the
// scale tests (docs/operations.md): a node's Filter and Score then miss
// the CPU's caches, which 100 nodes do not.
func BenchmarkSchedulingCycle(b *testing.B) {
	for _, c := range []struct{ nodes, gpus int }{{100, 1}, {100, 2}, {100, 8}, {5000, 1}, {5000, 8}} {
		name := fmt.Sprintf("gpus=%d", c.gpus)
		if c.nodes != 100 {
			name = fmt.Sprintf("nodes=%d,gpus=%d", c.nodes, c.gpus)
		}
		gpus := c.gpus
		b.Run(name, func(b *testing.B) {
			var objs []kruntime.Object
			var nodes []*corev1.Node
			for i := range c.nodes {
				links := `{"interconnect":"nvswitch"}`
				product := kubeV100
				if i%2 == 1 {
					links, product = `{"interconnect":"pcie-dual-socket"}`, "NVIDIA-A100-SXM4-80GB"
				}
				n := node(fmt.Sprint("n", i), product, 16, true, map[string]string{model.AnnotationLinks: links}, nil)
				nodes = append(nodes, n)
				objs = append(objs, n)
				for k := range 4 {
					objs = append(objs, gpuPod(fmt.Sprintf("busy-%d-%d", i, k), 1, onNode(n.Name, fmt.Sprint(3*k+i%3))))
				}
			}
			e := newEnv(&testing.T{}, nil, objs...)
			var infos []fwk.NodeInfo
			for _, n := range nodes {
				ni := framework.NewNodeInfo()
				ni.SetNode(n)
				infos = append(infos, ni)
			}
			p := gpuPod("p", gpus)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				state := framework.NewCycleState()
				_, st := e.pl.PreFilter(ctx, state, p, infos)
				if !st.IsSuccess() {
					b.Fatal(st.Message())
				}
				for _, ni := range infos {
					if st := e.pl.Filter(ctx, state, p, ni); !st.IsSuccess() {
						b.Fatal(st.Message())
					}
				}
				e.pl.PreScore(ctx, state, p, infos)
				best, host := int64(-1), ""
				for _, ni := range infos {
					s, _ := e.pl.Score(ctx, state, p, ni)
					if s > best {
						best, host = s, ni.Node().Name
					}
				}
				if st := e.pl.Reserve(ctx, state, p, host); !st.IsSuccess() {
					b.Fatal(st.Message())
				}
				e.pl.Permit(ctx, state, p, host)
				e.pl.Unreserve(ctx, state, p, host)
			}
		})
	}
}

// BenchmarkServiceEvict measures the service meter at its bound: a meter
// holding maxServiceJobs (65,536) jobs, none running, meets a new job each
// iteration (bound, then ended), which makes it forget one. ns/op is the
// mean; max-ns is the longest single operation, which holds the meter's
// mutex (every queue sort of LAS, Gittins and SRTF waits on it).
func BenchmarkServiceEvict(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := newService(func() time.Time { return now })
	for i := range maxServiceJobs {
		now = now.Add(time.Millisecond)
		p := gpuPod(fmt.Sprint("p", i), 1, onNode("n", ""))
		s.bound(p, 1)
		s.ended(p.UID)
	}
	pods := make([]*corev1.Pod, 1<<12)
	for i := range pods {
		pods[i] = gpuPod(fmt.Sprint("new", i), 1, onNode("n", ""))
	}
	runtime.GC()
	var worst time.Duration
	i := 0
	b.ResetTimer()
	for b.Loop() {
		p := pods[i%len(pods)]
		p.Name = fmt.Sprint("new", i)
		p.UID = types.UID(p.Name)
		i++
		now = now.Add(time.Millisecond)
		t0 := time.Now()
		s.bound(p, 1)
		s.ended(p.UID)
		worst = max(worst, time.Since(t0))
	}
	b.ReportMetric(float64(worst.Nanoseconds()), "max-ns")
}
