package multires

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// TestSplitHandSolved: one of Synergy's servers holds two AlexNets (best
// case 12 CPUs, 125 GB) and six GNMTs (1 CPU): 30 CPUs asked of 24. The
// later AlexNet drops to the proportional 3 CPUs and 62.5 GB (ties go
// against the later job): 12 + 3 + 6 = 21 CPUs.
func TestSplitHandSolved(t *testing.T) {
	_, jobs := oneServer()
	p, err := Split(synergyServer, jobs)
	if err != nil {
		t.Fatal(err)
	}
	got := rates(p)
	if got[0] != 2.94 || got[1] != 1 || p.Demoted != 1 || !p.Placements[1].Demoted || sum(got) != 9.94 {
		t.Fatalf("rates %v, demoted %d", got, p.Demoted)
	}
	// Bounds: the first AlexNet may have at most 6 CPUs (1.75); a GNMT
	// asks for at least 2 CPUs: 6 + 12 + 2 + 5 = 25 CPUs, one too many,
	// so the second AlexNet drops to 3.
	jobs[0].Max = Share{CPUs: 6}
	jobs[2].Min = Share{CPUs: 2}
	p, err = Split(synergyServer, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if got := rates(p); got[0] != 1.75 || got[1] != 1 || p.Demoted != 1 || p.Placements[2].Parts[0].CPUs != 2 {
		t.Fatalf("bounded: rates %v, demoted %d, GNMT holds %+v", got, p.Demoted, p.Placements[2].Parts[0])
	}
	// A minimum above the proportional share is held to it.
	jobs[2].Min = Share{CPUs: 20}
	p, _ = Split(synergyServer, jobs)
	if c := p.Placements[2].Parts[0].CPUs; c != 3 {
		t.Fatalf("a GNMT asking for at least 20 CPUs holds %g, want the proportional 3", c)
	}
}

// TestSplitInvariants: on random servers and jobs, Split fits the
// server, gives no job more than its best case or less than its fallback,
// and equals Tune's total rate where Tune placed the same jobs on one
// server.
func TestSplitInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	z := Zoo()
	for trial := range 500 {
		srv := Server{GPUs: 8, CPUs: float64(8 + rng.IntN(60)), MemGB: float64(100 + rng.IntN(900))}
		var jobs []Job
		for left := srv.GPUs; left > 0; {
			g := min(left, []int{1, 1, 2, 4}[rng.IntN(4)])
			jobs = append(jobs, Job{ID: len(jobs), GPUs: g, Profile: z.Models[rng.IntN(len(z.Models))]})
			left -= g
		}
		p, err := Split(srv, jobs)
		if err != nil {
			t.Fatal(err)
		}
		checkCapacity(t, "split", []Server{srv}, jobs, p)
		for i, pl := range p.Placements {
			sh := pl.Parts[0].Share()
			n := float64(jobs[i].GPUs)
			best := Share{min(jobs[i].Profile.Ideal.CPUs, srv.CPUs/n), min(jobs[i].Profile.Ideal.MemGB, srv.MemGB/n)}
			best = jobs[i].bound(jobs[i].floor(best, srv.Proportional()))
			fb := fallbackShare(jobs[i], best, srv.Proportional())
			if sh != best && sh != fb {
				t.Fatalf("trial %d: job %d holds %v; best %v, fallback %v", trial, i, sh, best, fb)
			}
		}
	}
	if _, err := Split(synergyServer, []Job{{GPUs: 5, Profile: z.Models[0]}, {GPUs: 4, Profile: z.Models[0]}}); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("9 GPUs on 8: %v", err)
	}
	if _, err := Split(synergyServer, []Job{{GPUs: 1, Profile: z.Models[0], Min: Share{CPUs: 4}, Max: Share{CPUs: 2}}}); !errors.Is(err, ErrInvalidJob) {
		t.Fatalf("max below min: %v", err)
	}
}
