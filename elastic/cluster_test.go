package elastic

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lyra's server groups (section 5.3) on 2 training and 2 loaned servers of
// 8 GPUs: an inelastic job lands on training servers, an elastic job's
// base on a loaned server and its flexible workers on the other loaned
// one; reclaiming one server then scales the elastic job in without a
// preemption, and reclaiming the second preempts it.
func TestClusterGroupsAndReclaim(t *testing.T) { bothModes(t, testClusterGroupsAndReclaim) }

func testClusterGroupsAndReclaim(t *testing.T, mk maker) {
	c, err := mk(2, 8)
	require.NoError(t, err)
	loaned, err := c.Loan(2)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, loaned)

	in := &Job{ID: 1, MinWorkers: 6, MaxWorkers: 6, GPUsPerWorker: 2, Work: 1, Curve: Linear{1}}
	n, err := c.Place(in, 6)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	for _, p := range c.Parts(1) {
		assert.Less(t, p.Server, 2, "inelastic workers on training servers")
	}
	el := &Job{ID: 2, MinWorkers: 4, MaxWorkers: 12, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	n, err = c.Place(el, 10)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.ElementsMatch(t, []Part{{Server: 2, Workers: 4}, {Server: 3, Workers: 6, Flexible: true}}, c.Parts(2))
	require.NoError(t, c.Check())
	total, free := c.GPUs()
	assert.Equal(t, 32, total)
	assert.Equal(t, 32-12-10, free)

	r, err := c.Reclaim(1)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, r.Servers)
	assert.Empty(t, r.Preempted)
	assert.Equal(t, []int{2}, r.ScaledIn)
	assert.Equal(t, 4, c.Workers(2))
	require.NoError(t, c.Check())

	r, err = c.Reclaim(1)
	require.NoError(t, err)
	assert.Equal(t, []int{2}, r.Servers)
	assert.Equal(t, []int{2}, r.Preempted)
	assert.Equal(t, 0, c.Workers(2))
	assert.Equal(t, 0, c.Loaned())
	require.NoError(t, c.Check())

	_, err = c.Reclaim(1)
	assert.ErrorIs(t, err, ErrInvalid)
	// The training servers have 4 GPUs free: an 8-GPU base does not fit.
	_, err = c.Place(&Job{ID: 3, MinWorkers: 1, MaxWorkers: 1, GPUsPerWorker: 8, Work: 1, Curve: Linear{1}}, 1)
	assert.ErrorIs(t, err, ErrUnplaceable)
	_, err = c.Resize(el, 5)
	assert.ErrorIs(t, err, ErrUnplaceable)
}

// Resize keeps what a job has: growing adds flexible workers, shrinking
// removes flexible workers on loaned servers first.
func TestClusterResize(t *testing.T) { bothModes(t, testClusterResize) }

