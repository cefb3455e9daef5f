package topology

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestHostResources: a server's host CPUs and memory are read from a spec
// and bounded; NaN, negative and huge values are refused with the server
// named.
func TestHostResources(t *testing.T) {
	c, err := ReadJSON(strings.NewReader(`{"servers": [{"id": "a", "gpu_type": "v100", "gpus": 8, "cpus": 48, "host_memory_gib": 512}]}`))
	if err != nil || c.Servers[0].CPUs != 48 || c.Servers[0].MemoryGiB != 512 {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, err := ReadJSON(strings.NewReader(`{"servers": [{"id": "a", "gpu_type": "v100", "gpus": 8, "cpus": 1e300}]}`)); err == nil || !strings.Contains(err.Error(), "CPUs") {
		t.Fatalf("1e300 CPUs: %v", err)
	}
	for _, v := range []float64{math.NaN(), -1, math.Inf(1)} {
		c.Servers[0].CPUs = v
		if err := c.Validate(); !errors.Is(err, ErrInvalidCount) || !strings.Contains(err.Error(), "a") {
			t.Errorf("CPUs %v: %v", v, err)
		}
	}
}
