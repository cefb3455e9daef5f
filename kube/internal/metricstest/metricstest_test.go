package metricstest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A page as a /metrics endpoint serves it: values by labels, sums, and
// quantiles interpolated as Prometheus's histogram_quantile does (100
// samples: 10 up to 0.1, 60 more up to 0.2, 30 more up to 0.4; the
// median is the 50th, 40 into the 60 of the second bucket: 0.1 + 0.1 *
// 40/60).
func TestParseValueSumQuantile(t *testing.T) {
	page := `# TYPE x_total counter
x_total{reason="a"} 3
x_total{reason="b"} 4
# TYPE h_seconds histogram
h_seconds_bucket{le="0.1"} 10
h_seconds_bucket{le="0.2"} 70
h_seconds_bucket{le="0.4"} 100
h_seconds_bucket{le="+Inf"} 100
h_seconds_sum 20
h_seconds_count 100
`
	f, err := Parse(strings.NewReader(page))
	require.NoError(t, err)
	v, ok := f.Value("x_total", map[string]string{"reason": "b"})
	assert.True(t, ok)
	assert.Equal(t, 4.0, v)
	_, ok = f.Value("x_total", nil)
	assert.False(t, ok, "no sample without labels")
	assert.Equal(t, 7.0, f.Sum("x_total", nil))
	assert.Equal(t, map[string]float64{"a": 3, "b": 4}, f.SumBy("x_total", "reason"))
	assert.Equal(t, map[string]float64{"": 7}, f.SumBy("x_total", "other"), "without the label: under \"\"")
	assert.Empty(t, f.SumBy("y_total", "reason"))
	n, ok := f.Value("h_seconds", nil)
	assert.True(t, ok)
	assert.Equal(t, 100.0, n)
	q, ok := f.Quantile("h_seconds", nil, 0.5)
	assert.True(t, ok)
	assert.InDelta(t, 0.1+0.1*40.0/60, q, 1e-12)
	q, _ = f.Quantile("h_seconds", nil, 0.05)
	assert.InDelta(t, 0.05, q, 1e-12, "the lowest bucket from 0")
	q, _ = f.Quantile("h_seconds", nil, 0.99)
	assert.InDelta(t, 0.2+0.2*29.0/30, q, 1e-12)
	g, err := Parse(strings.NewReader("# TYPE g histogram\ng_bucket{le=\"1\"} 1\ng_bucket{le=\"+Inf\"} 10\ng_sum 50\ng_count 10\n"))
	require.NoError(t, err)
	q, _ = g.Quantile("g", nil, 0.9)
	assert.Equal(t, 1.0, q, "beyond the highest bound: that bound, as Prometheus answers")
	_, ok = f.Quantile("x_total", nil, 0.5)
	assert.False(t, ok, "not a histogram")
}