func testClusterResize(t *testing.T, mk maker) {
	c, _ := mk(1, 4)
	_, _ = c.Loan(1)
	j := &Job{ID: 7, MinWorkers: 2, MaxWorkers: 8, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	_, err := c.Place(j, 2)
	require.NoError(t, err)
	assert.Equal(t, []Part{{Server: 1, Workers: 2}}, c.Parts(7))
	n, err := c.Resize(j, 8)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	n, err = c.Resize(j, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	// The two flexible workers left are on the training server.
	assert.ElementsMatch(t, []Part{{Server: 1, Workers: 2}, {Server: 0, Workers: 2, Flexible: true}}, c.Parts(7))
	_, err = c.Resize(j, 1)
	assert.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, c.Check())
	c.Release(7)
	_, free := c.GPUs()
	assert.Equal(t, 8, free)
}

// Random operations never break the counts, never exceed a server, and a
// reclaim of n loaned servers always frees exactly n (or says why not).
func TestClusterRandomOperations(t *testing.T) { bothModes(t, testClusterRandomOperations) }

func testClusterRandomOperations(t *testing.T, mk maker) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 50; trial++ {
		c, _ := mk(1+rng.IntN(4), 8)
		c.SetPacking(trial%2 == 1)
		jobs := map[int]*Job{}
		for step := 0; step < 200; step++ {
			switch op := rng.IntN(6); op {
			case 0:
				_, err := c.Loan(rng.IntN(3))
				require.NoError(t, err)
			case 1, 2:
				wMin := 1 + rng.IntN(4)
				j := &Job{ID: step, MinWorkers: wMin, MaxWorkers: wMin + rng.IntN(6), GPUsPerWorker: 1 + rng.IntN(4), Work: 1, Curve: Linear{1}}
				_, free := c.GPUs()
				n, err := c.Place(j, j.MinWorkers+rng.IntN(j.MaxWorkers-j.MinWorkers+1))
				if err != nil {
					require.ErrorIs(t, err, ErrUnplaceable)
					assert.Equal(t, 0, c.Workers(j.ID))
					continue
				}
				_, after := c.GPUs()
				assert.Equal(t, free-after, n*j.GPUsPerWorker)
				jobs[j.ID] = j
			case 3:
				for id, j := range jobs {
					if c.Workers(id) > 0 {
						_, err := c.Resize(j, j.MinWorkers+rng.IntN(j.MaxWorkers-j.MinWorkers+1))
						require.NoError(t, err)
					}
					break
				}
			case 4:
				for id := range jobs {
					c.Release(id)
					delete(jobs, id)
					break
				}
			case 5:
				loaned := c.Loaned()
				n := rng.IntN(loaned + 2)
				r, err := c.Reclaim(n)
				if n > loaned {
					require.ErrorIs(t, err, ErrInvalid)
					continue
				}
				require.NoError(t, err)
				assert.Len(t, r.Servers, n)
				assert.Equal(t, loaned-n, c.Loaned())
				for _, id := range r.Preempted {
					assert.Equal(t, 0, c.Workers(id))
				}
				for _, id := range r.ScaledIn {
					assert.GreaterOrEqual(t, c.Workers(id), jobs[id].MinWorkers)
				}
			}
			require.NoError(t, c.Check(), "trial %d step %d", trial, step)
		}
	}
}

// Packing for jobs that slow down across servers: a growing job is placed
// afresh on the fewest servers, a shrinking one leaves its smallest parts.
func TestClusterPacking(t *testing.T) { bothModes(t, testClusterPacking) }

func testClusterPacking(t *testing.T, mk maker) {
	c, _ := mk(2, 4)
	c.SetPacking(true)
	a := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 8, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	b := &Job{ID: 2, MinWorkers: 1, MaxWorkers: 4, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	_, err := c.Place(a, 3)
	require.NoError(t, err)
	assert.Equal(t, []Part{{Server: 0, Workers: 1}, {Server: 0, Workers: 2, Flexible: true}}, c.Parts(1))
	_, err = c.Place(b, 2)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Parts(2)[0].Server, "2 workers do not fit beside a's 3")
	n, err := c.Resize(a, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	for _, p := range c.Parts(1) {
		assert.Equal(t, 0, p.Server)
	}
	n, err = c.Resize(a, 8)
	require.NoError(t, err)
	assert.Equal(t, 6, n, "4 on server 0 and the 2 free on server 1")
	n, err = c.Resize(a, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	for _, p := range c.Parts(1) {
		assert.Equal(t, 0, p.Server, "the part on server 1 went first")
	}
	// No room to grow: it stays where it is (no move without a gain).
	_, err = c.Place(&Job{ID: 3, MinWorkers: 2, MaxWorkers: 2, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}, 2)
	require.NoError(t, err)
	before := c.Parts(1)
	n, err = c.Resize(a, 6)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, before, c.Parts(1))
	require.NoError(t, c.Check())
}

func TestClusterSpan(t *testing.T) { bothModes(t, testClusterSpan) }

func testClusterSpan(t *testing.T, mk maker) {
	c, _ := mk(1, 4)
	_, _ = c.Loan(1)
	j := &Job{ID: 1, MinWorkers: 1, MaxWorkers: 6, GPUsPerWorker: 1, Work: 1, Curve: Linear{1}}
	_, err := c.Place(j, 6)
	require.NoError(t, err)
	perServer, onLoan := c.Span(1, nil)
	assert.Equal(t, []int{2, 4}, perServer, "by server ID: 2 on the training server, 4 on the loaned one")
	assert.Equal(t, 4, onLoan, "base and flexible workers fill the loaned server first")
	assert.True(t, c.IsLoaned(1))
	assert.False(t, c.IsLoaned(0))
	assert.False(t, c.IsLoaned(7))
	perServer, _ = c.Span(9, perServer[:0])
	assert.Empty(t, perServer)
}
