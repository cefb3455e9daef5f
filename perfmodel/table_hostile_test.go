package perfmodel

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostileTables reads every table of testdata/hostile with
// ParseGavelJSON and ReadGavelJSON, which must agree, and checks the
// outcome against cases.txt.
func TestHostileTables(t *testing.T) {
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
		name, outcome, want := fields[0], fields[1], fields[2]
		listed[name] = true
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			tab, err := ParseGavelJSON(data)
			tab2, err2 := ReadGavelJSON(bytes.NewReader(data))
			if outcome == "ok" {
				require.NoError(t, err)
				require.NoError(t, err2)
				assert.Equal(t, want, tab.Jobs()[0].Model, "no byte order mark in the first key")
				assert.Equal(t, tab, tab2)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMalformedTable)
			assert.Contains(t, err.Error(), want)
			require.Error(t, err2)
			assert.Equal(t, err.Error(), err2.Error())
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

// Sizes taken from the input are capped before anything is allocated for
// them: an endless reader stops at 64 MiB, and a table whose dense pair
// matrix would be huge is refused.
func TestTableLimits(t *testing.T) {
	if !testing.Short() { // 64 MiB read twice
		_, err := ReadGavelJSON(endless{})
		assert.ErrorIs(t, err, ErrMalformedTable)
		assert.ErrorContains(t, err, "longer than 64 MiB")
		_, err = ParseGavelJSON(make([]byte, MaxTableBytes+1))
		assert.ErrorContains(t, err, "more than the 64 MiB allowed")
	}
	var b strings.Builder
	b.WriteString(`{"v100": {`)
	for i := range 2049 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"('M%d', 1)": {"null": 1}`, i)
	}
	b.WriteString(`}}`)
	_, err := ParseGavelJSON([]byte(b.String()))
	assert.ErrorContains(t, err, "2049 jobs, more than 2048")
	b.Reset()
	b.WriteString(`{"a": {}, "b": {}, "v100": {`)
	for i := range 1200 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"('M%d', 1)": {"null": 1}`, i)
	}
	b.WriteString(`}}`)
	_, err = ParseGavelJSON([]byte(b.String()))
	assert.ErrorContains(t, err, "3 GPU types of 1200 jobs: more than 4194304 pairs")
}
