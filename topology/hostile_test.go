package topology

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var kinds = map[string]error{
	"malformed": ErrMalformedSpec, "count": ErrInvalidCount, "duplicate": ErrDuplicateID,
	"asymmetric": ErrAsymmetricLinks, "linkclass": ErrUnknownLinkClass, "gputype": ErrInvalidGPUType,
}

// TestHostileSpecs reads every spec of testdata/hostile through ParseJSON,
// ReadJSON and Static, which must agree, and checks the error against
// cases.txt.
func TestHostileSpecs(t *testing.T) {
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
		fields := strings.SplitN(line, "\t", 3)
		require.Len(t, fields, 3, "cases.txt: %q", line)
		name, kind, want := fields[0], fields[1], fields[2]
		listed[name] = true
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			c, err := ParseJSON(data)
			c2, err2 := ReadJSON(bytes.NewReader(data))
			c3, err3 := Static{Path: path}.Discover(context.Background())
			if kind == "ok" {
				require.NoError(t, err)
				require.NoError(t, err2)
				require.NoError(t, err3)
				assert.Equal(t, want, c.Servers[0].ID)
				assert.Equal(t, c, c2)
				assert.Equal(t, c, c3)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, kinds[kind], "%v", err)
			assert.Contains(t, err.Error(), want)
			assert.True(t, strings.HasPrefix(err.Error(), "topology: "), "%v", err)
			require.Error(t, err2)
			require.Error(t, err3)
			assert.Equal(t, err.Error(), err2.Error())
			assert.Equal(t, err.Error(), err3.Error())
		})
	}
	require.NoError(t, sc.Err())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.True(t, listed[e.Name()], "%s is not in cases.txt", e.Name())
	}
}

// endless is a reader of spaces that never ends.
type endless struct{}

var spaces = bytes.Repeat([]byte{' '}, 1<<16)

func (endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], spaces)
	}
	return n, nil
}

func TestSpecSizeLimits(t *testing.T) {
	_, err := Static{Path: t.TempDir()}.Discover(context.Background())
	assert.ErrorIs(t, err, ErrMalformedSpec)
	assert.ErrorContains(t, err, "not a regular file (a directory)")
	_, err = Static{Path: filepath.Join(t.TempDir(), "none.json")}.Discover(context.Background())
	assert.ErrorIs(t, err, os.ErrNotExist)
	if testing.Short() {
		return // the rest reads 64 MiB three times
	}
	_, err = ReadJSON(endless{})
	assert.ErrorIs(t, err, ErrMalformedSpec)
	assert.ErrorContains(t, err, "longer than 64 MiB")
	_, err = ParseJSON(make([]byte, MaxSpecBytes+1))
	assert.ErrorContains(t, err, "more than the 64 MiB allowed")
	big := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxSpecBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())
	_, err = Static{Path: big}.Discover(context.Background())
	assert.ErrorIs(t, err, ErrMalformedSpec)
	assert.ErrorContains(t, err, "more than 64 MiB")
}

// The 59-byte spec of a full-size cluster (1,024 servers of 1,024 GPUs)
// builds and validates; one more server is refused. Its cost is in
// BenchmarkParseJSON/gpus=1048576 (quadratic per server before: 22 s).
func TestLargestSpec(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a cluster of 1,048,576 GPUs")
	}
	c, err := ParseJSON([]byte(largestSpec))
	require.NoError(t, err)
	assert.Equal(t, 1<<20, c.NumGPUs())
	assert.Equal(t, 1024, len(c.Servers))
	// Every copy shares the link matrix, which Validate checks once; a
	// copy changed on its own is checked again.
	c.Servers[7].Links = append([][]Link(nil), c.Servers[7].Links...)
	c.Servers[7].Links[3] = append([]Link(nil), c.Servers[7].Links[3]...)
	c.Servers[7].Links[3][5] = Link{Class: LinkNVLink, NVLinks: 1}
	err = c.Validate()
	assert.ErrorIs(t, err, ErrAsymmetricLinks)
	assert.ErrorContains(t, err, `servers[7] "server-0-7": links[3][5]`)
}

const largestSpec = `{"servers":[{"gpu_type":"v100","gpus":1024,"count":1024}]}`

func TestCompactLimits(t *testing.T) {
	_, err := ParseCompact(strings.Repeat("v100:1,", 100)+"k80:1", 1)
	assert.ErrorIs(t, err, ErrMalformedSpec)
	assert.ErrorContains(t, err, "at most 64 GPU types")
	_, err = ParseCompact("v100:"+strings.Repeat("1", 5000), 1)
	assert.ErrorContains(t, err, "longer than 4096")
	_, err = ParseCompact("v100:9223372036854775807:1", 1)
	assert.ErrorIs(t, err, ErrInvalidCount)
	_, err = ParseCompact("v100:99999999999999999999", 1)
	assert.ErrorIs(t, err, ErrMalformedSpec)
	_, err = ParseCompact("v100:2048:2048", 1)
	assert.ErrorContains(t, err, "more than 1024 GPUs in one server")
	_, err = ParseCompact("v100:1048576,k80:1", 1)
	assert.ErrorContains(t, err, "more than 1048576 GPUs")
	_, err = ParseCompact("\ufeffv100:1", 1)
	assert.ErrorIs(t, err, ErrInvalidGPUType)
}
