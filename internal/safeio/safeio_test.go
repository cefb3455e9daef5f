package safeio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.csv")
	require.NoError(t, os.WriteFile(p, []byte("\ufeffx,y\n1,2\n"), 0o644))
	data, err := ReadFile(p, 100)
	require.NoError(t, err)
	assert.Equal(t, "x,y\n1,2\n", string(data), "the byte order mark is dropped")
	_, err = ReadFile(p, 5)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorContains(t, err, "more than 5 bytes")
	_, err = ReadFile(dir, 100)
	assert.ErrorIs(t, err, ErrNotRegular)
	assert.ErrorContains(t, err, "a directory")
	_, err = ReadFile(filepath.Join(dir, "missing"), 100)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.ErrorIs(t, CheckRegular(p, 5), ErrTooLarge)
	assert.NoError(t, CheckRegular(p, 0))
	assert.ErrorIs(t, CheckRegular(dir, 0), ErrNotRegular)
}

type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }

func TestLimits(t *testing.T) {
	_, err := ReadAll(endless{}, 1000)
	assert.ErrorIs(t, err, ErrTooLarge)
	data, err := ReadAll(strings.NewReader("abc"), 3)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(data))
	for _, n := range []int64{0, 1, 7, 4096} {
		got, err := io.ReadAll(LimitReader(endless{}, n))
		assert.ErrorIs(t, err, ErrTooLarge, "limit %d", n)
		assert.Len(t, got, int(n))
		got, err = io.ReadAll(LimitReader(bytes.NewReader(make([]byte, n)), n))
		assert.NoError(t, err)
		assert.Len(t, got, int(n))
	}
	assert.Equal(t, "64 MiB", Size(64<<20))
	assert.Equal(t, "4 KiB", Size(4096))
	assert.Equal(t, "1000 bytes", Size(1000))
}

func TestSkipBOM(t *testing.T) {
	for in, want := range map[string]string{"\ufeffa": "a", "a\ufeff": "a\ufeff", "": "", "\ufeff": "", "\xef\xbb": "\xef\xbb"} {
		got, err := io.ReadAll(SkipBOM(strings.NewReader(in)))
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "%q", in)
		assert.Equal(t, want, string(TrimBOM([]byte(in))), "%q", in)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.svg")
	require.NoError(t, WriteFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "one"); return err }))
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "one", string(got))
	// A failed write leaves the old file and no temporary file.
	boom := errors.New("boom")
	assert.ErrorIs(t, WriteFile(p, func(w io.Writer) error { _, _ = io.WriteString(w, "half"); return boom }), boom)
	got, err = os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "one", string(got))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	// A directory is not overwritten.
	assert.Error(t, WriteFile(dir, func(io.Writer) error { return nil }))
	_, err = Create("")
	assert.Error(t, err)
}

// A symbolic link planted at the output name is replaced by the new file;
// the file it pointed to is not written.
func TestWriteFileReplacesSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges")
	}
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("precious"), 0o600))
	link := filepath.Join(dir, "plot.svg")
	require.NoError(t, os.Symlink(victim, link))
	require.NoError(t, WriteFile(link, func(w io.Writer) error { _, err := io.WriteString(w, "plot"); return err }))
	got, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(got))
	st, err := os.Lstat(link)
	require.NoError(t, err)
	assert.True(t, st.Mode().IsRegular())
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())
}

func TestFileCloseAfterCommit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x")
	f, err := Create(p)
	require.NoError(t, err)
	_, err = f.WriteString("x")
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	assert.NoError(t, f.Close())
	assert.Error(t, f.Commit())
	_, err = os.Stat(p)
	assert.NoError(t, err)
}
