package pyrand

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected values were printed by CPython 3.11's random module.
func TestMatchesCPython(t *testing.T) {
	r := New(0)
	assert.Equal(t, []uint32{3626764237, 1654615998, 3255389356}, []uint32{r.Uint32(), r.Uint32(), r.Uint32()})

	r = New(5)
	assert.Equal(t, 0.6229016948897019, r.Float64())
	assert.Equal(t, 0.7417869892607294, r.Float64())

	r = New(1<<40 + 7) // two key words
	assert.Equal(t, []uint32{2635837658, 3209733218}, []uint32{r.Uint32(), r.Uint32()})

	r = New(7)
	var got []int
	for range 8 {
		got = append(got, r.IntN(26))
	}
	assert.Equal(t, []int{10, 4, 12, 20, 1, 2, 17, 3}, got)

	r = New(7)
	l := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	r.Shuffle(len(l), func(i, j int) { l[i], l[j] = l[j], l[i] })
	assert.Equal(t, []int{8, 3, 1, 4, 7, 0, 9, 6, 2, 5}, l)

	r = New(5)
	types := []string{"v100", "p100", "k80"}
	r.Shuffle(3, func(i, j int) { types[i], types[j] = types[j], types[i] })
	assert.Equal(t, []string{"v100", "p100", "k80"}, types)
	got = got[:0]
	r.Shuffle(3, func(i, j int) { types[i], types[j] = types[j], types[i] })
	for range 10 {
		got = append(got, r.IntN(3))
	}
	assert.Equal(t, []int{2, 2, 2, 2, 0, 1, 0, 2, 0, 0}, got)

	r = New(2)
	assert.Equal(t, 2.934051407833874, r.Uniform(1.5, 3))
	assert.Equal(t, 1, r.IntN(26))
	assert.Equal(t, 0, r.IntN(1))

	// Past the first twist.
	r = New(0)
	for range 700 {
		r.Uint32()
	}
	assert.Equal(t, uint32(2140787315), r.Uint32())
	assert.Equal(t, 0.998183045526196, r.Float64())
}

func TestState(t *testing.T) {
	r := New(11)
	for range 1000 {
		r.Uint32()
	}
	s := r.State()
	want := []uint32{r.Uint32(), r.Uint32()}
	q := New(0)
	require.NoError(t, q.SetState(s))
	assert.Equal(t, want, []uint32{q.Uint32(), q.Uint32()})
	assert.ErrorIs(t, q.SetState(State{MT: make([]uint32, 3)}), ErrState)
	assert.ErrorIs(t, q.SetState(State{MT: make([]uint32, n), Index: n + 1}), ErrState)
}

func TestPanics(t *testing.T) {
	r := New(1)
	assert.Panics(t, func() { r.IntN(0) })
	assert.Panics(t, func() { r.GetRandBits(33) })
	assert.Equal(t, uint32(0), r.GetRandBits(0))
}
