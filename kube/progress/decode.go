package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

const (
	// Path is where the server takes reports: POST /v1/progress.
	Path = "/v1/progress"
	// MaxBody is the most bytes a report's body may hold.
	MaxBody = 1 << 10
	// MaxSteps is the largest number of steps (or total) a report may
	// give: 1e15, beyond any training loop (a million steps a second for
	// thirty years) and within float64's exact integers.
	MaxSteps = 1e15
)

// Report is the body of a progress report, one JSON object:
//
//	{"steps": 1200}
//	{"steps": 1200, "total": 50000}
//
// Steps is the job's cumulative steps (a training loop's global step,
// fractional steps allowed). Total, the steps the job plans in all, is
// optional, checked for range and otherwise ignored: remaining work is
// never taken from a tenant (kube/SECURITY.md). A Report is a value: safe
// for concurrent use.
type Report struct {
	// Steps is the cumulative steps, in [0, MaxSteps].
	Steps float64 `json:"steps"`
	// Total is the planned steps in all, 0 when not given; in
	// [0, MaxSteps] when given.
	Total float64 `json:"total,omitempty"`
}

// Decode reads a report's body: one JSON object with the number "steps"
// and at most the number "total", nothing else (no other field, none
// twice, field names as written here, no second value, no null), at most [MaxBody] bytes, the numbers finite and
// in [0, [MaxSteps]]. Its errors are [*Error] of kind ErrTooLarge,
// ErrMalformed or ErrOutOfRange; their details name the field and never
// echo the body.
func Decode(body []byte) (Report, error) {
	r, err := decode(body)
	if err != nil {
		return Report{}, err
	}
	return r, nil
}

func decode(body []byte) (Report, *Error) {
	if len(body) > MaxBody {
		return Report{}, newError(ErrTooLarge, fmt.Sprintf("%d bytes, at most %d", len(body), MaxBody))
	}
	// Token by token, so that field names match exactly (encoding/json
	// would take "STEPS" for "steps") and none comes twice.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return Report{}, malformed(err, "not a JSON object")
	}
	var r Report
	var seenSteps, seenTotal bool
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return Report{}, malformed(err, "")
		}
		var dst *float64
		switch k, _ := t.(string); {
		case k == "steps" && !seenSteps:
			dst, seenSteps = &r.Steps, true
		case k == "total" && !seenTotal:
			dst, seenTotal = &r.Total, true
		case k == "steps" || k == "total":
			return Report{}, newError(ErrMalformed, fmt.Sprintf("%q given twice", k))
		default:
			// The caller's field name is not repeated back.
			return Report{}, newError(ErrMalformed, `fields other than "steps" and "total"`)
		}
		field := t.(string)
		v, err := dec.Token()
		if err != nil {
			return Report{}, malformed(err, "")
		}
		n, ok := v.(json.Number)
		if !ok {
			return Report{}, newError(ErrMalformed, fmt.Sprintf("%q is not a number", field))
		}
		var e *Error
		if *dst, e = number(field, n); e != nil {
			return Report{}, e
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return Report{}, malformed(err, "")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Report{}, newError(ErrMalformed, "data after the object")
	}
	if !seenSteps {
		return Report{}, newError(ErrMalformed, `no number "steps"`)
	}
	return r, nil
}

// malformed names what the JSON decoder found wrong (or, without an
// error, what), without the body's bytes.
func malformed(err error, what string) *Error {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return newError(ErrMalformed, "empty or truncated JSON")
	case errors.As(err, &syn):
		return newError(ErrMalformed, fmt.Sprintf("invalid JSON at byte %d", syn.Offset))
	case what != "":
		return newError(ErrMalformed, what)
	default:
		return newError(ErrMalformed, "invalid JSON")
	}
}

// number parses one JSON number of the body.
func number(field string, n json.Number) (float64, *Error) {
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		// A literal such as 1e999 parses to ±Inf with a range error.
		return 0, newError(ErrOutOfRange, fmt.Sprintf("%s is not a finite number", field))
	}
	if v < 0 || v > MaxSteps {
		return 0, newError(ErrOutOfRange, fmt.Sprintf("%s %g not in [0, %g]", field, v, float64(MaxSteps)))
	}
	return v, nil
}
