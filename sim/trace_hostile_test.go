package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gpusched/gpusched/perfmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAny reads a file of testdata/hostile with the loader its name
// starts with, and returns how many rows it read.
func readAny(kind string, r io.Reader, name string) (int, error) {
	switch kind {
	case "samples":
		v, err := ReadSamples(r, name)
		return len(v), err
	case "usage":
		u, err := ReadUsage(r, name)
		if err != nil {
			return 0, err
		}
		return len(u.Times), nil
	}
	load, ok := loaders[kind]
	if !ok {
		return 0, fmt.Errorf("no loader %q", kind)
	}
	jobs, err := load(r, name)
	if err == nil {
		for _, j := range jobs {
			if strings.Contains(j.Name+j.Key.Model, "\ufeff") {
				return 0, fmt.Errorf("a byte order mark in job %+v", j)
			}
		}
	} else if jobs != nil {
		return 0, fmt.Errorf("jobs returned with an error: %w", err)
	}
	return len(jobs), err
}

// TestHostileTraces reads every file of testdata/hostile with its loader
// and checks the outcome against cases.txt.
func TestHostileTraces(t *testing.T) {
	dir := filepath.Join("testdata", "hostile")
	f, err := os.Open(filepath.Join(dir, "cases.txt"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	listed := map[string]bool{"cases.txt": true}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, want, ok := strings.Cut(line, "\t")
		require.True(t, ok, "cases.txt: %q", line)
		listed[name] = true
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			kind, _, _ := strings.Cut(name, "-")
			n, err := readAny(kind, bytes.NewReader(data), name)
			if rows, ok := strings.CutPrefix(want, "ok "); ok {
				require.NoError(t, err)
				assert.Equal(t, rows, strconv.Itoa(n))
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMalformedTrace)
			assert.Contains(t, err.Error(), want)
		})
	}
	require.NoError(t, sc.Err())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, listed[e.Name()], "%s is not in cases.txt", e.Name())
	}
}

// repeat is a reader of head followed by body repeated n times (n < 0:
// for ever).
type repeat struct {
	head, body []byte
	n          int
	pos        int
}

func (r *repeat) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) {
		if len(r.head) > 0 {
			c := copy(p[k:], r.head)
			r.head, k = r.head[c:], k+c
			continue
		}
		if r.n == 0 {
			if k == 0 {
				return 0, io.EOF
			}
			break
		}
		c := copy(p[k:], r.body[r.pos:])
		k += c
		if r.pos += c; r.pos == len(r.body) {
			r.pos = 0
			if r.n > 0 {
				r.n--
			}
		}
	}
	return k, nil
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 50 MB field (485 MB of allocations before the limits) stops at the
// line limit, having read about 1 MiB.
func TestTraceLineLimits(t *testing.T) {
	for _, tc := range []struct {
		name, quote, body, want string
	}{
		{"quoted field", `"`, strings.Repeat("x", 1000) + "\n", "f.csv:2: malformed trace: a line longer than 1 MiB"},
		{"plain field", "", strings.Repeat("x", 1000), "f.csv:2: malformed trace: a line longer than 1 MiB"},
	} {
		var err error
		bytes := allocated(func() {
			_, err = ReadITP(&repeat{head: []byte(itpSample[:40] + tc.quote), body: []byte(tc.body), n: 50_000}, "f.csv")
		})
		assert.ErrorContains(t, err, tc.want, tc.name)
		assert.Less(t, bytes, uint64(16<<20), "%s: %d bytes allocated", tc.name, bytes)
	}
	_, err := ReadITP(strings.NewReader(itpSample[:40]+strings.Repeat("x", 5000)+",0,1,1\n"), "f.csv")
	assert.ErrorContains(t, err, "f.csv:2: malformed trace: field 1 (column 1) is longer than 4 KiB")
	_, err = ReadGavelTrace(&repeat{body: []byte("x"), n: -1}, "t.trace")
	assert.ErrorContains(t, err, "t.trace:1: malformed trace: a line longer than 1 MiB")
	_, err = ReadSamples(&repeat{body: []byte("7"), n: -1}, "s.csv")
	assert.ErrorContains(t, err, "s.csv:1: malformed trace: a line longer than 1 MiB")
}

