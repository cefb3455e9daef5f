//go:build !nvml

package nvml

import (
	"context"
	"fmt"

	"github.com/gpusched/gpusched/topology"
)

// Discoverer discovers the local server through NVML. This build has no
// NVML support (it needs cgo and the build tag nvml): Discover and Details
// return an error wrapping topology.ErrNoDriver that says to rebuild with
// -tags nvml. A Discoverer is safe for concurrent use.
type Discoverer struct {
	// ID names the server; empty means the host name.
	ID string
}

var _ topology.Discoverer = (*Discoverer)(nil)

// errNotBuilt says how to get NVML support.
var errNotBuilt = fmt.Errorf("%w: this binary was built without NVML support; rebuild with -tags nvml (needs cgo)", topology.ErrNoDriver)

// Discover implements topology.Discoverer; without the build tag nvml it
// always fails with an error wrapping topology.ErrNoDriver.
func (d *Discoverer) Discover(ctx context.Context) (*topology.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errNotBuilt
}

// Details discovers the server and returns NVML's details too; without the
// build tag nvml it always fails with an error wrapping
// topology.ErrNoDriver.
func (d *Discoverer) Details(ctx context.Context) (*Discovery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errNotBuilt
}
