//go:build unix

package safeio

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Devices and named pipes are refused at once: reading /dev/zero would
// never end, opening a FIFO without a writer would block.
func TestReadFileRefusesSpecialFiles(t *testing.T) {
	_, err := ReadFile("/dev/zero", 1<<20)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, "character device")
	fifo := filepath.Join(t.TempDir(), "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo, 1<<20); done <- err }()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotRegular)
		assert.ErrorContains(t, err, "named pipe")
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile blocked on a named pipe")
	}
	assert.ErrorIs(t, CheckRegular(fifo, 0), ErrNotRegular)
}
