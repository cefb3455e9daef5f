package progress_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpusched/gpusched/kube/progress"
)

// BenchmarkServe: one report of a pod whose token's review is cached
// (the steady state), through ServeHTTP to the sink.
func BenchmarkServe(b *testing.B) {
	e := newEnv(b, progress.Config{})
	srv, err := progress.New(progress.Config{
		Client: e.api.cs, Resolver: e.res, Now: e.clock.Now, Burst: 1000, Interval: time.Nanosecond,
		Sink: progress.SinkFunc(func(string, float64, time.Time) error { return nil }),
	})
	if err != nil {
		b.Fatal(err)
	}
	body := `{"steps": 1200}`
	auth := "Bearer " + e.tok
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, progress.Path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		e.clock.Add(time.Microsecond)
	}
}
