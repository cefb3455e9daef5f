package perfmodel

import (
	"os"
	"path/filepath"
	"sync"
)

// The tests of this package read Gavel's tables from the files that package
// perfmodel/gavel embeds (that package imports this one, so the tests here
// cannot import it).
var (
	gavelSimulationOnce = sync.OnceValues(func() (*Table, error) { return readGavelFile("simulation_throughputs.json") })
	gavelPhysicalOnce   = sync.OnceValues(func() (*Table, error) { return readGavelFile("physical_cluster_throughputs.json") })
)

func readGavelFile(name string) (*Table, error) {
	data, err := os.ReadFile(filepath.Join("gavel", "data", name))
	if err != nil {
		return nil, err
	}
	return ParseGavelJSON(data)
}

func gavelSimulation() *Table { return mustTable(gavelSimulationOnce()) }

func gavelPhysical() *Table { return mustTable(gavelPhysicalOnce()) }

func mustTable(t *Table, err error) *Table {
	if err != nil {
		panic(err)
	}
	return t
}
