package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpusched/gpusched/allocation"
	"github.com/gpusched/gpusched/topology"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run on another type than the last run's is a move: runs on types 0,
// 0, 1, 1, 0 are five rounds and two moves.
func TestTypeMovesCounted(t *testing.T) {
	rec := &Record{}
	rj := &running{rec: rec, lastType: -1}
	for _, k := range []int{0, 0, 1, 1, 0} {
		rj.ranOn(k)
	}
	assert.Equal(t, 5, rec.Rounds)
	assert.Equal(t, 2, rec.TypeMoves)
}

// On one type nothing moves; on three, Gavel's max-min fairness moves
// jobs between types (it time-shares every type among the jobs), at most
// once a round after the first, and Summary.TypeMoves is the mean.
func TestTypeMovesInARun(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 3, Seed: 1}).Generate(60)
	require.NoError(t, err)
	run := func(types []topology.GPUType, capacity []int) *Result {
		res, err := Run(context.Background(), Config{Types: types, Capacity: capacity, Policy: &allocation.MaxMinFairness{}}, jobs)
		require.NoError(t, err)
		return res
	}
	one := run([]topology.GPUType{topology.V100}, []int{8})
	for _, r := range one.Records {
		assert.Zero(t, r.TypeMoves, "job %d", r.ID)
	}
	assert.Zero(t, one.Summarise(0, 0).TypeMoves)
	three := run([]topology.GPUType{topology.V100, topology.P100, topology.K80}, []int{4, 4, 4})
	total := 0
	for _, r := range three.Records {
		assert.LessOrEqual(t, r.TypeMoves, max(r.Rounds-1, 0), "job %d", r.ID)
		total += r.TypeMoves
	}
	assert.Positive(t, total, "jobs move between types")
	assert.InDelta(t, float64(total)/float64(len(three.Records)), three.Summarise(0, 0).TypeMoves, 1e-12)
}

// brokenPolicy fails every solve.
type brokenPolicy struct{}

func (brokenPolicy) Allocate(context.Context, *allocation.Problem) (*allocation.Allocation, error) {
	return nil, errors.New("broken")
}

// A policy's error names the round once, in the scheduler's words (the
// simulator added the time again, in another format; #43 item 6).
func TestPolicyErrorNamesTheRoundOnce(t *testing.T) {
	jobs, err := (&GavelWorkload{Rate: 3, Seed: 1}).Generate(5)
	require.NoError(t, err)
	_, err = Run(context.Background(), Config{Types: []topology.GPUType{topology.V100}, Capacity: []int{4}, Policy: brokenPolicy{}}, jobs)
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(err.Error(), "round at"), "%v", err)
	assert.Contains(t, err.Error(), "broken")
}
