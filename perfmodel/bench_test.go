package perfmodel

import (
	"testing"

	"github.com/gpusched/gpusched/topology"
)

func BenchmarkParseGavelJSON(b *testing.B) {
	b.SetBytes(int64(len(gavelSimulation)))
	for b.Loop() {
		if _, err := ParseGavelJSON(gavelSimulation); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThroughput(b *testing.B) {
	tab := Gavel()
	jobs := tab.Jobs()
	types := tab.GPUTypes()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := tab.Throughput(jobs[i%len(jobs)], types[i%len(types)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkColocated(b *testing.B) {
	tab := Gavel()
	a, c := key("ResNet-18", 16, 1), key("Transformer", 64, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tab.Colocated(a, c, topology.V100); err != nil {
			b.Fatal(err)
		}
	}
}
