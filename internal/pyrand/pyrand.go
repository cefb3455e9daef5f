// Package pyrand reproduces the random streams of CPython's random module
// (the Mersenne Twister MT19937 of Matsumoto and Nishimura, 1998, seeded
// and sampled as Modules/_randommodule.c and Lib/random.py do), so that
// code ported from a Python simulator draws exactly the numbers the
// original drew for the same seed. Gavel's simulator seeds one
// random.Random per purpose (jobs seed+2, arrivals seed+3, the type
// shuffle seed+5, FIFO's type draw seed); gpusched's compatible modes use
// this package to follow those streams.
//
// Only what those modes need is here: seeding from a non-negative integer,
// random(), getrandbits(k) for k <= 32, randrange(n) (_randbelow), shuffle,
// choice and uniform. The results agree with CPython 3.2 and later, whose
// integer seeding and _randbelow have not changed since.
package pyrand

import (
	"errors"
	"fmt"
)

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// Rand is one CPython random.Random. The zero value is not seeded; use New.
// A Rand is not safe for concurrent use.
type Rand struct {
	mt  [n]uint32
	mti int
}

// New returns a generator seeded as random.Random(seed).
func New(seed uint64) *Rand {
	r := &Rand{}
	r.Seed(seed)
	return r
}

// Seed reseeds as random.seed(seed): the integer's 32-bit words, least
// significant first (one zero word for 0), go through init_by_array.
func (r *Rand) Seed(seed uint64) {
	key := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		key = append(key, hi)
	}
	r.initByArray(key)
}

func (r *Rand) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = n
}

func (r *Rand) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(n, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := n - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
	r.mti = n
}

// Uint32 returns the next 32 bits of the stream (genrand_uint32).
func (r *Rand) Uint32() uint32 {
	if r.mti >= n {
		r.twist()
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

func (r *Rand) twist() {
	mag := [2]uint32{0, matrixA}
	var kk int
	for kk = 0; kk < n-m; kk++ {
		y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
		r.mt[kk] = r.mt[kk+m] ^ (y >> 1) ^ mag[y&1]
	}
	for ; kk < n-1; kk++ {
		y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
		r.mt[kk] = r.mt[kk+(m-n)] ^ (y >> 1) ^ mag[y&1]
	}
	y := (r.mt[n-1] & upperMask) | (r.mt[0] & lowerMask)
	r.mt[n-1] = r.mt[m-1] ^ (y >> 1) ^ mag[y&1]
	r.mti = 0
}

// Float64 returns random.random(): 53 random bits in [0, 1).
func (r *Rand) Float64() float64 {
	a, b := r.Uint32()>>5, r.Uint32()>>6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

// Uniform returns random.uniform(a, b) = a + (b-a) * random().
func (r *Rand) Uniform(a, b float64) float64 { return a + (b-a)*r.Float64() }

// GetRandBits returns random.getrandbits(k) for 0 <= k <= 32.
func (r *Rand) GetRandBits(k int) uint32 {
	switch {
	case k <= 0:
		return 0
	case k > 32:
		panic(fmt.Sprintf("pyrand: getrandbits(%d): more than 32 bits", k)) // programmer error
	}
	return r.Uint32() >> (32 - k)
}

// IntN returns random.randrange(n) for 0 < n < 2^32 (CPython's
// _randbelow_with_getrandbits: k = bit length of n, draw k bits until the
// value is below n). It panics if n <= 0, as randrange raises.
func (r *Rand) IntN(bound int) int {
	if bound <= 0 || uint64(bound) >= 1<<32 {
		panic(fmt.Sprintf("pyrand: randrange(%d)", bound)) // programmer error
	}
	k := bitLen(uint64(bound))
	for {
		if v := uint64(r.GetRandBits(k)); v < uint64(bound) {
			return int(v)
		}
	}
}

func bitLen(v uint64) int {
	k := 0
	for v > 0 {
		k++
		v >>= 1
	}
	return k
}

// Shuffle permutes n elements as random.shuffle does: for i from n-1 down
// to 1, swap i with randrange(i+1).
func (r *Rand) Shuffle(count int, swap func(i, j int)) {
	for i := count - 1; i > 0; i-- {
		swap(i, r.IntN(i+1))
	}
}

// State is a generator's complete state, for saving and restoring.
type State struct {
	MT    []uint32 `json:"mt"`
	Index int      `json:"index"`
}

// ErrState reports a State that no generator can have.
var ErrState = errors.New("pyrand: invalid state")

// State returns a copy of the generator's state.
func (r *Rand) State() State {
	return State{MT: append([]uint32(nil), r.mt[:]...), Index: r.mti}
}

// SetState restores a state returned by State.
func (r *Rand) SetState(s State) error {
	if len(s.MT) != n || s.Index < 0 || s.Index > n {
		return fmt.Errorf("%w: %d words (want %d), index %d", ErrState, len(s.MT), n, s.Index)
	}
	copy(r.mt[:], s.MT)
	r.mti = s.Index
	return nil
}
