package allocation

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingPolicy fails while fail is set, and otherwise allocates as
// max-min fairness does.
type failingPolicy struct {
	MaxMinFairness
	fail bool
}

var (
	errPolicy = errors.New("policy failed")
	ctx       = context.Background()
)

func (f *failingPolicy) Allocate(ctx context.Context, p *Problem) (*Allocation, error) {
	if f.fail {
		return nil, errPolicy
	}
	return f.MaxMinFairness.Allocate(ctx, p)
}

// Rollback undoes Next and Report back to Checkpoint, whether Next failed
// or not, in every mode: the snapshot is the one before, and the rounds
// that follow are those of a twin that never ran the undone calls.
func TestRoundsCheckpointRollback(t *testing.T) {
	for _, compat := range []Compat{CompatNone, CompatGavel} {
		for _, reuse := range []bool{false, true} {
			p, _ := hostileBase(t, compat)
			pol, twinPol := &failingPolicy{}, &failingPolicy{}
			r := &Rounds{Policy: pol, Mechanism: Mechanism{Compat: compat, MinResetInterval: -1, ShuffleTypes: true}, ReuseRounds: reuse}
			twin := &Rounds{Policy: twinPol, Mechanism: r.Mechanism, ReuseRounds: reuse}
			now := 0.0
			for range 3 {
				for _, m := range []*Rounds{r, twin} {
					_, err := m.Next(ctx, p, now)
					require.NoError(t, err)
				}
				now += 360
			}
			before, err := r.Snapshot()
			require.NoError(t, err)

			// A report and a round that fails, then one that succeeds:
			// both undone.
			r.Checkpoint()
			last := r.Last()
			require.NoError(t, r.Report(RoundReport{Start: last.Start, Ran: []UnitRun{{JobIDs: last.Assignments[0].JobIDs, Type: last.Assignments[0].Type, Seconds: 100}}}))
			pol.fail = true
			r.ForceReset() // the policy solves
			_, err = r.Next(ctx, p, now)
			require.ErrorIs(t, err, errPolicy)
			r.Rollback()
			after, err := r.Snapshot()
			require.NoError(t, err)
			assert.JSONEq(t, string(before), string(after), "compat %v reuse %v: rolled back after a failure", compat, reuse)
			pol.fail = false
			r.Checkpoint()
			r.ForceReset()
			rd, err := r.Next(ctx, p, now)
			require.NoError(t, err)
			require.True(t, rd.Reset)
			r.Rollback()
			after, err = r.Snapshot()
			require.NoError(t, err)
			assert.JSONEq(t, string(before), string(after), "compat %v reuse %v: rolled back after a success", compat, reuse)
			r.Rollback() // a checkpoint serves once: nothing happens
			after, err = r.Snapshot()
			require.NoError(t, err)
			assert.JSONEq(t, string(before), string(after))
			// Committed, the calls stand.
			r.Checkpoint()
			last = r.Last()
			require.NoError(t, r.Report(RoundReport{Start: last.Start}))
			r.Commit()
			r.Rollback()
			assert.True(t, r.st.reported, "a committed report stands")
			r.st.reported = false

			for range 3 {
				a, err := r.Next(ctx, p, now)
				require.NoError(t, err)
				b, err := twin.Next(ctx, p, now)
				require.NoError(t, err)
				assert.Equal(t, b.Assignments, a.Assignments, "compat %v reuse %v at %v", compat, reuse, now)
				now += 360
			}
		}
	}
}
