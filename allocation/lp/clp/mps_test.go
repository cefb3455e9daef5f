//go:build clp

package clp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpusched/gpusched/allocation/lp"
)

// solveMPS writes m to an MPS file, has CLP read and solve it, and returns
// the objective CLP reports.
func solveMPS(t *testing.T, m *lp.Model) (float64, error) {
	path := filepath.Join(t.TempDir(), "model.mps")
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := m.WriteMPS(f); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return solveMPSFile(path, m.Sense())
}
