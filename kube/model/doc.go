// Package model maps Kubernetes objects onto gpusched's model: a Node that
// GPU feature discovery labelled becomes a topology.Server (GPU type, count
// and memory from its labels, the link matrix from an optional annotation in
// nvidia-smi topo -m notation or gpusched's JSON, health from its Ready
// condition and an annotation of failed devices), and a Pod becomes a
// Request (GPUs asked for, allowed GPU types, pod group and its size). It
// also reads and writes the device ledger annotation that the scheduler plugin puts on a
// pod when it binds it, which a device plugin's GetPreferredAllocation or a
// DRA driver can honour and from which the ledger is rebuilt after a
// restart. Request.JobSpec turns a pod into a job of the scheduling core
// (scheduler.JobSpec), for embedders that drive scheduler.Scheduler from
// pods.
//
// ParseDRANode reads instead a node whose GPUs a DRA driver publishes in
// ResourceSlices (NVIDIA's gpu.nvidia.com by default): the GPU type from
// each device's productName, positions from its minor number, health from
// its device taints, links from the NVSwitch fabric or the PCIe root and
// NUMA node it sits on; MIG devices are types of their own (DRA.MIG).
//
// Every parser here reads untrusted input (labels and annotations anyone
// with write access to a node or pod may set): sizes are capped, and bad
// input returns a *FieldError that names the label or annotation and wraps
// ErrInvalid, never a panic.
//
// # Labels and annotations
//
// Read from nodes (GPU feature discovery and the NVIDIA device plugin set the
// first four; the others are gpusched's):
//
//	nvidia.com/gpu.product       the GPU product, e.g. Tesla-V100-SXM2-16GB
//	nvidia.com/gpu.count         GPUs on the node (else capacity nvidia.com/gpu)
//	allocatable nvidia.com/gpu   GPUs the pods may take (the device plugin lowers
//	                             it for devices it finds unhealthy)
//	nvidia.com/gpu.memory        MiB per GPU (else the product's nominal memory)
//	nvidia.com/gpu.clique        multi-node NVLink domain (Server.Domain)
//	gpusched.io/rack             rack (Server.Rack; the label is configurable)
//	gpusched.io/gpu-links        link matrix: nvidia-smi topo -m text, a JSON
//	                             matrix [["X","NV1",...],...], or a JSON object
//	                             of topology.ServerSpec's fields
//	gpusched.io/unhealthy-gpus   NVML indices of failed GPUs, e.g. "2,5"
//
// Read from pods:
//
//	resources nvidia.com/gpu            GPUs asked for (limits, else requests)
//	gpusched.io/gpu-types               allowed GPU types, e.g. "v100,a100"
//	gpusched.io/pod-group (label)       the pod's gang (or scheduling.x-k8s.io/pod-group)
//	gpusched.io/min-member              members the gang needs to start
//	gpusched.io/throughput              claimed rates per type, "v100=3.2,k80=1"
//	gpusched.io/job-kind                the job's model in a performance model
//	gpusched.io/batch-size              its batch size (ClaimedRates reads the three)
//
// Written on pods at binding (and believed only with a record that
// verifies, see AnnotationGPUsMAC):
//
//	gpusched.io/gpus                    NVML indices of the GPUs booked, e.g. "0,1"
//	gpusched.io/gpus-mac                the scheduler's record of them
package model
