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
type Degradation interface {
	Factor(k float64) float64
}

// LinearDegradation is the paper's example f(alpha, k) = k + alpha (k - 1):
// k jobs share the link, and each extra one costs alpha more in switching.
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
			return fmt.Errorf("%w: %s %v, want positive", ErrInvalidRing, v.name, v.v)
		}
	}
	if !(m.Xi1 > 0 && m.Xi1 <= 1) || !(m.Xi2 >= 0 && m.Xi2 <= 1) {
		return fmt.Errorf("%w: xi1 %v in (0, 1] and xi2 %v in [0, 1] wanted", ErrInvalidRing, m.Xi1, m.Xi2)
	}
	return nil
}

// IterationTime is tau_j of eq. 8 for job j spread over servers servers
// with p contenders (eq. 6, as Contention returns):
//
//	tau = 2(w-1)m/(wB) + (w-1)m/(wC) + xi2*servers + Df*M + Db,
//
// where B is b_i on one server and b_e / f(xi1 p) across servers (eq. 7).
// A job alone on its links (xi1 p below 1) gets b_e undivided.
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
		f := m.Degradation
		if f == nil {
			f = LinearDegradation{m.Alpha}
		}
		b = m.InterBandwidth / f.Factor(max(m.Xi1*float64(p), 1))
	}
	w := float64(j.Workers)
	comm := 2 * (w - 1) * j.GradientSize / (w * b)
	reduce := (w - 1) * j.GradientSize / (w * m.ReduceSpeed)
	return comm + reduce + m.Xi2*float64(servers) + j.ForwardPerSample*j.MiniBatch + j.Backward, nil
}

// ServerShare is a job's GPUs on one server.
type ServerShare struct{ Server, GPUs int }

// Contention returns p_j of eq. 6 for every job, given each job's GPUs per
// server: 0 for a job on one server, else the largest number of jobs
// spanning several servers (itself included) on any of its servers.
// A negative server index or GPU count is an error wrapping ErrInvalidRing.
func Contention(placements [][]ServerShare) ([]int, error) {
	spans := func(pl []ServerShare) bool {
		n := 0
		for _, s := range pl {
			if s.GPUs > 0 {
				n++
			}
		}
		return n > 1
	}
	servers := 0
	for j, pl := range placements {
		for _, s := range pl {
			if s.Server < 0 || s.GPUs < 0 {
				return nil, fmt.Errorf("%w: job %d has %d GPUs on server %d", ErrInvalidRing, j, s.GPUs, s.Server)
			}
			servers = max(servers, s.Server+1)
		}
	}
	crowd := make([]int, servers)
	for _, pl := range placements {
		if spans(pl) {
			for _, s := range pl {
				if s.GPUs > 0 {
					crowd[s.Server]++
				}
			}
		}
	}
	p := make([]int, len(placements))
	for j, pl := range placements {
		if !spans(pl) {
			continue
		}
		for _, s := range pl {
			if s.GPUs > 0 {
				p[j] = max(p[j], crowd[s.Server])
			}
		}
	}
	return p, nil
}
