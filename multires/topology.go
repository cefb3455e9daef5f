package multires

import (
	"fmt"

	"github.com/gpusched/gpusched/topology"
)

// ServersOf returns the servers of a cluster model with their host CPUs
// and memory (topology.Server.CPUs, MemoryGiB; GiB are this package's GB),
// in the cluster's order. A server that does not state them is an *Error
// of kind ErrInvalidCluster naming it.
func ServersOf(c *topology.Cluster) ([]Server, error) {
	out := make([]Server, len(c.Servers))
	for i := range c.Servers {
		s := &c.Servers[i]
		out[i] = Server{GPUs: len(s.GPUs), CPUs: s.CPUs, MemGB: s.MemoryGiB}
		if s.CPUs <= 0 || s.MemoryGiB <= 0 {
			return nil, errorf(ErrInvalidCluster, fmt.Sprintf("servers[%d] (%s)", i, s.ID), "no host CPUs or memory (topology.Server.CPUs, MemoryGiB; \"cpus\", \"host_memory_gib\" in a spec)")
		}
	}
	if err := CheckServers(out); err != nil {
		return nil, err
	}
	return out, nil
}
