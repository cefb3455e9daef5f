package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	o, err := parse([]string{"--policy", "hierarchical", "--round", "2m", "--no-preemption", "--tenant-label", "gpusched.io/queue"})
	require.NoError(t, err)
	assert.Equal(t, "hierarchical", o.policy)
	assert.Equal(t, 2*time.Minute, o.round)
	assert.True(t, o.noPreemption)
	assert.True(t, o.leaderElect)
	for _, bad := range [][]string{{"--round", "0s"}, {"--grace", "-1s"}, {"extra"}, {"--nope"}, {"--policy", "best"}} {
		_, err := parse(bad)
		assert.Error(t, err, "%q", bad)
	}
	sel, err := selector("pool=gpu, zone=a")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"pool": "gpu", "zone": "a"}, sel)
	_, err = selector("pool")
	assert.Error(t, err)
}
