package gavel

import (
	"testing"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/gpusched/gpusched/topology"
)

func TestTables(t *testing.T) {
	for name, tab := range map[string]*perfmodel.Table{"simulation": Simulation(), "physical": Physical()} {
		if got := len(tab.GPUTypes()); got != 3 {
			t.Errorf("%s: %d GPU types, want k80, p100, v100", name, got)
		}
		k := perfmodel.JobKey{Model: "ResNet-18", BatchSize: 16, ScaleFactor: 1}
		if _, err := tab.Throughput(k, topology.V100); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if first, again := Simulation(), Simulation(); first != again {
		t.Error("Simulation parses its table more than once")
	}
}
