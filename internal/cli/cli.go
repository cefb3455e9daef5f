// Package cli holds what gpusched's commands (examples/...) share: parsing
// flags into one-line errors, checking every flag's value against its
// accepted range, opening input files safely and formatting numbers that
// may be undefined. Every command runs through [Main], so they all exit
// the same way: status 0 on success, 1 when the work fails, 2 for a bad
// command line, with the error on one line of standard error.
//
// The functions are safe for concurrent use; a [Checks] is not.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpusched/gpusched/internal/safeio"
)

// UsageError is a bad command line: a flag with a value outside its
// accepted range, an unknown flag or name, a stray argument. [Main] exits
// with status 2 on it. It is plain data, safe to share.
type UsageError struct {
	// Flag is the flag's name without the dash; empty when the problem is
	// not one flag's.
	Flag string
	// Value is the value given.
	Value string
	// Want says what the flag accepts.
	Want string
}

func (e *UsageError) Error() string {
	if e.Flag == "" {
		return e.Want
	}
	return fmt.Sprintf("-%s %s: want %s", e.Flag, e.Value, e.Want)
}

// Usage returns a [*UsageError] for flag with value; want is formatted
// with args.
func Usage(flag, value, want string, args ...any) error {
	return &UsageError{Flag: flag, Value: value, Want: fmt.Sprintf(want, args...)}
}

// Main parses args into fs and calls run with a context that an interrupt
// (Ctrl-C) cancels. It returns the exit status: 0 on success or after -h
// (the flags' help on stderr); 2 for a parse error, a stray argument or a
// [*UsageError] from run; 1 for any other error. An error is written to
// stderr on one line, after fs's name.
func Main(fs *flag.FlagSet, args []string, stderr io.Writer, run func(ctx context.Context) error) int {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		_, _ = fmt.Fprintf(stderr, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		return 0
	case err != nil:
		return fail(stderr, fs.Name(), &UsageError{Want: err.Error()})
	case fs.NArg() > 0:
		return fail(stderr, fs.Name(), &UsageError{Want: fmt.Sprintf("unexpected argument %q (every setting is a flag; -h lists them)", fs.Arg(0))})
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		return fail(stderr, fs.Name(), err)
	}
	return 0
}

// fail writes err on one line and returns its exit status.
func fail(stderr io.Writer, name string, err error) int {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	_, _ = fmt.Fprintf(stderr, "%s: %s\n", name, msg)
	var ue *UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// Checks checks flag values and keeps the first problem. Not safe for
// concurrent use.
type Checks struct {
	err error
}

// Err returns the first problem found, a [*UsageError], or nil.
func (c *Checks) Err() error { return c.err }

// Fail records a problem with flag unless one is recorded already.
func (c *Checks) Fail(flag, value, want string, args ...any) {
	if c.err == nil {
		c.err = Usage(flag, value, want, args...)
	}
}

// Float checks that v is a finite number from lo to hi.
func (c *Checks) Float(flag string, v, lo, hi float64) {
	if !(v >= lo && v <= hi) {
		c.Fail(flag, num(v), "a number from %s to %s", num(lo), num(hi))
	}
}

// Positive checks that v is a finite number above 0 and at most hi.
func (c *Checks) Positive(flag string, v, hi float64) {
	if !(v > 0 && v <= hi) {
		c.Fail(flag, num(v), "a number above 0 and at most %s", num(hi))
	}
}

// ZeroOr checks that v is 0 (the flag's default meaning) or a finite
// number from lo to hi.
func (c *Checks) ZeroOr(flag string, v, lo, hi float64, zero string) {
	if v != 0 && !(v >= lo && v <= hi) {
		c.Fail(flag, num(v), "0 (%s) or a number from %s to %s", zero, num(lo), num(hi))
	}
}

// Int checks that v is an integer from lo to hi.
func (c *Checks) Int(flag string, v, lo, hi int) {
	if v < lo || v > hi {
		c.Fail(flag, strconv.Itoa(v), "an integer from %d to %d", lo, hi)
	}
}

// OneOf checks that v is one of names.
func (c *Checks) OneOf(flag, v string, names ...string) {
	if !slices.Contains(names, v) {
		c.Fail(flag, strconv.Quote(v), "one of %s", strings.Join(names, ", "))
	}
}

// List splits a comma-separated list and checks that every item is one of
// names, once; an empty list is refused unless empty is true. It returns
// the items in the order given.
func (c *Checks) List(flag, v string, empty bool, names ...string) []string {
	var out []string
	if strings.TrimSpace(v) != "" {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			switch {
			case !slices.Contains(names, item):
				c.Fail(flag, strconv.Quote(v), "a comma-separated list of %s (%q is not one)", strings.Join(names, ", "), item)
				return nil
			case slices.Contains(out, item):
				c.Fail(flag, strconv.Quote(v), "each name once (%q is there twice)", item)
				return nil
			}
			out = append(out, item)
		}
	}
	if len(out) == 0 && !empty {
		c.Fail(flag, strconv.Quote(v), "a comma-separated list of one or more of %s", strings.Join(names, ", "))
	}
	return out
}

