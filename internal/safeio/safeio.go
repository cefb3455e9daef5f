package safeio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

var (
	// ErrNotRegular: the path names something other than a regular file
	// (a directory, a device such as /dev/zero, a named pipe, a socket).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the input holds more bytes than the limit.
	ErrTooLarge = errors.New("input too large")
)

// MiB is 1 << 20 bytes, for limits.
const MiB = 1 << 20

// Open opens path for reading if it is a regular file (symbolic links are
// followed); anything else is an error wrapping [ErrNotRegular]. It never
// blocks on a named pipe.
func Open(path string) (*os.File, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	return f, nil
}

// kind names a file mode in words.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}

// CheckRegular reports, without opening it, whether path names a regular
// file of at most limit bytes (limit <= 0: any size); the error wraps
// [ErrNotRegular], [ErrTooLarge] or the error of os.Stat.
func CheckRegular(path string, limit int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	if limit > 0 && st.Size() > limit {
		return &fs.PathError{Op: "read", Path: path, Err: tooLarge(limit)}
	}
	return nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w: more than %s", ErrTooLarge, Size(limit))
}

// Size writes a byte count the way limits are documented: "64 MiB",
// "4 KiB" or "100 bytes".
func Size(n int64) string {
	switch {
	case n >= MiB && n%MiB == 0:
		return fmt.Sprintf("%d MiB", n/MiB)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile reads the regular file at path (see [Open]), at most limit
// bytes, without a leading byte order mark.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := ReadAll(f, limit)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return TrimBOM(data), nil
}

// ReadAll reads r to its end; past limit bytes it stops with an error
// wrapping [ErrTooLarge]. It allocates at most about limit bytes, however
// much r holds.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(limit)
	}
	return data, nil
}

// LimitReader returns a reader of r that fails with an error wrapping
// [ErrTooLarge] once more than limit bytes have been read.
func LimitReader(r io.Reader, limit int64) io.Reader {
	return &limited{r: r, left: limit, limit: limit}
}

type limited struct {
	r           io.Reader
	left, limit int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, tooLarge(l.limit)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - int(-l.left), tooLarge(l.limit)
	}
	return n, err
}

var bom = []byte("\ufeff")

// TrimBOM returns data without a leading UTF-8 byte order mark.
func TrimBOM(data []byte) []byte { return bytes.TrimPrefix(data, bom) }

// SkipBOM returns a reader of r without a leading UTF-8 byte order mark.
func SkipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	if b, err := br.Peek(len(bom)); err == nil && bytes.Equal(b, bom) {
		_, _ = br.Discard(len(bom))
	}
	return br
}

// File is an output file being written: a temporary file in the target's
// folder that [File.Commit] renames to the target. Not safe for concurrent
// use.
type File struct {
	*os.File
	target string
	done   bool
}

// Create starts writing the file path: the data goes to a new temporary
// file beside it, which Commit renames to path (replacing a file or a
// symbolic link of that name, never writing through the link) and Close
// without Commit removes. The folder must exist.
func Create(path string) (*File, error) {
	if path == "" {
		return nil, errors.New("safeio: empty output path")
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if base == "" || base == "." || base == ".." {
		return nil, &fs.PathError{Op: "create", Path: path, Err: errors.New("not a file name")}
	}
	if st, err := os.Lstat(path); err == nil && st.IsDir() {
		return nil, &fs.PathError{Op: "create", Path: path, Err: errors.New("is a directory")}
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &File{File: f, target: path}, nil
}

// Commit flushes the file to disk, gives it mode 0644 and renames it to
// its target.
func (f *File) Commit() error {
	if f.done {
		return errors.New("safeio: file already closed")
	}
	f.done = true
	tmp := f.Name()
	err := f.Sync()
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.target)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// Close abandons the file unless it was committed: the temporary file is
// removed and the target left as it was. It is safe to call after Commit
// (for a deferred Close).
func (f *File) Close() error {
	if f.done {
		return nil
	}
	f.done = true
	err := f.File.Close()
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	return err
}

// WriteFile writes path with what write writes, through [Create] and
// [File.Commit]: all of it or, on an error, nothing.
func WriteFile(path string, write func(w io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Commit()
}
