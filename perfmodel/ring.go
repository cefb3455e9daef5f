package perfmodel

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidRing marks a ring-all-reduce job or model parameter out of
// range (no workers, non-positive bandwidth, negative times).
var ErrInvalidRing = errors.New("invalid ring-all-reduce parameters")

// Degradation maps the effective number of jobs k contending for a link
// to the factor by which each one's bandwidth falls: Factor(1) = 1, and it
// increases with k (Yu et al., MobiHoc 2022, section 4.1).
// Implementations should be safe for concurrent use (LinearDegradation
// is): a RingModel may be shared.
type Degradation interface {
	Factor(k float64) float64
}

// LinearDegradation is the paper's example f(alpha, k) = k + alpha (k - 1):
// k jobs share the link, and each extra one costs alpha more in switching.
// It is a plain value, safe for concurrent use.
type LinearDegradation struct{ Alpha float64 }

// Factor implements Degradation.
func (l LinearDegradation) Factor(k float64) float64 { return k + l.Alpha*(k-1) }

// RingModel is the per-iteration time model of ring-all-reduce training
// under communication contention of Yu, Ji, Rajan and Liu, "On Scheduling
// Ring-All-Reduce Learning Jobs in Multi-Tenant GPU Clusters with
// Communication Contention", ACM MobiHoc 2022, section 4.1, equations 6
// to 8. Units are the caller's, but consistent: gradient size over
// bandwidth and over reduction speed must give the unit of the compute
// times.
//
// A RingModel is a plain value, safe for concurrent use (with a custom
// Degradation, as safe as it).
type RingModel struct {
	// IntraBandwidth (b_i) is the bandwidth between GPUs of one server;
	// InterBandwidth (b_e) that between servers, shared by contending jobs.
	IntraBandwidth, InterBandwidth float64
	// ReduceSpeed (C) is the rate at which a GPU reduces gradients.
	ReduceSpeed float64
	// Xi1 in (0, 1] scales contenders into effective ones (eq. 7: jobs
	// alternate computation and communication); Xi2 in (0, 1] is the
	// overhead per server a job spans.
	Xi1, Xi2 float64
	// Degradation is f; nil means LinearDegradation{Alpha}.
	Degradation Degradation
	Alpha       float64
}

// RingJob is one ring-all-reduce job: its workers (w_j, one per GPU), its
// gradient size (m_j), its mini-batch (M_j) with the forward time per
// sample (Df_j), and its backward time per iteration (Db_j).
// A RingJob is a plain value, safe for concurrent use.
type RingJob struct {
	Workers          int
	GradientSize     float64
	MiniBatch        float64
	ForwardPerSample float64
	Backward         float64
}

func (m RingModel) validate() error {
	for _, v := range []struct {
		name string
		v    float64
	}{{"intra-server bandwidth", m.IntraBandwidth}, {"inter-server bandwidth", m.InterBandwidth}, {"reduction speed", m.ReduceSpeed}} {
		if !(v.v > 0) || math.IsInf(v.v, 1) {
			return fmt.Errorf("%w: %s %v, want positive and finite", ErrInvalidRing, v.name, v.v)
		}
	}
	if !(m.Xi1 > 0 && m.Xi1 <= 1) || !(m.Xi2 >= 0 && m.Xi2 <= 1) {
		return fmt.Errorf("%w: xi1 %v in (0, 1] and xi2 %v in [0, 1] wanted", ErrInvalidRing, m.Xi1, m.Xi2)
	}
	if m.Degradation == nil && (!(m.Alpha >= 0) || math.IsInf(m.Alpha, 1)) {
		return fmt.Errorf("%w: alpha %v, want finite and >= 0 (contention never speeds a link up)", ErrInvalidRing, m.Alpha)
	}
	return nil
}

