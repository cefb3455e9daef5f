package admission

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// ClaimedRates reads what a tenant claims about a workload's speed from
// its annotations: the rates of AnnotationThroughput ("v100=3.2,k80=1"),
// else the rates the performance model m gives the job kind of
// AnnotationJobKind (with AnnotationBatchSize) on gpus GPUs of each of
// the allowed types, else none (nil: the same rate on every type). notes
// tell the tenant what was not taken as written; a malformed annotation
// is an error naming it. The claim is a hint: the policies see it only
// through tenancy.RateRules.Trusted. Package kueue reads Kueue workloads'
// claims with it too.
func ClaimedRates(ann map[string]string, gpus int, m perfmodel.ThroughputModel, allowed []topology.GPUType) (claimed map[topology.GPUType]float64, notes []string, err error) {
	if v, ok := ann[AnnotationThroughput]; ok {
		if claimed, err = parseRates(v); err != nil {
			return nil, nil, fmt.Errorf("annotation %s: %w", AnnotationThroughput, err)
		}
		return claimed, nil, nil
	}
	v, ok := ann[AnnotationJobKind]
	if !ok {
		return nil, []string{fmt.Sprintf("no %s or %s annotation: the same rate on every type", AnnotationThroughput, AnnotationJobKind)}, nil
	}
	key := perfmodel.JobKey{Model: strings.TrimSpace(v), ScaleFactor: gpus}
	if b, ok := ann[AnnotationBatchSize]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(b))
		if err != nil || n < 0 || n > 1<<20 {
			return nil, nil, fmt.Errorf("annotation %s %q: want a batch size from 0 to %d", AnnotationBatchSize, cut(b), 1<<20)
		}
		key.BatchSize = n
	}
	claimed = map[topology.GPUType]float64{}
	for _, t := range allowed {
		if r, err := m.Throughput(key, t); err == nil && r > 0 && !math.IsInf(r, 0) {
			claimed[t] = r
		}
	}
	if len(claimed) == 0 {
		return nil, []string{fmt.Sprintf("the performance model does not know %s on %d GPUs: the same rate on every type", cut(key.Name()), gpus)}, nil
	}
	return claimed, nil, nil
}
