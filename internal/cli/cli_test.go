package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gpusched/gpusched/internal/safeio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChecks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.csv")
	require.NoError(t, os.WriteFile(file, []byte("x\n"), 0o644))
	tests := []struct {
		check func(*Checks)
		want  string
	}{
		{func(c *Checks) { c.Float("load", math.NaN(), 0.05, 4) }, "-load NaN: want a number from 0.05 to 4"},
		{func(c *Checks) { c.Float("load", 1e-300, 0.05, 4) }, "-load 1e-300: want a number from 0.05 to 4"},
		{func(c *Checks) { c.Float("max", math.Inf(1), 1, 64) }, "-max +Inf: want a number from 1 to 64"},
		{func(c *Checks) { c.Positive("days", 0, 3650) }, "-days 0: want a number above 0 and at most 3650"},
		{func(c *Checks) { c.ZeroOr("alpha", -5, 0.01, 10, "the default") }, "-alpha -5: want 0 (the default) or a number from 0.01 to 10"},
		{func(c *Checks) { c.Int("jobs", 2000000000, 1, 1000000) }, "-jobs 2000000000: want an integer from 1 to 1000000"},
		{func(c *Checks) { c.OneOf("faffp", "bogus", "least-loaded", "packed") }, `-faffp "bogus": want one of least-loaded, packed`},
		{func(c *Checks) { c.List("figs", "4,99", false, "4", "5") }, `-figs "4,99": want a comma-separated list of 4, 5 ("99" is not one)`},
		{func(c *Checks) { c.List("figs", "4,,5", false, "4", "5") }, `("" is not one)`},
		{func(c *Checks) { c.List("figs", "4,4", false, "4", "5") }, `-figs "4,4": want each name once ("4" is there twice)`},
		{func(c *Checks) { c.List("figs", " ", false, "4", "5") }, `want a comma-separated list of one or more of 4, 5`},
		{func(c *Checks) { c.InputFile("trace", "/dev/zero", 100) }, "-trace /dev/zero: want a regular file of at most 100 bytes (not a regular file (a character device))"},
		{func(c *Checks) { c.InputFile("trace", dir, 100) }, "(not a regular file (a directory))"},
		{func(c *Checks) { c.InputFile("trace", file, 1) }, "want a regular file of at most 1 bytes (input too large: more than 1 bytes)"},
		{func(c *Checks) { c.InputFile("trace", filepath.Join(dir, "none"), 1) }, "no such file or directory"},
		{func(c *Checks) { c.InputFile("trace", "", 1) }, `-trace "": want a file`},
		{func(c *Checks) { c.OutputDir("out", file) }, "want a folder (this is a file)"},
		{func(c *Checks) { c.OutputFile("cpuprofile", dir) }, "want a file name (this is a folder)"},
		{func(c *Checks) { c.OutputFile("cpuprofile", filepath.Join(dir, "no", "x.prof")) }, "want a file in an existing folder"},
	}
	for _, tc := range tests {
		var c Checks
		tc.check(&c)
		var ue *UsageError
		require.ErrorAs(t, c.Err(), &ue, tc.want)
		assert.Contains(t, c.Err().Error(), tc.want)
	}
	var c Checks
	c.Float("a", 1, 0, 1)
	c.Positive("b", 1, 1)
	c.ZeroOr("c", 0, 1, 2, "default")
	c.Int("d", 5, 5, 5)
	c.OneOf("e", "x", "x")
	assert.Equal(t, []string{"5", "4"}, c.List("f", " 5, 4", false, "4", "5"))
	assert.Empty(t, c.List("g", "", true, "4"))
	c.InputFile("h", file, 100)
	c.OutputDir("i", dir)
	c.OutputDir("j", filepath.Join(dir, "new"))
	c.OutputFile("k", filepath.Join(dir, "x.prof"))
	c.OutputFile("k", "x.prof")
	assert.NoError(t, c.Err())
	c.Int("first", 0, 1, 2)
	c.Int("second", 0, 1, 2)
	assert.ErrorContains(t, c.Err(), "-first", "the first problem is kept")
}

func TestMainStatus(t *testing.T) {
	run := func(args []string, f func(context.Context) error) (int, string) {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.Int("n", 1, "a number")
		var stderr bytes.Buffer
		code := Main(fs, args, &stderr, f)
		return code, stderr.String()
	}
	ok := func(context.Context) error { return nil }
	code, out := run(nil, ok)
	assert.Equal(t, 0, code)
	assert.Empty(t, out)
	code, out = run([]string{"-h"}, ok)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "-n int")
	code, out = run([]string{"-n", "x"}, ok)
	assert.Equal(t, 2, code)
	assert.Equal(t, "cmd: invalid value \"x\" for flag -n: parse error\n", out)
	code, out = run([]string{"-nope"}, ok)
	assert.Equal(t, 2, code)
	assert.Equal(t, "cmd: flag provided but not defined: -nope\n", out)
	code, out = run([]string{"stray"}, ok)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, `unexpected argument "stray"`)
	code, out = run(nil, func(context.Context) error { return Usage("n", "0", "an integer from 1 to 2") })
	assert.Equal(t, 2, code)
	assert.Equal(t, "cmd: -n 0: want an integer from 1 to 2\n", out)
	code, out = run(nil, func(context.Context) error { return errors.Join(errors.New("one"), errors.New("two")) })
	assert.Equal(t, 1, code)
	assert.Equal(t, "cmd: one; two\n", out)
}

func TestFormat(t *testing.T) {
	assert.Equal(t, "-", Percent(math.NaN()))
	assert.Equal(t, "-", Percent(math.Inf(1)))
	assert.Equal(t, "68%", Percent(0.684))
	assert.Equal(t, "-", Fixed(math.NaN(), 2))
	assert.Equal(t, "1.50", Fixed(1.5, 2))
	assert.Equal(t, "-", Ratio(1, 0, 2))
	assert.Equal(t, "-", Ratio(0, 0, 2))
	assert.Equal(t, "2.00x", Ratio(4, 2, 2))
}

// Read streams the file: 32 MiB of NUL bytes cost a few KiB (ReadFile,
// which the examples used, held the file whole: 500 MB of NUL bytes cost
// 1.25 GB before the trace reader's line limit), reads stop at the limit,
// and only regular files open.
func TestReadStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nul.trace")
	require.NoError(t, os.WriteFile(path, make([]byte, 32<<20), 0o644))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := Read(path, 64<<20, func(r io.Reader, name string) (int64, error) {
		assert.Equal(t, path, name)
		return io.Copy(io.Discard, r)
	})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, int64(32<<20), n)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated")

	_, err = Read(path, 1<<20, func(r io.Reader, _ string) (int64, error) { return io.Copy(io.Discard, r) })
	assert.ErrorIs(t, err, safeio.ErrTooLarge)
	_, err = Read("/dev/zero", 1<<20, func(r io.Reader, _ string) (int64, error) { return io.Copy(io.Discard, r) })
	assert.ErrorIs(t, err, safeio.ErrNotRegular)
}
