package gavel

import (
	_ "embed" // the embedded Gavel tables
	"sync"

	"github.com/gpusched/gpusched/perfmodel"
)

//go:embed data/simulation_throughputs.json
var simulation []byte

//go:embed data/physical_cluster_throughputs.json
var physical []byte

var (
	simulationOnce = sync.OnceValues(func() (*perfmodel.Table, error) { return perfmodel.ParseGavelJSON(simulation) })
	physicalOnce   = sync.OnceValues(func() (*perfmodel.Table, error) { return perfmodel.ParseGavelJSON(physical) })
)

// Simulation returns the throughput table of Gavel's simulator
// (simulation_throughputs.json), embedded in the binary and parsed on first
// use: 26 job types on k80, p100 and v100 at scale factors 1, 2, 4 and 8
// (ResNet-18, ResNet-50, Transformer and LM only above 1), and all 676
// single-GPU pairs per type. It panics only if the embedded file is corrupt,
// which this package's tests rule out. The table is immutable and safe for
// concurrent use; every call returns the same one.
func Simulation() *perfmodel.Table { return must(simulationOnce()) }

// Physical returns the table measured on Gavel's physical cluster
// (physical_cluster_throughputs.json), which differs from [Simulation] in 73
// isolated values.
func Physical() *perfmodel.Table { return must(physicalOnce()) }

func must(t *perfmodel.Table, err error) *perfmodel.Table {
	if err != nil {
		panic("gavel: embedded throughput table is corrupt: " + err.Error())
	}
	return t
}
