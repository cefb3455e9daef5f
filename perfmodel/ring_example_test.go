package perfmodel_test

import (
	"fmt"

	"github.com/gpusched/gpusched/perfmodel"
)

// Two 8-worker jobs each spread over servers 0 and 1 contend for the
// inter-server links (p = 2, f = 2 + 0.2, B = 10/2.2: 1400/36.4 = 38.5 ms of
// ring communication); a third on server 2 alone does not (1400/800 = 1.75).
func ExampleRingModel() {
	placements := [][]perfmodel.ServerShare{
		{{Server: 0, GPUs: 4}, {Server: 1, GPUs: 4}},
		{{Server: 0, GPUs: 4}, {Server: 1, GPUs: 4}},
		{{Server: 2, GPUs: 8}},
	}
	p, err := perfmodel.Contention(placements)
	if err != nil {
		panic(err)
	}
	// Gradients of 100 MB; 100 GB/s inside a server, 10 GB/s between
	// servers (times in ms, sizes in MB, rates in MB/ms).
	m := perfmodel.RingModel{IntraBandwidth: 100, InterBandwidth: 10, ReduceSpeed: 1000, Xi1: 1, Xi2: 0.5, Alpha: 0.2}
	job := perfmodel.RingJob{Workers: 8, GradientSize: 100, MiniBatch: 32, ForwardPerSample: 0.5, Backward: 30}
	for i, servers := range []int{2, 2, 1} {
		tau, err := m.IterationTime(job, servers, p[i])
		if err != nil {
			panic(err)
		}
		fmt.Printf("job %d: p = %d, %.1f ms per iteration\n", i, p[i], tau)
	}
	// Output:
	// job 0: p = 2, 85.6 ms per iteration
	// job 1: p = 2, 85.6 ms per iteration
	// job 2: p = 0, 48.3 ms per iteration
}
