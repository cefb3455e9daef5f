package topology

import (
	"encoding/json"
	"fmt"
	"testing"
)

func BenchmarkHomogeneous(b *testing.B) {
	for _, servers := range []int{128, 1024, 4096} {
		b.Run(fmt.Sprintf("gpus=%d", servers*8), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Homogeneous(servers, ServerTemplate{Type: V100, GPUs: 8, Interconnect: HybridCubeMesh}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseJSON(b *testing.B) {
	c, err := Homogeneous(1024, ServerTemplate{Type: A100, GPUs: 8, Interconnect: NVSwitch})
	if err != nil {
		b.Fatal(err)
	}
	data, err := json.Marshal(c.Spec())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("gpus=8192", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The 59-byte spec of the largest cluster: 1,024 servers of 1,024 GPUs
	// sharing one link matrix, checked once (22 s when every server's
	// matrix was checked).
	b.Run("gpus=1048576", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseJSON([]byte(largestSpec)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
