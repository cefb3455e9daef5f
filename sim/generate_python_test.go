package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected jobs were written by Gavel's own simulator (scheduler.py:
// simulate with output_trace_file_name, seed 0; steps truncated to integers
// and arrivals printed to 6 decimals there).
func TestGavelWorkloadPythonMatchesGavel(t *testing.T) {
	type want struct {
		name     string
		steps    int
		sf       int
		arrival  float64
		position int
	}
	for _, tc := range []struct {
		rate  float64
		multi bool
		n     int
		jobs  []want
	}{
		{4.8, false, 300, []want{
			{"ResNet-18 (batch size 64)", 1646636, 1, 0, 0},
			{"Transformer (batch size 16)", 343170, 1, 203.821727, 1},
			{"Recommendation (batch size 2048)", 16034, 1, 793.145690, 2},
			{"ResNet-18 (batch size 256)", 34835, 1, 227938.226922, 299},
		}},
		{2.8, true, 200, []want{
			{"ResNet-18 (batch size 64)", 17484476, 8, 0, 0},
			{"Transformer (batch size 16)", 343170, 1, 349.408676, 1},
			{"LM (batch size 5)", 869104, 4, 3144.382778, 4},
			{"ResNet-18 (batch size 256)", 203459, 1, 271019.571662, 199},
		}},
	} {
		jobs, err := (&GavelWorkload{Rate: tc.rate, MultiGPU: tc.multi, Python: true}).Generate(tc.n)
		require.NoError(t, err)
		for _, w := range tc.jobs {
			j := jobs[w.position]
			assert.Equal(t, w.name, j.Key.Name())
			assert.Equal(t, w.steps, int(j.Steps))
			assert.Equal(t, w.sf, j.Key.ScaleFactor)
			assert.InDelta(t, w.arrival, j.Arrival, 1e-6)
		}
	}
}
