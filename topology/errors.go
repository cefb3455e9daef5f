package topology

import (
	"errors"
	"fmt"
	"strings"
)

// Kinds of invalid cluster input. A [*SpecError] wraps exactly one of them,
// so errors.Is(err, ErrInvalidCount) and the like tell what went wrong.
var (
	// ErrInvalidCount: a count (servers, GPUs, memory, bandwidth, NVLinks) is
	// zero where it must be positive, negative, not a number, or does not
	// divide as the spec requires.
	ErrInvalidCount = errors.New("invalid count")
	// ErrDuplicateID: two servers share an id, or two GPUs share a UUID or an
	// index within a server.
	ErrDuplicateID = errors.New("duplicate id")
	// ErrAsymmetricLinks: the link or bandwidth matrix of a server says one
	// thing for (i, j) and another for (j, i).
	ErrAsymmetricLinks = errors.New("asymmetric link matrix")
	// ErrUnknownLinkClass: a link class name or value that this package does
	// not know, or a link class where it cannot stand (such as X off the
	// diagonal).
	ErrUnknownLinkClass = errors.New("unknown link class")
	// ErrInvalidGPUType: an empty or malformed GPU type name.
	ErrInvalidGPUType = errors.New("invalid GPU type")
	// ErrMalformedSpec: a spec that cannot be parsed at all, or whose shape is
	// wrong (a link matrix of the wrong size, a missing field, an unknown
	// field).
	ErrMalformedSpec = errors.New("malformed spec")
	// ErrNoMIG: a GPU type or product without MIG (or without a MIG profile
	// table here) was given a MIG layout or asked for its MIG product.
	ErrNoMIG = errors.New("no MIG")
	// ErrUnknownProfile: a MIG profile or product name that the product's
	// table does not have.
	ErrUnknownProfile = errors.New("unknown MIG profile")
	// ErrInvalidPlacement: a MIG layout that breaks NVIDIA's placement
	// rules (a start the profile may not take, overlapping instances, too
	// many instances of a profile, a product that is not the GPU's).
	ErrInvalidPlacement = errors.New("invalid MIG placement")
)

// SpecError describes one problem in a cluster or its spec: where it is, what
// is wrong, and which kind of problem it is.
// It is not changed after it is returned: safe for concurrent reads.
type SpecError struct {
	// Where locates the problem, for instance `servers[3] "v100-3": gpus[2]`
	// or `line 7`. It may be empty.
	Where string
	// Msg says what is wrong, in words.
	Msg string
	// Kind is one of the Err values of this package.
	Kind error
}

func (e *SpecError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("topology: %s: %s", e.Kind, e.Msg)
	}
	return fmt.Sprintf("topology: %s: %s: %s", e.Where, e.Kind, e.Msg)
}

// Unwrap returns the kind, so that errors.Is works on a SpecError.
func (e *SpecError) Unwrap() error { return e.Kind }

func specErr(kind error, where, format string, args ...any) *SpecError {
	return &SpecError{Where: where, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

// maxReported bounds how many problems one validation reports.
const maxReported = 20

// problems collects validation errors up to maxReported.
type problems struct {
	errs    []error
	dropped int
}

// add records a problem; where is called only if the problem is kept.
func (p *problems) add(kind error, where func() string, format string, args ...any) {
	if len(p.errs) == maxReported {
		p.dropped++
		return
	}
	p.errs = append(p.errs, specErr(kind, where(), format, args...))
}

// addErr records err: a copy of its *SpecError with where put before its
// Where, or err itself if it holds none.
func (p *problems) addErr(where func() string, err error) {
	if len(p.errs) == maxReported {
		p.dropped++
		return
	}
	var se *SpecError
	if errors.As(err, &se) {
		cp := *se
		cp.Where = joinWhere(where(), se.Where)
		err = &cp
	}
	p.errs = append(p.errs, err)
}

func (p *problems) err() error {
	switch {
	case len(p.errs) == 0:
		return nil
	case len(p.errs) == 1:
		return p.errs[0]
	}
	if p.dropped > 0 {
		p.errs = append(p.errs, fmt.Errorf("topology: and %d more problems", p.dropped))
	}
	return joined(p.errs)
}

// joined is several problems as one error on one line, "; " between them;
// errors.Is and errors.As see each of them.
type joined []error

func (j joined) Error() string {
	var b strings.Builder
	for i, err := range j {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (j joined) Unwrap() []error { return j }
