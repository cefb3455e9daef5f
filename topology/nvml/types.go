package nvml

import "github.com/gpusched/gpusched/topology"

// GPUInfo holds what NVML says of a GPU beyond the topology model. It is
// plain data: safe for concurrent reads, not for a write beside them.
type GPUInfo struct {
	Name string
	// ComputeCapability is "major.minor", such as "8.0".
	ComputeCapability string
	// CPUAffinity lists the CPU cores closest to the GPU.
	CPUAffinity []int
	// MIGEnabled reports MIG mode, and MIG its instances.
	MIGEnabled bool
	MIG        []MIGInstance
	// MIGLayoutError says why a GPU in MIG mode has no layout in the
	// topology (a product without a profile table here, or instances that
	// break the placement rules); empty when the layout was read.
	MIGLayoutError string
}

// MIGInstance is one MIG device of a GPU. It is plain data, safe for
// concurrent use.
type MIGInstance struct {
	UUID      string
	MemoryMiB int
}

// Discovery is the result of discovering the local server. It is plain
// data: safe for concurrent reads, not for a write beside them.
type Discovery struct {
	Cluster *topology.Cluster
	// GPUs holds, in the order of Cluster.Servers[0].GPUs, the details of
	// each GPU.
	GPUs          []GPUInfo
	DriverVersion string
}
