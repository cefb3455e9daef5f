package multires

import (
	"context"
	"sync"
	"testing"
)

// TestAllocatorsConcurrent: the allocators and the shared zoo from many
// goroutines at once give the same plans (run with -race).
func TestAllocatorsConcurrent(t *testing.T) {
	servers, jobs := benchJobs(200)
	for _, a := range []Allocator{Proportional{}, Greedy{}, Tune{}, Opt{}, Opt{Round: true}} {
		want, err := a.Allocate(context.Background(), servers, jobs)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				got, err := a.Allocate(context.Background(), servers, jobs)
				if err != nil || got.Placed != want.Placed || got.Demoted != want.Demoted {
					t.Errorf("%T: %v, %d placed, %d demoted; want %d, %d", a, err, got.Placed, got.Demoted, want.Placed, want.Demoted)
				}
				_ = Zoo().Lookup("res18").Surface.At(Share{5, 80})
			})
		}
		wg.Wait()
	}
}
