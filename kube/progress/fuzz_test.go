package progress_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/kube/progress"
)

// FuzzDecode: Decode never panics; it takes a body only with steps and
// total finite and in range, and what it takes reads back the same once
// encoded; its refusals are *progress.Error of the body's kinds and never
// quote the body.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"steps": 1200}`, `{"steps": 0, "total": 0}`, `{"steps": 1e15}`, `{"steps": 12.5, "total": 100}`,
		`{"steps": -1}`, `{"steps": 1e400}`, `{"steps": NaN}`, `{"steps": "1"}`, `{"steps": null}`,
		`{"total": 3}`, `{}`, `[]`, `null`, ``, `{"steps": 1}{}`, `{"steps": 1, "steps": 2}`,
		`{"STEPS": 4}`, `{"steps": 1, "x": {"y": [1, 2]}}`, "{\"steps\": 1}\n", strings.Repeat(" ", 1100),
		`{"steps": -0}`, `{"steps": 1E+2}`, `{"steps": 0.0000001e-400}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := progress.Decode(body)
		if err != nil {
			var pe *progress.Error
			bodyKind := errors.Is(err, progress.ErrMalformed) || errors.Is(err, progress.ErrOutOfRange) || errors.Is(err, progress.ErrTooLarge)
			if !errors.As(err, &pe) || !bodyKind {
				t.Fatalf("error %v is not a body's *progress.Error", err)
			}
			if len(body) >= 8 && strings.Contains(err.Error(), string(body)) {
				t.Fatalf("error %q quotes the body", err)
			}
			return
		}
		for _, v := range []float64{r.Steps, r.Total} {
			if math.IsNaN(v) || v < 0 || v > progress.MaxSteps {
				t.Fatalf("%q decoded to %+v", body, r)
			}
		}
		if len(body) > progress.MaxBody {
			t.Fatalf("%d bytes taken", len(body))
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := progress.Decode(again)
		if err != nil || r2 != r {
			t.Fatalf("%q -> %+v -> %s -> %+v, %v", body, r, again, r2, err)
		}
	})
}
