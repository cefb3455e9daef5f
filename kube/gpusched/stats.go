package gpusched

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// maxStatSamples bounds the samples kept.
const maxStatSamples = 1 << 20

// stats collects the plugin's time per scheduled pod (the sum over its
// extension points and the nodes they ran on, up to Permit; known in the
// scheduling cycles whose Filter and Score calls are timed, one in
// metricsSampleEvery) and the time of its Bind call.
type stats struct {
	path  string
	mu    sync.Mutex
	pods  int
	plug  []time.Duration
	bind  []time.Duration
	dirty bool
}

// Stats is what the stats file holds: a value, safe for concurrent reads.
type Stats struct {
	// Pods is the number of pods scheduled (with GPUs) by this process.
	Pods int `json:"pods"`
	// Timed is the number of those whose plugin time was measured: the
	// pods of one scheduling cycle in ten (Filter and Score run once per
	// node, and are timed in those cycles only).
	Timed int `json:"timed"`
	// PluginP50Micros, PluginP99Micros and PluginMaxMicros are the
	// percentiles of the plugin's time per timed pod, in microseconds.
	PluginP50Micros float64 `json:"plugin_p50_us"`
	PluginP99Micros float64 `json:"plugin_p99_us"`
	PluginMaxMicros float64 `json:"plugin_max_us"`
	// BindP50Micros and BindP99Micros are those of the Bind API call.
	BindP50Micros float64 `json:"bind_p50_us"`
	BindP99Micros float64 `json:"bind_p99_us"`
}

func newStats(path string) *stats { return &stats{path: path} }

// count counts a pod scheduled in a cycle that was not timed.
func (s *stats) count() {
	s.mu.Lock()
	s.pods++
	s.dirty = true
	s.mu.Unlock()
}

func (s *stats) add(d time.Duration) {
	s.mu.Lock()
	s.pods++
	if len(s.plug) < maxStatSamples {
		s.plug = append(s.plug, d)
	}
	s.dirty = true
	s.mu.Unlock()
}

func (s *stats) addBind(d time.Duration) {
	s.mu.Lock()
	if len(s.bind) < maxStatSamples {
		s.bind = append(s.bind, d)
	}
	s.dirty = true
	s.mu.Unlock()
}

// Snapshot returns the statistics so far.
func (s *stats) Snapshot() Stats {
	s.mu.Lock()
	plug, bind, pods := slices.Clone(s.plug), slices.Clone(s.bind), s.pods
	s.mu.Unlock()
	slices.Sort(plug)
	slices.Sort(bind)
	return Stats{
		Pods:            pods,
		Timed:           len(plug),
		PluginP50Micros: quantile(plug, 0.50),
		PluginP99Micros: quantile(plug, 0.99),
		PluginMaxMicros: quantile(plug, 1),
		BindP50Micros:   quantile(bind, 0.50),
		BindP99Micros:   quantile(bind, 0.99),
	}
}

// quantile of sorted durations, in microseconds (nearest rank).
func quantile(v []time.Duration, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	i := int(q*float64(len(v))+0.5) - 1
	i = min(max(i, 0), len(v)-1)
	return float64(v[i]) / 1e3
}

// run writes the file every second while the statistics change.
func (s *stats) run(ctx context.Context, log klog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			dirty := s.dirty
			s.dirty = false
			s.mu.Unlock()
			if dirty {
				if err := s.write(); err != nil {
					log.Error(err, "writing the statistics")
				}
			}
		}
	}
}

// write writes the file atomically (a reader never sees half of it).
func (s *stats) write() error {
	if s.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(s.Snapshot(), "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".stats-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), s.path)
}
