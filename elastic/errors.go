package elastic

import (
	"errors"

	"github.com/gpusched/gpusched/topology"
)

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalid marks input out of range: a negative capacity or weight, a
	// value that is not finite, bounds of an elastic job that cross, or a
	// size beyond the caps below.
	ErrInvalid = errors.New("elastic: invalid input")
	// ErrUnplaceable says a job's base workers do not fit on the free GPUs
	// in whole workers (fragmentation), or that a job is unknown to the
	// cluster.
	ErrUnplaceable = errors.New("elastic: cannot place")
	// ErrInconsistent reports a cluster whose counts disagree with its
	// jobs' placements (a bug, found by Check or by Reclaim before it
	// changes anything), or, on a live state, a state changed behind the
	// cluster's back (its holders released, its servers removed).
	ErrInconsistent = errors.New("elastic: inconsistent cluster state")
	// ErrFitFailed says a model could not be fitted to the samples given.
	ErrFitFailed = errors.New("elastic: fit failed")
)

// Caps on sizes taken from input, so that no call allocates or computes
// without bound; beyond them calls return an error wrapping ErrInvalid.
const (
	// MaxServers bounds the servers a Cluster holds at once (its own and
	// loaned).
	MaxServers = 1 << 20
	// MaxGPUsPerServer bounds a server's GPUs, and so a worker's (as
	// topology does).
	MaxGPUsPerServer = topology.MaxGPUsPerServer
	// MaxGPUs bounds the GPUs a policy shares out.
	MaxGPUs = MaxServers * MaxGPUsPerServer
	// MaxLiveGPUs bounds the GPUs of the live cluster state a Cluster
	// runs on, as topology bounds a cluster's: NewCluster's size, and what
	// loans may grow a state to.
	MaxLiveGPUs = topology.MaxClusterGPUs
	// MaxWorkers bounds a job's workers, a Table's length and the items of
	// ScalingItems.
	MaxWorkers = 1 << 20
	// MaxKnapsackCells bounds the choices MultipleChoiceKnapsack keeps,
	// groups x (capacity + 1) (4 bytes each: 256 MiB), and
	// MaxKnapsackWork its steps, items x (capacity + 1) (about a second).
	MaxKnapsackCells = 1 << 26
	MaxKnapsackWork  = 1 << 30
	// MaxTime bounds the magnitude of a job's arrival, in seconds.
	MaxTime = 1e15
	// MaxPools bounds the pools (GPU types) of a heterogeneous cluster.
	MaxPools = 64
	// MaxRestartCost bounds a job's restart cost, in seconds (a day).
	MaxRestartCost = 86400
)