// InputFile checks that path names a regular file of at most limit bytes
// (a directory, a device such as /dev/zero or a named pipe is refused
// without being opened). Read it with [ReadFile].
func (c *Checks) InputFile(flag, path string, limit int64) {
	if path == "" {
		c.Fail(flag, `""`, "a file")
		return
	}
	if err := safeio.CheckRegular(path, limit); err != nil {
		c.Fail(flag, path, "a regular file of at most %s (%s)", safeio.Size(limit), reason(err))
	}
}

// OutputDir checks that path, if it exists, is a folder.
func (c *Checks) OutputDir(flag, path string) {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		c.Fail(flag, path, "a folder (this is a file)")
	}
}

// OutputFile checks that path is not a folder and that its folder exists.
func (c *Checks) OutputFile(flag, path string) {
	if path == "" {
		c.Fail(flag, `""`, "a file name")
		return
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		c.Fail(flag, path, "a file name (this is a folder)")
		return
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		c.Fail(flag, path, "a file in an existing folder")
	}
}

// reason says in a few words why a path was refused.
func reason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ReadFile reads a file checked by [Checks.InputFile]: a regular file of
// at most limit bytes, without a byte order mark, never blocking on a
// named pipe.
func ReadFile(path string, limit int64) ([]byte, error) { return safeio.ReadFile(path, limit) }

// Read streams a file checked by [Checks.InputFile] (a regular file, never
// blocking on a named pipe) to read, at most limit bytes of it (beyond,
// reads fail with an error wrapping safeio.ErrTooLarge), and closes it.
// Unlike ReadFile it never holds the file in memory: a trace of 500 MB
// (or of NUL bytes, refused at its first long line) costs the reader's
// buffers, not the file's size.
func Read[T any](path string, limit int64, read func(r io.Reader, name string) (T, error)) (T, error) {
	f, err := safeio.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer func() { _ = f.Close() }()
	return read(safeio.LimitReader(f, limit), path)
}

// Create starts writing the output file path through a temporary file in
// its folder: Commit renames it into place (replacing a file or symbolic
// link of that name, never writing through the link), Close without Commit
// removes it.
func Create(path string) (*safeio.File, error) { return safeio.Create(path) }

// WriteFile writes the file path with what write writes, through a
// temporary file in its folder renamed into place: all of it or, on an
// error, nothing; a symbolic link planted at path is replaced, not
// followed.
func WriteFile(path string, write func(w io.Writer) error) error {
	return safeio.WriteFile(path, write)
}

// num writes a flag value: the shortest form that reads back.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Percent formats a share as a percentage with no decimals, or "-" when
// it is not a finite number (a share of nothing).
func Percent(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(100*v, 'f', 0, 64) + "%"
}

// Fixed formats v with prec decimals, or "-" when it is not a finite
// number.
func Fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// Ratio formats a / b with prec decimals and an "x", or "-" when it is not
// a finite number (b is 0).
func Ratio(a, b float64, prec int) string {
	s := Fixed(a/b, prec)
	if s == "-" {
		return s
	}
	return s + "x"
}
