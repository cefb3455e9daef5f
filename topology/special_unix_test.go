//go:build unix

package topology

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Static refuses a device and a named pipe at once: before, /dev/zero
// read until memory ran out and a pipe without a writer blocked forever.
func TestStaticRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "spec.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for path, what := range map[string]string{"/dev/zero": "character device", fifo: "named pipe"} {
		done := make(chan error, 1)
		go func() { _, err := (Static{Path: path}).Discover(context.Background()); done <- err }()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrMalformedSpec)
			assert.ErrorContains(t, err, "not a regular file (a "+what+")")
		case <-time.After(10 * time.Second):
			t.Fatalf("Static blocked on %s", path)
		}
	}
}
