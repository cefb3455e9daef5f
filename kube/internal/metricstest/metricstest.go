// Package metricstest reads samples out of a Prometheus gatherer (a
// registry) or a scraped /metrics page, for tests.
package metricstest

import (
	"fmt"
	"io"
	"math"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are metric families by name (a value: safe for concurrent
// reads).
type Families map[string]*dto.MetricFamily

// Gather reads a gatherer's families.
func Gather(g prometheus.Gatherer) (Families, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := make(Families, len(fams))
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out, nil
}

// Parse reads a /metrics page in Prometheus's text format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metricstest: %w", err)
	}
	return fams, nil
}

// Value returns the sample of the metric with exactly these labels: a
// gauge's or counter's value, a histogram's sample count.
func (f Families) Value(name string, labels map[string]string) (float64, bool) {
	fam, ok := f[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		return value(m), true
	}
	return 0, false
}

// Sum returns the sum of the metric's samples whose labels include
// these (nil: all of them).
func (f Families) Sum(name string, labels map[string]string) float64 {
	fam, ok := f[name]
	if !ok {
		return 0
	}
	sum := 0.0
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		sum += value(m)
	}
	return sum
}

// SumBy returns the metric's samples summed by the value of one label
// (samples without it under ""); empty if there is no such metric.
func (f Families) SumBy(name, label string) map[string]float64 {
	out := map[string]float64{}
	fam, ok := f[name]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		out[key] += value(m)
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// Quantile estimates the q-quantile of the histogram with exactly these
// labels as Prometheus's histogram_quantile does: linear within the
// bucket that holds it (the lowest bucket from 0, the highest bucket's
// upper bound for what lies above it). It reports false without such a
// histogram or samples.
func (f Families) Quantile(name string, labels map[string]string, q float64) (float64, bool) {
	fam, ok := f[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		if m.Histogram == nil || len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		h := m.GetHistogram()
		total := float64(h.GetSampleCount())
		if total == 0 {
			return 0, false
		}
		rank := q * total
		lower, below := 0.0, 0.0
		for _, b := range h.GetBucket() {
			upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
			if count >= rank {
				if math.IsInf(upper, 1) {
					return lower, true // above the highest bound: that bound
				}
				if count == below {
					return upper, true
				}
				return lower + (upper-lower)*(rank-below)/(count-below), true
			}
			lower, below = upper, count
		}
		return lower, true
	}
	return 0, false
}
