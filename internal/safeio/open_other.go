//go:build !unix

package safeio

import (
	"io/fs"
	"os"
)

// openNonBlocking checks the path before it opens it, as Windows and Plan
// 9 have no non-blocking open; the check in Open repeats after opening.
func openNonBlocking(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return os.Open(path)
}
