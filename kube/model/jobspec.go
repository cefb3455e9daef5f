package model

import (
	"slices"
	"strconv"

	"github.com/gpusched/gpusched/scheduler"
	"github.com/gpusched/gpusched/topology"
)

// JobSpec returns the request as a job of the scheduling core,
// scheduler.JobSpec, for an embedder that drives scheduler.Scheduler from
// pods rather than from kube-scheduler's cycle (a round-based admission
// controller keyed by pod UID, say). Each pod is one job; the pods of a pod
// group share its name as their Gang, so that the core runs all of them in
// a round or none. A pod states no rates, so the job runs one step per
// second on each type of types (the cluster's types) that the pod allows;
// its remaining work is unknown (0): a pod's own claims of its work are not
// trusted, so the embedder sets RemainingSteps from its own model.
// priority is the job's tier (the pod's spec.priority).
//
// It returns a *FieldError wrapping ErrInvalid when the pod asks for no
// GPUs or allows none of types.
func (r *Request) JobSpec(types []topology.GPUType, priority int) (scheduler.JobSpec, error) {
	var spec scheduler.JobSpec
	if r.GPUs < 1 {
		return spec, fieldErr("resource "+string(ResourceGPU), strconv.Itoa(r.GPUs), nil, "a job needs at least one GPU")
	}
	rates := make(map[topology.GPUType]float64, len(types))
	for _, t := range types {
		if r.Allows(t) {
			rates[t] = 1
		}
	}
	if len(rates) == 0 {
		return spec, fieldErr("annotation "+AnnotationGPUTypes, typeList(r.Types), nil, "allows none of the cluster's types %v", types)
	}
	spec = scheduler.JobSpec{GPUs: r.GPUs, Throughput: rates, Gang: r.Group, Priority: priority}
	if r.Types != nil {
		spec.Types = slices.Clone(r.Types)
	}
	return spec, nil
}

func typeList(ts []topology.GPUType) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ","
		}
		s += string(t)
	}
	return s
}
