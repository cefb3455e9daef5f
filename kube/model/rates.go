package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

// Annotations in which a tenant claims how fast its workload runs, read
// by ClaimedRates for both controllers (kube/admission, kube/kueue).
const (
	// AnnotationThroughput gives a job's rates per GPU type, in steps per
	// second on all its GPUs: "v100=3.2,k80=1" (type or product names).
	AnnotationThroughput = "gpusched.io/throughput"
	// AnnotationJobKind names the job's model for the performance model
	// ("ResNet-18"); AnnotationBatchSize its batch size (0 or absent for
	// models of one batch size).
	AnnotationJobKind   = "gpusched.io/job-kind"
	AnnotationBatchSize = "gpusched.io/batch-size"
)

// maxBatchSize bounds AnnotationBatchSize; maxRate a claimed rate, in
// steps per second; maxRatesBytes the length of AnnotationThroughput.
const (
	maxBatchSize  = 1 << 20
	maxRate       = 1e12
	maxRatesBytes = 4096
)

// ClaimedRates reads what a tenant claims about a workload's speed from
// its annotations ann (a pod's, a Job's over its template's, a Kueue pod
// set's template's): the rates of AnnotationThroughput, else the rates
// the performance model m gives the job kind of AnnotationJobKind (with
// AnnotationBatchSize) on gpus GPUs of each of the allowed types, else
// none (nil: the same rate on every type). notes tell the tenant what was
// not taken as written. A malformed annotation is a *FieldError naming
// it (wrapping ErrInvalid); a kind the model does not know is a note, not
// an error. The claim is a hint: the controllers let the policies see it
// only through tenancy.RateRules.Trusted.
func ClaimedRates(ann map[string]string, gpus int, m perfmodel.ThroughputModel, allowed []topology.GPUType) (claimed map[topology.GPUType]float64, notes []string, err error) {
	if v, ok := ann[AnnotationThroughput]; ok {
		if claimed, err = parseRates(v); err != nil {
			return nil, nil, err
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
		if err != nil || n < 0 || n > maxBatchSize {
			return nil, nil, fieldErr("annotation "+AnnotationBatchSize, b, nil, "want a batch size from 0 to %d", maxBatchSize)
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
		return nil, []string{fmt.Sprintf("the performance model does not know %s on %d GPUs: the same rate on every type", cutShown(key.Name()), gpus)}, nil
	}
	return claimed, nil, nil
}

// parseRates reads AnnotationThroughput, "v100=3.2,k80=1" (type or
// product names): finite rates from 0 to maxRate of distinct types, at
// least one. Its errors are *FieldError naming the annotation.
func parseRates(v string) (map[topology.GPUType]float64, error) {
	field := "annotation " + AnnotationThroughput
	if len(v) > maxRatesBytes {
		return nil, fieldErr(field, v, nil, "%d bytes, more than %d", len(v), maxRatesBytes)
	}
	out := map[topology.GPUType]float64{}
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, num, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fieldErr(field, v, nil, "entry %s: want type=rate", quote(part))
		}
		p, err := topology.ParseProduct(strings.TrimSpace(name))
		if err != nil {
			return nil, fieldErr(field, v, err, "entry %s", quote(part))
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(f >= 0) || f > maxRate {
			return nil, fieldErr(field, v, nil, "entry %s: want a rate from 0 to %g steps/s", quote(part), maxRate)
		}
		if _, dup := out[p.Type]; dup {
			return nil, fieldErr(field, v, nil, "type %s given twice", p.Type)
		}
		out[p.Type] = f
	}
	if len(out) == 0 {
		return nil, fieldErr(field, v, nil, "no rates")
	}
	return out, nil
}
