package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpusched/gpusched/internal/safeio"
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
// given as bytes or as a file path. The path must name a regular file of at
// most [MaxSpecBytes]: a directory, a device such as /dev/zero or a named
// pipe is refused at once (a pipe is never waited on). Static is a value
// without state, safe for concurrent use.
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
		if data, err = safeio.ReadFile(s.Path, MaxSpecBytes); err != nil {
			if errors.Is(err, safeio.ErrTooLarge) || errors.Is(err, safeio.ErrNotRegular) {
				return nil, specErr(ErrMalformedSpec, s.Path, "%v", errors.Unwrap(err))
			}
			return nil, fmt.Errorf("topology: %w", err)
		}
	}
	return ParseJSON(data)
}
