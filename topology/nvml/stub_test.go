//go:build !nvml

package nvml

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpusched/gpusched/topology"
)

func TestBuiltWithoutNVML(t *testing.T) {
	_, err := (&Discoverer{ID: "x"}).Details(context.Background())
	assert.ErrorIs(t, err, topology.ErrNoDriver)
	assert.ErrorContains(t, err, "rebuild with -tags nvml")
}
