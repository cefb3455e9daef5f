// Package clitest runs a command's corpus of command lines in tests: each
// line gives the arguments, the exit status and text that standard error
// (or, for status 0, standard output) must contain.
package clitest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Command is a command's entry point: it runs with args and returns the
// exit status.
type Command func(args []string, stdout, stderr io.Writer) int

// Run runs every line of the corpus file: arguments split on spaces, a
// tab, the exit status, a tab, and the text the output must contain. Lines
// that are empty or start with # are skipped. In the arguments, {tmp} is a
// fresh temporary folder, {file} a small regular file in it and {fifo} a
// named pipe in it (the line is skipped where there are no named pipes). A failure must write exactly one line
// to standard error, and a usage error (status 2) nothing to standard
// output.
func Run(t *testing.T, corpus string, cmd Command) {
	t.Helper()
	f, err := os.Open(corpus)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			t.Fatalf("%s:%d: want args<TAB>status<TAB>text, got %q", corpus, n, line)
		}
		status, err := strconv.Atoi(parts[1])
		if err != nil {
			t.Fatalf("%s:%d: status %q", corpus, n, parts[1])
		}
		t.Run(strconv.Itoa(n)+" "+parts[0], func(t *testing.T) {
			tmp := t.TempDir()
			args := strings.Fields(parts[0])
			for i, a := range args {
				if strings.Contains(a, "{fifo}") {
					fifo := filepath.Join(tmp, "fifo")
					if _, err := os.Stat(fifo); err != nil {
						if err := mkfifo(fifo); err != nil {
							t.Skipf("no named pipe: %v", err)
						}
					}
					a = strings.ReplaceAll(a, "{fifo}", fifo)
				}
				if strings.Contains(a, "{file}") {
					file := filepath.Join(tmp, "file.txt")
					if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					a = strings.ReplaceAll(a, "{file}", file)
				}
				args[i] = strings.ReplaceAll(a, "{tmp}", tmp)
			}
			var stdout, stderr bytes.Buffer
			got := cmd(args, &stdout, &stderr)
			if got != status {
				t.Fatalf("exit status %d, want %d\nstdout: %s\nstderr: %s", got, status, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if status != 0 {
				out = stderr.String()
				if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
					t.Errorf("want one line on stderr, got %q", out)
				}
				if status == 2 && stdout.Len() > 0 {
					t.Errorf("a usage error wrote to stdout: %q", stdout.String())
				}
			}
			if !strings.Contains(out, parts[2]) {
				t.Errorf("output lacks %q:\n%s", parts[2], out)
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// RunExample runs the corpus of an example program, testdata/args.txt in
// its folder (examples/NAME), from the module root two folders up, where
// the corpus's paths are written: every bad flag is refused with exit
// status 2 and one line naming it.
func RunExample(t *testing.T, cmd Command) {
	t.Helper()
	corpus, err := filepath.Abs(filepath.Join("testdata", "args.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join("..", ".."))
	Run(t, corpus, cmd)
}
