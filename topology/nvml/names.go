package nvml

import "github.com/gpusched/gpusched/topology"

// TypeOf maps an NVML product name ("NVIDIA A100-SXM4-40GB", "Tesla
// V100-SXM2-16GB") to a GPU type through [topology.ParseProduct]: a
// well-known type when the name holds its model, else a custom type made of
// the name ("unknown" for an empty name or one ParseProduct refuses).
func TypeOf(name string) topology.GPUType {
	p, err := topology.ParseProduct(name)
	if err != nil {
		return "unknown"
	}
	return p.Type
}