// A trace of more than the rows or bytes allowed stops there (with the
// limits lowered: the defaults are 4,194,304 rows and 512 MiB).
func TestTraceSizeLimits(t *testing.T) {
	small := limits{bytes: 1 << 20, rows: 1000}
	noop := func(*row) {}
	err := csvRowsWithin(small, &repeat{head: []byte(itpSample[:40]), body: []byte("x,0,1,1\n"), n: -1}, "f.csv", nil, noop)
	assert.ErrorContains(t, err, "f.csv:1002: malformed trace: more than 1000 rows")
	err = linesWithin(small, &repeat{body: []byte("1\n"), n: -1}, "s.csv", func(int, string) error { return nil })
	assert.ErrorContains(t, err, "s.csv:1001: malformed trace: more than 1000 rows")
	small.rows = 1 << 30
	long := "p," + strings.Repeat("1", 4000) + ",1,0,0,,LS,Running,0,10,0\n"
	err = csvRowsWithin(small, &repeat{head: []byte(alibabaSample), body: []byte(long), n: -1}, "a.csv", nil, noop)
	assert.ErrorContains(t, err, "malformed trace: more than 1 MiB of trace")
	err = linesWithin(small, &repeat{body: []byte("1\n"), n: -1}, "s.csv", func(int, string) error { return nil })
	assert.ErrorContains(t, err, "malformed trace: more than 1 MiB of trace")
	assert.Equal(t, limits{bytes: 512 << 20, rows: 1 << 22}, defaultLimits)
}

// AssignModels refuses a duration that would need more steps than a
// float64 counts exactly, rather than turning it into +Inf.
func TestAssignModelsHugeDuration(t *testing.T) {
	jobs := []Job{{ID: 0, Duration: 1e10, Key: perfmodel.JobKey{ScaleFactor: 16}, Weight: 1}}
	require.NoError(t, (&AssignModels{}).Apply(jobs))
	assert.Less(t, jobs[0].Steps, 1e15)
	jobs = []Job{{ID: 0, Duration: 1e300, Key: perfmodel.JobKey{ScaleFactor: 16}, Weight: 1}}
	assert.ErrorContains(t, (&AssignModels{}).Apply(jobs), "more than 1e+15")
}

// A Pollux profile whose files are not regular, or whose numbers are out
// of range, is refused with the file and line.
func TestHostilePolluxProfiles(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "pollux", "app-profiles", "ncf", "scalability.csv"))
	require.NoError(t, err)
	placements := "placement,local_bsz,step_time,sync_time\n"
	validation := "progress,iteration,metric,grad_sqr,grad_var\n" + strings.Repeat("1,1,1,1,1\n", 10)
	for _, tc := range []struct {
		name       string
		placements string
		want       string
	}{
		{"NaN step time", placements + "1,4,NaN,0.01\n", `p/ncf/placements.csv:2: malformed trace: step_time "NaN" (want seconds from 0 to 1e+06)`},
		{"micro-batch described as such", placements + "1,0.5,1,0.01\n", `local_bsz "0.5" (want a micro-batch size from 1 to 1.073741824e+09)`},
		{"long placement", placements + strings.Repeat("1", 65) + ",4,1,0.01\n", "placement of 65 nodes (want at most 64)"},
		{"sync above step", placements + "1,4,1,2\n", "step time 1 s not above sync time 2 s"},
	} {
		fsys := fstest.MapFS{
			"p/ncf/placements.csv":    {Data: []byte(tc.placements)},
			"p/ncf/scalability.csv":   {Data: good},
			"p/ncf/validation-32.csv": {Data: []byte(validation)},
		}
		_, err := LoadPolluxApp(fsys, "p", "ncf")
		assert.ErrorIs(t, err, ErrMalformedTrace, tc.name)
		assert.ErrorContains(t, err, tc.want, tc.name)
	}
	fsys := fstest.MapFS{
		"p/ncf/placements.csv":    {Data: []byte(placements + "1,4,1,0.5\n")},
		"p/ncf/scalability.csv":   {Data: good},
		"p/ncf/validation-32.csv": {Data: []byte("progress,iteration,metric,grad_sqr,grad_var\n1,1,1,1e300,1\n")},
	}
	_, err = LoadPolluxApp(fsys, "p", "ncf")
	assert.ErrorContains(t, err, `p/ncf/validation-32.csv:2: malformed trace: grad_sqr "1e300" (want a squared gradient norm from 0 to 1e+30)`)
	fsys["p/ncf/placements.csv"] = &fstest.MapFile{Mode: os.ModeNamedPipe}
	_, err = LoadPolluxApp(fsys, "p", "ncf")
	assert.ErrorContains(t, err, "p/ncf/placements.csv:0: malformed trace: not a regular file")
}

// The generator refuses sizes and rates that would exhaust memory or put
// arrivals at absurd times.
func TestGenerateLimits(t *testing.T) {
	for _, w := range []struct {
		n    int
		rate float64
		want string
	}{
		{2_000_000_000, 1, "2000000000 jobs (want 0 to 4194304)"},
		{-1, 1, "-1 jobs"},
		{10, 1e-300, "1e-300 jobs/h (want 0, or from 0.001 to 1e+06)"},
		{10, 1e300, "jobs/h"},
	} {
		_, err := (&GavelWorkload{Rate: w.rate}).Generate(w.n)
		assert.ErrorContains(t, err, w.want)
	}
}
