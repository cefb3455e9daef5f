package perfmodel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/topology"
)

func BenchmarkParseGavelJSON(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("gavel", "data", "simulation_throughputs.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseGavelJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThroughput(b *testing.B) {
	tab := gavelSimulation()
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
	tab := gavelSimulation()
	a, c := key("ResNet-18", 16, 1), key("Transformer", 64, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tab.Colocated(a, c, topology.V100); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContention: eq. 6 for 5,000 jobs on 1,250 servers of 8 GPUs,
// a third of them spread over two to four servers.
func BenchmarkContention(b *testing.B) {
	var pl [][]ServerShare
	for j := range 5000 {
		s := j % 1250
		switch j % 3 {
		case 0:
			pl = append(pl, []ServerShare{{s, 2}, {(s + 1) % 1250, 2}, {(s + 7) % 1250, 4}})
		default:
			pl = append(pl, []ServerShare{{s, 1 + j%8}})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Contention(pl); err != nil {
			b.Fatal(err)
		}
	}
}
