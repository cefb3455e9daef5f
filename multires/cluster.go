package multires

import (
	"fmt"
	"math"
)

// Server is one machine's capacity: GPUs, CPU cores and memory. A Server
// is a plain value, safe for concurrent use.
type Server struct {
	// GPUs, CPUs and MemGB are its GPUs, CPU cores and memory (GB).
	GPUs  int     `json:"gpus"`
	CPUs  float64 `json:"cpus"`
	MemGB float64 `json:"mem_gb"`
}

// Proportional returns a GPU's proportional share of the server: what a
// GPU-proportional scheduler gives a job per GPU there.
func (s Server) Proportional() Share {
	return Share{s.CPUs / float64(s.GPUs), s.MemGB / float64(s.GPUs)}
}

// Homogeneous returns n servers of the same capacity (Synergy's default
// cluster is Homogeneous(16, Server{8, 24, 500})).
func Homogeneous(n int, s Server) []Server {
	out := make([]Server, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// CheckServers checks a cluster's servers; the error is an *Error of kind
// ErrInvalidCluster naming the first bad one.
func CheckServers(servers []Server) error {
	if len(servers) == 0 || len(servers) > MaxServers {
		return errorf(ErrInvalidCluster, "servers", "%d servers: want 1 to %d", len(servers), MaxServers)
	}
	for i, s := range servers {
		if s.GPUs < 1 || s.GPUs > 1<<10 || !(s.CPUs > 0 && s.CPUs <= MaxCPUs) || !(s.MemGB > 0 && s.MemGB <= MaxMemGB) {
			return errorf(ErrInvalidCluster, fmt.Sprintf("servers[%d]", i), "%d GPUs, %g CPUs, %g GB: want 1 to 1024 GPUs and positive CPUs and memory within bounds", s.GPUs, s.CPUs, s.MemGB)
		}
	}
	return nil
}

// Part is the piece of a job's allocation on one server.
// It is a plain value, safe for concurrent use.
type Part struct {
	// Server is the server's index in the servers given.
	Server int
	// GPUs, CPUs and MemGB are what the job holds there.
	GPUs  int
	CPUs  float64
	MemGB float64
}

// Share returns the part's resources per GPU.
func (p Part) Share() Share { return Share{p.CPUs / float64(p.GPUs), p.MemGB / float64(p.GPUs)} }

// state is the free capacity during one allocation, and what is placed
// where.
type state struct {
	servers  []Server
	freeGPUs []int
	cpus     []float64
	mem      []float64
	totalGPU int
	free     int     // free GPUs in all
	first    int     // no server before it has a free GPU
	on       [][]int // per server: indices of placements there, in order
	maxCPUs  float64 // the largest server's
	maxMem   float64
	maxGPUs  int
	minProp  Share // the smallest proportional share of any server
}

func newState(servers []Server) *state {
	st := &state{servers: servers, freeGPUs: make([]int, len(servers)),
		cpus: make([]float64, len(servers)), mem: make([]float64, len(servers)), on: make([][]int, len(servers))}
	for i, s := range servers {
		st.freeGPUs[i], st.cpus[i], st.mem[i] = s.GPUs, s.CPUs, s.MemGB
		st.totalGPU += s.GPUs
		st.free += s.GPUs
		st.maxCPUs, st.maxMem, st.maxGPUs = max(st.maxCPUs, s.CPUs), max(st.maxMem, s.MemGB), max(st.maxGPUs, s.GPUs)
		p := s.Proportional()
		if i == 0 || p.CPUs < st.minProp.CPUs {
			st.minProp.CPUs = p.CPUs
		}
		if i == 0 || p.MemGB < st.minProp.MemGB {
			st.minProp.MemGB = p.MemGB
		}
	}
	return st
}

// demandFunc gives the share per GPU a job asks for on a server.
type demandFunc func(server int) Share

// firstFit takes n GPUs in server order, as many on each server as fit
// with share d(s) per GPU (Synergy's first-fit: free GPUs in ascending
// order, a GPU taken when its server still holds a share; a job may span
// servers). It returns the parts, or nil and changes nothing when fewer
// than n fit.
func (st *state) firstFit(n int, d demandFunc) []Part {
	var parts []Part
	left := n
	for st.first < len(st.servers) && st.freeGPUs[st.first] == 0 {
		st.first++
	}
	for s := st.first; s < len(st.servers); s++ {
		if left == 0 {
			break
		}
		if st.freeGPUs[s] == 0 {
			continue
		}
		sh := d(s)
		k := min(st.freeGPUs[s], left, fits(st.cpus[s], sh.CPUs), fits(st.mem[s], sh.MemGB))
		if k > 0 {
			parts = append(parts, Part{Server: s, GPUs: k, CPUs: sh.CPUs * float64(k), MemGB: sh.MemGB * float64(k)})
			left -= k
		}
	}
	if left > 0 {
		return nil
	}
	return parts
}

// fits returns how many shares of size per fit in avail.
func fits(avail, per float64) int {
	if per <= 0 {
		return math.MaxInt32
	}
	return int(math.Floor((avail + eps) / per))
}

func (st *state) take(parts []Part, job int) {
	for _, p := range parts {
		st.freeGPUs[p.Server] -= p.GPUs
		st.free -= p.GPUs
		st.cpus[p.Server] -= p.CPUs
		st.mem[p.Server] -= p.MemGB
		st.on[p.Server] = append(st.on[p.Server], job)
	}
}

// resize changes a placed job's CPUs and memory on its servers to d(s)
// per GPU, keeping its GPUs.
func (st *state) resize(parts []Part, d demandFunc) {
	for i := range parts {
		p := &parts[i]
		sh := d(p.Server)
		st.cpus[p.Server] += p.CPUs - sh.CPUs*float64(p.GPUs)
		st.mem[p.Server] += p.MemGB - sh.MemGB*float64(p.GPUs)
		p.CPUs, p.MemGB = sh.CPUs*float64(p.GPUs), sh.MemGB*float64(p.GPUs)
	}
}
