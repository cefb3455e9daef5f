package perfmodel

import (
	"fmt"
	"strconv"
	"strings"
)

// JobKey identifies a job for throughput lookups: what it trains (model and
// batch size) and how many GPUs it uses (the scale factor). It is Gavel's
// (job type, scale factor) key.
//
// A JobKey is a plain comparable value, safe for concurrent use.
type JobKey struct {
	// Model is the model's name, as in Gavel's job table: "ResNet-18",
	// "ResNet-50", "Transformer", "LM", "Recommendation", "A3C", "CycleGAN".
	Model string
	// BatchSize is the batch size; 0 for a model trained at one fixed batch
	// size (Gavel's A3C and CycleGAN).
	BatchSize int
	// ScaleFactor is the number of GPUs (workers) of the job, >= 1.
	ScaleFactor int
}

// Name returns Gavel's job-type name: "ResNet-18 (batch size 16)", or the
// model alone when BatchSize is 0.
func (k JobKey) Name() string {
	if k.BatchSize == 0 {
		return k.Model
	}
	return k.Model + " (batch size " + strconv.Itoa(k.BatchSize) + ")"
}

// String returns the name and scale factor, as "ResNet-18 (batch size 16) x4".
func (k JobKey) String() string { return k.Name() + " x" + strconv.Itoa(k.ScaleFactor) }

// WithScaleFactor returns k with its scale factor set to n.
func (k JobKey) WithScaleFactor(n int) JobKey {
	k.ScaleFactor = n
	return k
}

// Validate checks that the model is named and the batch size and scale
// factor are in range, with the bounds [ParseJobType] reads within (a name
// of at most 256 bytes, a batch size of at most 1,073,741,824, a scale
// factor of at most topology.MaxClusterGPUs); errors are of kind
// [ErrInvalidJob].
func (k JobKey) Validate() error {
	switch {
	case len(k.Model) > maxJobName:
		return &JobError{Job: JobKey{Model: k.Model[:32] + "...", BatchSize: k.BatchSize, ScaleFactor: k.ScaleFactor}, Kind: ErrInvalidJob,
			Msg: fmt.Sprintf("a model name of %d bytes is longer than %d", len(k.Model), maxJobName)}
	case strings.TrimSpace(k.Model) == "":
		return &JobError{Job: k, Kind: ErrInvalidJob, Msg: "the model has no name"}
	case k.BatchSize < 0 || k.BatchSize > maxBatchSize:
		return &JobError{Job: k, Kind: ErrInvalidJob, Msg: fmt.Sprintf("batch size %d (want 0 to %d)", k.BatchSize, maxBatchSize)}
	case k.ScaleFactor < 1 || k.ScaleFactor > maxScaleFactor:
		return &JobError{Job: k, Kind: ErrInvalidJob, Msg: fmt.Sprintf("scale factor %d (want 1 to %d)", k.ScaleFactor, maxScaleFactor)}
	}
	return nil
}

// ParseJobType reads a Gavel job-type name, "ResNet-18 (batch size 16)" or
// "A3C", and returns its key with the given scale factor. The name is the
// first column of Gavel's .trace files. As it reads input, it also bounds
// the batch size (at most 1,073,741,824), the scale factor (at most
// 1,048,576) and the name (at most 256 bytes, no control characters).
func ParseJobType(name string, scaleFactor int) (JobKey, error) {
	name = strings.TrimSpace(name)
	k := JobKey{Model: name, ScaleFactor: scaleFactor}
	switch {
	case len(name) > maxJobName:
		return JobKey{}, &JobError{Job: JobKey{Model: name[:32] + "...", ScaleFactor: scaleFactor}, Kind: ErrInvalidJob,
			Msg: fmt.Sprintf("a job type of %d bytes is longer than %d", len(name), maxJobName)}
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\ufeff' }):
		return JobKey{}, &JobError{Job: k, Kind: ErrInvalidJob, Msg: fmt.Sprintf("job type %q holds a control character", name)}
	case scaleFactor > maxScaleFactor:
		return JobKey{}, &JobError{Job: k, Kind: ErrInvalidJob, Msg: fmt.Sprintf("scale factor %d (want at most %d)", scaleFactor, maxScaleFactor)}
	}
	if model, rest, ok := strings.Cut(name, "(batch size "); ok {
		digits, closed := strings.CutSuffix(rest, ")")
		bs, err := strconv.Atoi(digits)
		if !closed || err != nil || bs <= 0 || bs > maxBatchSize || digits[0] == '+' {
			return JobKey{}, &JobError{Job: k, Kind: ErrInvalidJob, Msg: fmt.Sprintf("job type %q: want \"Model (batch size N)\" with N from 1 to %d", name, maxBatchSize)}
		}
		k.Model, k.BatchSize = strings.TrimSpace(model), bs
	}
	if err := k.Validate(); err != nil {
		return JobKey{}, err
	}
	return k, nil
}

// maxJobName bounds a job type read from a file.
const maxJobName = 256

// parseTupleKey reads a key of Gavel's JSON table, "('ResNet-18 (batch
// size 16)', 1)".
func parseTupleKey(s string) (JobKey, error) {
	inner, ok := strings.CutPrefix(s, "('")
	if ok {
		inner, ok = strings.CutSuffix(inner, ")")
	}
	i := strings.LastIndex(inner, "', ")
	if !ok || i < 0 {
		return JobKey{}, fmt.Errorf("key %q: want ('<job type>', <scale factor>)", s)
	}
	sf, err := strconv.Atoi(inner[i+3:])
	if err != nil {
		return JobKey{}, fmt.Errorf("key %q: scale factor %q is not an integer", s, inner[i+3:])
	}
	return ParseJobType(inner[:i], sf)
}
