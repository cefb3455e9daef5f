package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two seeds of the paper's Fig. 4 setup: every scheduler finishes, and
// SJF-BCO beats Random by a wide margin in makespan.
func TestCompare(t *testing.T) {
	c := config{seeds: 2}
	mk, jct, wins, err := c.compare(20, 1200, nil, 0, true)
	require.NoError(t, err)
	for _, n := range names {
		require.Len(t, mk[n].xs, 2, n)
		assert.Positive(t, jct[n].mean(), n)
	}
	assert.Less(t, mk["SJF-BCO"].mean(), 0.8*mk["RAND"].mean())
	assert.LessOrEqual(t, wins, 2)
	// kappa fixed, no baselines.
	mk, _, _, err = c.compare(10, 1500, []int{1}, 2, false)
	require.NoError(t, err)
	assert.Len(t, mk["SJF-BCO"].xs, 2)
	assert.Empty(t, mk["LS"].xs)
}