// IterationTime is tau_j of eq. 8 for job j spread over servers servers
// with p contenders (eq. 6, as Contention returns):
//
//	tau = 2(w-1)m/(wB) + (w-1)m/(wC) + xi2*servers + Df*M + Db,
//
// where B is b_i on one server and b_e / f(xi1 p) across servers (eq. 7).
// A job alone on its links (xi1 p below 1) gets b_e undivided. Errors wrap
// ErrInvalidRing: model parameters out of range (bandwidths and reduction
// speed positive and finite, xi1 in (0, 1], xi2 in [0, 1], alpha >= 0), a
// degradation factor below 1 or not finite (it would make contention speed
// a job up, or its time negative), job sizes negative or not finite, or an
// iteration time that overflows float64.
func (m RingModel) IterationTime(j RingJob, servers, p int) (float64, error) {
	if err := m.validate(); err != nil {
		return 0, err
	}
	if j.Workers < 1 || servers < 1 || servers > j.Workers || p < 0 {
		return 0, fmt.Errorf("%w: %d workers on %d servers with %d contenders", ErrInvalidRing, j.Workers, servers, p)
	}
	for _, v := range []float64{j.GradientSize, j.MiniBatch, j.ForwardPerSample, j.Backward} {
		if !(v >= 0) || math.IsInf(v, 1) {
			return 0, fmt.Errorf("%w: job sizes and times must be finite and non-negative, got %+v", ErrInvalidRing, j)
		}
	}
	b := m.IntraBandwidth
	if servers > 1 {
		k := max(m.Xi1*float64(p), 1)
		var factor float64
		if m.Degradation == nil {
			// Called directly: boxing it in a Degradation would allocate
			// at every call.
			factor = LinearDegradation{m.Alpha}.Factor(k)
		} else {
			factor = m.Degradation.Factor(k)
		}
		if !(factor >= 1) || math.IsInf(factor, 1) {
			return 0, fmt.Errorf("%w: degradation factor %v for %v contenders, want finite and >= 1", ErrInvalidRing, factor, k)
		}
		b = m.InterBandwidth / factor
	}
	w := float64(j.Workers)
	comm := 2 * (w - 1) * j.GradientSize / (w * b)
	reduce := (w - 1) * j.GradientSize / (w * m.ReduceSpeed)
	tau := comm + reduce + m.Xi2*float64(servers) + j.ForwardPerSample*j.MiniBatch + j.Backward
	if math.IsInf(tau, 0) || math.IsNaN(tau) {
		return 0, fmt.Errorf("%w: the iteration time of %+v on %d servers overflows", ErrInvalidRing, j, servers)
	}
	return tau, nil
}

// ServerShare is a job's GPUs on one server.
// A ServerShare is a plain value, safe for concurrent use.
type ServerShare struct{ Server, GPUs int }

// Contention returns p_j of eq. 6 for every job, given each job's GPUs per
// server: 0 for a job on one server, else the largest number of jobs
// spanning several servers (itself included) on any of its servers. A job
// may list a server more than once (its shares there add up); shares of 0
// GPUs do not count. Server indices may be sparse: memory is linear in the
// number of shares, whatever the indices. A negative server index or GPU
// count is an error wrapping ErrInvalidRing.
func Contention(placements [][]ServerShare) ([]int, error) {
	top, shares := -1, 0
	for j, pl := range placements {
		for _, s := range pl {
			if s.Server < 0 || s.GPUs < 0 {
				return nil, fmt.Errorf("%w: job %d has %d GPUs on server %d", ErrInvalidRing, j, s.GPUs, s.Server)
			}
			if s.GPUs > 0 {
				top = max(top, s.Server)
				shares++
			}
		}
	}
	// Servers are indexed directly when the indices are dense enough,
	// else renumbered in order of appearance.
	var index map[int]int
	n := top + 1
	if top >= 4*shares+1024 {
		index = make(map[int]int, shares)
		for _, pl := range placements {
			for _, s := range pl {
				if _, ok := index[s.Server]; !ok && s.GPUs > 0 {
					index[s.Server] = len(index)
				}
			}
		}
		n = len(index)
	}
	at := func(s ServerShare) int {
		if index != nil {
			return index[s.Server]
		}
		return s.Server
	}
	// srv[s].crowd counts the spanning jobs on server s; srv[s].seen = j+1
	// marks s as met while visiting job j, and -(j+1) as counted for it.
	srv := make([]struct{ crowd, seen int }, n)
	p := make([]int, len(placements))
	for j, pl := range placements {
		servers := 0
		for _, s := range pl {
			if c := at(s); s.GPUs > 0 && srv[c].seen != j+1 {
				srv[c].seen = j + 1
				servers++
			}
		}
		if servers < 2 {
			continue
		}
		p[j] = -1 // spans: computed below
		for _, s := range pl {
			if c := at(s); s.GPUs > 0 && srv[c].seen != -(j+1) {
				srv[c].seen = -(j + 1)
				srv[c].crowd++
			}
		}
	}
	for j, pl := range placements {
		if p[j] == 0 {
			continue
		}
		for _, s := range pl {
			if s.GPUs > 0 {
				p[j] = max(p[j], srv[at(s)].crowd)
			}
		}
	}
	return p, nil
}
