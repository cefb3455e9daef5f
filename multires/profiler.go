package multires

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Profiler builds a job's Surface by Synergy's optimistic profiling
// (section 4.1): the job's iteration rate is measured at a few CPU counts
// with its whole dataset in memory (the optimistic case), and memory's
// effect is derived, not measured: with m GB of cache per GPU for a
// dataset of DatasetGB per GPU, a cache that keeps what it holds (Synergy
// uses MinIO's, whose hit rate is the cached fraction f = m / DatasetGB,
// where a page cache under a sequential scan thrashes) leaves 1 - f of
// each iteration's ReadMB per GPU to storage at StorageMBps per GPU, so
//
//	rate(c, m) = min(cpuRate(c), StorageMBps / ((1 - f) ReadMB))
//
// and rates are relative to rate(Proportional). Measurements come from a
// profiling run (Observe) or from the progress of a job that runs with
// its dataset cached (ObserveShare, which tells the two cases apart), so
// the surface improves as the job runs; repeated measurements at one CPU
// count are averaged. Between measured CPU counts the rate is
// interpolated, beyond them held at the nearest.
//
// A Profiler is safe for concurrent use.
type Profiler struct {
	// Proportional is the share the surface is relative to.
	Proportional Share
	// MemGB is the surface's memory grid (GB per GPU), strictly
	// ascending; it should reach DatasetGB.
	MemGB []float64
	// DatasetGB is the job's dataset per GPU, ReadMB what one iteration
	// reads per GPU, and StorageMBps the storage bandwidth per GPU.
	DatasetGB, ReadMB, StorageMBps float64

	mu   sync.Mutex
	cpus map[float64]*meanRate
}

type meanRate struct{ sum, n float64 }

// MaxObservations bounds the CPU counts a Profiler keeps.
const MaxObservations = MaxGrid

func (p *Profiler) check() error {
	if err := p.Proportional.check("profiler.proportional", ErrInvalidProfile); err != nil {
		return err
	}
	if err := checkAxis("profiler.mem_gb", p.MemGB, MaxMemGB); err != nil {
		return err
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"dataset_gb", p.DatasetGB}, {"read_mb", p.ReadMB}, {"storage_mbps", p.StorageMBps}} {
		if !(v.v > 0 && v.v <= 1e9) {
			return errorf(ErrInvalidProfile, "profiler."+v.name, "%g: want a number in (0, 1e9]", v.v)
		}
	}
	return nil
}

// Observe records a measured iteration rate (iterations per second) at
// cpus CPUs per GPU with the whole dataset cached.
func (p *Profiler) Observe(cpus, rate float64) error {
	if err := p.check(); err != nil {
		return err
	}
	if !(cpus > 0 && cpus <= MaxCPUs) || !(rate >= 0 && rate <= 1e12) {
		return errorf(ErrInvalidProfile, "observation", "%g CPUs, %g iterations/s: want CPUs in (0, %d] and a rate in [0, 1e12]", cpus, rate, MaxCPUs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cpus == nil {
		p.cpus = make(map[float64]*meanRate)
	}
	m := p.cpus[cpus]
	if m == nil {
		if len(p.cpus) >= MaxObservations {
			return errorf(ErrInvalidProfile, "observation", "%g CPUs: already %d CPU counts measured", cpus, MaxObservations)
		}
		m = &meanRate{}
		p.cpus[cpus] = m
	}
	m.sum += rate
	m.n++
	return nil
}

// ObserveShare records the progress of a job running with share s: a
// measurement of its CPUs when its memory holds the dataset, which it
// reports as used; otherwise storage may have bounded the rate and the
// measurement is not kept.
func (p *Profiler) ObserveShare(s Share, rate float64) (used bool, err error) {
	if s.MemGB+eps < p.DatasetGB {
		return false, p.check()
	}
	return true, p.Observe(s.CPUs, rate)
}

// Surface returns the surface over the measured CPU counts and MemGB,
// relative to the rate at Proportional. It needs at least one measurement
// and a positive rate at the proportional share.
func (p *Profiler) Surface() (*Surface, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	cpus := make([]float64, 0, len(p.cpus))
	for c := range p.cpus {
		cpus = append(cpus, c)
	}
	slices.Sort(cpus)
	cpuRate := make([]float64, len(cpus))
	for i, c := range cpus {
		cpuRate[i] = p.cpus[c].sum / p.cpus[c].n
		if i > 0 {
			cpuRate[i] = max(cpuRate[i], cpuRate[i-1]) // noise never makes more CPUs slower
		}
	}
	p.mu.Unlock()
	if len(cpus) == 0 {
		return nil, errorf(ErrInvalidProfile, "profiler", "no measurements")
	}
	cpuSurf := &Surface{CPUs: cpus, MemGB: []float64{1}, Rate: make([][]float64, len(cpus))}
	for i := range cpus {
		cpuSurf.Rate[i] = []float64{cpuRate[i]}
	}
	ref := min(cpuSurf.At(Share{p.Proportional.CPUs, 1}), p.storageRate(p.Proportional.MemGB))
	if !(ref > 0) {
		return nil, errorf(ErrInvalidProfile, "profiler", "rate %g at the proportional share %v: want a positive rate to be relative to", ref, p.Proportional)
	}
	s := &Surface{CPUs: cpus, MemGB: slices.Clone(p.MemGB), Rate: make([][]float64, len(cpus))}
	for i := range cpus {
		s.Rate[i] = make([]float64, len(p.MemGB))
		for j, m := range p.MemGB {
			s.Rate[i][j] = min(cpuRate[i], p.storageRate(m)) / ref
		}
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("profiler: %w", err)
	}
	return s, nil
}

// storageRate is the iteration rate storage allows with m GB cached per
// GPU (unbounded when the dataset fits).
func (p *Profiler) storageRate(m float64) float64 {
	miss := 1 - m/p.DatasetGB
	if miss <= 0 {
		return math.Inf(1)
	}
	return p.StorageMBps / (miss * p.ReadMB)
}
