package gpusched

import "errors"

// Errors of this package; test them with errors.Is.
var (
	// ErrArgs: plugin arguments that cannot be used.
	ErrArgs = errors.New("gpusched: invalid plugin args")
	// ErrNoRoom: the node has not enough free healthy GPUs of an allowed
	// type for the pod (at Reserve, after the state moved).
	ErrNoRoom = errors.New("gpusched: not enough free GPUs on the node")
	// ErrUnknownNode: the node is not a GPU node the ledger knows.
	ErrUnknownNode = errors.New("gpusched: unknown GPU node")
	// ErrNodeNotReady: the node's Ready condition is not True or it is
	// cordoned (spec.unschedulable); it takes no new pod.
	ErrNodeNotReady = errors.New("gpusched: node not ready or cordoned")
	// ErrNoRecordKey: the Secret of Args.RecordKeySecret does not exist
	// or cannot be read. The admin creates it at install
	// (RecordKeyCommand); the scheduler only reads it.
	ErrNoRecordKey = errors.New("gpusched: no record key")
)
