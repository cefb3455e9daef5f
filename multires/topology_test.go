package multires

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/topology"
)

// TestServersOf: a cluster described in JSON with its hosts' CPUs and
// memory: two DGX-like V100 servers of 8 GPUs, 40 CPUs and 500 GiB (5 CPUs
// per GPU) and two T4 servers of 4 GPUs, 8 CPUs and 250 GiB (2 CPUs and 62.5 GiB per GPU).
// A GPU-proportional split gives a ResNet-18 5 CPUs on the first (its
// surface: 1.53) and 2 on the second (0.72).
func TestServersOf(t *testing.T) {
	c, err := topology.ReadJSON(strings.NewReader(`{"servers": [
	  {"id": "v", "count": 2, "gpu_type": "v100", "gpus": 8, "cpus": 40, "host_memory_gib": 500},
	  {"id": "t", "count": 2, "gpu_type": "t4", "gpus": 4, "cpus": 8, "host_memory_gib": 250}]}`))
	if err != nil {
		t.Fatal(err)
	}
	servers, err := ServersOf(c)
	if err != nil || len(servers) != 4 || servers[0] != (Server{8, 40, 500}) || servers[3] != (Server{4, 8, 250}) {
		t.Fatalf("%+v, %v", servers, err)
	}
	r18 := Zoo().Lookup("res18")
	p, err := Proportional{}.Allocate(context.Background(), servers[2:], []Job{{GPUs: 1, Profile: r18}})
	if err != nil || p.Placements[0].Rate != 0.72 {
		t.Fatalf("on the T4 server: %+v, %v", p, err)
	}
	p, err = Proportional{}.Allocate(context.Background(), servers[:1], []Job{{GPUs: 1, Profile: r18}})
	if err != nil || p.Placements[0].Rate != 1.53 {
		t.Fatalf("on the V100 server: %+v, %v", p, err)
	}
	c.Servers[1].CPUs = 0
	var e *Error
	if _, err := ServersOf(c); !errors.Is(err, ErrInvalidCluster) || !errors.As(err, &e) || e.Where != "servers[1] (v-1)" {
		t.Fatalf("a server without CPUs: %v", err)
	}
}
