package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The flags' defaults (the wait rule on at the break-even, an hour
// assumed) and every
// refused value, with the flag named in the message.
func TestParse(t *testing.T) {
	o, err := parse([]string{"--leader-elect=false"})
	require.NoError(t, err)
	assert.Equal(t, "max-min-fairness", o.policy)
	assert.Equal(t, 1.0, o.patience)
	assert.Equal(t, time.Hour, o.jobDuration)
	o, err = parse([]string{"--leader-elect=false", "--patience", "0", "--job-duration", "20m"})
	require.NoError(t, err)
	assert.Zero(t, o.patience)
	assert.Equal(t, 20*time.Minute, o.jobDuration)
	t.Setenv("POD_NAMESPACE", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--patience", "-1"}, "--patience"},
		{[]string{"--patience", "NaN"}, "--patience"},
		{[]string{"--patience", "101"}, "--patience"},
		{[]string{"--job-duration", "0s"}, "--job-duration"},
		{[]string{"--job-duration", "9000h"}, "--job-duration"},
		{[]string{"--max-ratio", "0.5"}, "--max-ratio"},
		{[]string{"--min-interval", "0s"}, "--min-interval"},
		{[]string{"--policy", "best"}, "--policy"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--leader-elect=true"}, "--lease-namespace"},
	} {
		_, err := parse(append([]string{"--leader-elect=false"}, c.args...))
		if assert.Error(t, err, "%q", c.args) {
			assert.Contains(t, err.Error(), c.want, "%q", c.args)
		}
	}
}
