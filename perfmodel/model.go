package perfmodel

import "github.com/gpusched/gpusched/topology"

// ThroughputModel gives the rate of a job running alone.
// Implementations should be safe for concurrent use (Table and
// Extrapolated are): simulators and policies may share one.
type ThroughputModel interface {
	// Throughput returns the steps per second of job k, using k.ScaleFactor
	// GPUs of type t together (the whole job's rate, not a per-GPU rate).
	// A rate of 0 with a nil error means the job cannot run on t (for
	// instance it does not fit in memory). A job or type the model does not
	// know is an error wrapping ErrUnknownJob or ErrUnknownGPUType.
	Throughput(k JobKey, t topology.GPUType) (float64, error)
}

// ColocationModel gives the rates of two jobs sharing the same GPUs (space
// sharing, Gavel section 3.1).
// Implementations should be safe for concurrent use, as for
// ThroughputModel (Table and FittedColocation are).
type ColocationModel interface {
	// Colocated returns the steps per second of a and of b when they share
	// GPUs of type t. Rates of 0 and 0 with a nil error mean the pair cannot
	// share. Unknown jobs or types are errors as for ThroughputModel.
	Colocated(a, b JobKey, t topology.GPUType) (ta, tb float64, err error)
}
