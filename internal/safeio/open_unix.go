//go:build unix

package safeio

import (
	"os"
	"syscall"
)

// openNonBlocking opens path so that a named pipe without a writer does
// not block; reads from a regular file are unaffected by the flag.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
