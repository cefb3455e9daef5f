package ring

import "errors"

// Errors of the ring-all-reduce schedulers. Every error they return wraps
// one of these (or perfmodel.ErrInvalidRing for model parameters, or the
// context's error when a run is cancelled).
var (
	// ErrInvalidJob: a job that cannot run anywhere (no GPUs, more GPUs
	// than the cluster, no iterations, a duplicate ID, an arrival or
	// estimate outside [0, MaxSlot]).
	ErrInvalidJob = errors.New("ring: invalid job")
	// ErrInvalidSetting: a scheduler or placer setting out of range
	// (lambda, theta, horizon, kappa, FA-FFP reading, estimates that do
	// not match the jobs).
	ErrInvalidSetting = errors.New("ring: invalid setting")
	// ErrUnplaceable: jobs left waiting on an idle cluster, which the
	// placer will never place (SJF-BCO's cap theta too tight, say), or a
	// job larger than the GPUs free in SJFBCO.ScheduleOn's live state.
	ErrUnplaceable = errors.New("ring: jobs can never be placed")
	// ErrBadPlacement: a Placer returned GPUs that are busy, out of range,
	// repeated, or not as many as the job asked for.
	ErrBadPlacement = errors.New("ring: placer returned an invalid placement")
	// ErrHorizon: no schedule finishes within the horizon.
	ErrHorizon = errors.New("ring: no schedule within the horizon")
	// ErrNoProgress: a job so slow under the model that it would not
	// finish by slot MaxSlot (a bandwidth of 1e-300, say).
	ErrNoProgress = errors.New("ring: no progress")
)

// MaxSlot is the last slot the schedulers simulate: arrivals, estimates
// and horizons beyond it are errors, and a run whose jobs would finish
// after it stops with ErrNoProgress. At 2^40 (a trillion slots) slot
// arithmetic cannot overflow and stays exact in float64.
const MaxSlot = 1 << 40
