package topology

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Discoverer finds the cluster (or the local server) a scheduler runs on.
// The NVML implementation lives in the subpackage nvml (cgo); Static reads
// a JSON spec.
// Implementations should be safe for concurrent use (Static is).
type Discoverer interface {
	Discover(ctx context.Context) (*Cluster, error)
}

// ErrNoDriver reports that no GPU driver (NVML library) is present.
var ErrNoDriver = errors.New("topology: no NVIDIA driver found (NVML library not loaded)")

// Static discovers the cluster described by a JSON spec (see ClusterSpec),
// given as bytes or as a file path.
// It is safe for concurrent use: Discover only reads its spec.
type Static struct {
	Spec []byte
	Path string
}

// Discover implements Discoverer.
func (s Static) Discover(ctx context.Context) (*Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data := s.Spec
	if data == nil {
		if s.Path == "" {
			return nil, specErr(ErrMalformedSpec, "", "static discoverer has neither a spec nor a path")
		}
		var err error
		if data, err = os.ReadFile(s.Path); err != nil {
			return nil, fmt.Errorf("topology: %w", err)
		}
	}
	return ParseJSON(data)
}
