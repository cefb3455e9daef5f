package topology_test

import (
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/topology"
)

// Gavel's simulated cluster, in servers of four GPUs.
func ExampleParseCompact() {
	c, err := topology.ParseCompact("v100:36,p100:36,k80:36", 4)
	if err != nil {
		panic(err)
	}
	capacity := c.Capacity()
	for _, t := range c.GPUTypes() {
		fmt.Println(t, capacity[t])
	}
	fmt.Println(len(c.Servers), "servers")

	_, err = topology.ParseCompact("v100:36:8", 1)
	fmt.Println(errors.Is(err, topology.ErrInvalidCount), err)
	// Output:
	// k80 36
	// p100 36
	// v100 36
	// 27 servers
	// true topology: v100:36: invalid count: 36 GPUs do not fill servers of 8 GPUs
}

// A DGX-1: which GPUs share two NVLinks, and what a pair's nominal bandwidth is.
func ExampleHomogeneous() {
	c, err := topology.Homogeneous(1, topology.ServerTemplate{Type: topology.V100, GPUs: 8, Interconnect: topology.HybridCubeMesh})
	if err != nil {
		panic(err)
	}
	s := &c.Servers[0]
	fmt.Println(s.Link(0, 3), s.PairBandwidth(0, 3), "GB/s")
	fmt.Println(s.Link(0, 1), s.PairBandwidth(0, 1), "GB/s")
	fmt.Println(s.Link(0, 5), s.PairBandwidth(0, 5), "GB/s")
	// Output:
	// NV2 50 GB/s
	// NV1 25 GB/s
	// SYS 7.875 GB/s
}

func ExampleParseJSON() {
	c, err := topology.ParseJSON([]byte(`{"servers": [
	  {"id": "a100", "devices": [{"type": "a100"}, {"type": "a100"}], "links": [["X", "NV12"], ["NV12", "X"]]},
	  {"id": "t4", "count": 2, "gpu_type": "t4", "gpus": 4, "nic_gbps": 25}]}`))
	if err != nil {
		panic(err)
	}
	for _, s := range c.Servers {
		fmt.Println(s.ID, len(s.GPUs), s.GPUs[0].Type, s.Link(0, 1))
	}
	_, err = topology.ParseJSON([]byte(`{"servers": [{"gpu_type": "v100", "gpus": 2, "links": [["X", "NV2"], ["NV1", "X"]]}]}`))
	fmt.Println(errors.Is(err, topology.ErrAsymmetricLinks))
	// Output:
	// a100 2 a100 NV12
	// t4-0 4 t4 PIX
	// t4-1 4 t4 PIX
	// true
}

// GPU feature discovery's node label and NVML's name map to the same
// well-known type, with memory and form factor.
func ExampleParseProduct() {
	for _, name := range []string{
		"nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB",
		"NVIDIA A100-SXM4-40GB",
		"NVIDIA H100 NVL",
		"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
		"NVIDIA GeForce RTX 4090",
	} {
		p, err := topology.ParseProduct(name)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s %d GiB %q", name, p.Type, p.MemoryMiB>>10, p.Form)
		if p.MIGProfile != "" {
			fmt.Printf(" MIG %s", p.MIGProfile)
		}
		fmt.Println()
	}
	// Output:
	// nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB: a100 80 GiB "sxm"
	// NVIDIA A100-SXM4-40GB: a100 40 GiB "sxm"
	// NVIDIA H100 NVL: h100 94 GiB "nvl"
	// NVIDIA-A100-SXM4-40GB-MIG-1g.5gb: a100 40 GiB "sxm" MIG 1g.5gb
	// NVIDIA GeForce RTX 4090: geforce-rtx-4090 0 GiB ""
}
