package gen

import (
	"hash/fnv"
	"math"
)

// rng is splitmix64: tiny, fast, and with a sequence fixed by this file (not by
// the Go release), so a seed gives the same model on every toolchain.
type rng struct {
	s     uint64
	spare float64
	has   bool
}

// newRNG derives an independent stream from the run seed and a stream name
// (tensor name, pool key, …) and an index (row chunk, …).
func newRNG(seed uint64, stream string, index uint64) *rng {
	h := fnv.New64a()
	_, _ = h.Write([]byte(stream))
	r := &rng{s: seed ^ mix64(h.Sum64()) ^ mix64(index+0x51ed27)}
	r.next()
	return r
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) * 0x1p-53 }

// intn returns a uniform value in [0, n) (n > 0; Lemire's multiply-shift, the
// tiny bias is irrelevant here).
func (r *rng) intn(n int) int {
	hi, _ := mulhi(r.next(), uint64(n))
	return int(hi)
}

func mulhi(a, b uint64) (uint64, uint64) {
	const mask32 = 1<<32 - 1
	a0, a1 := a&mask32, a>>32
	b0, b1 := b&mask32, b>>32
	w0 := a0 * b0
	t := a1*b0 + w0>>32
	w1 := t&mask32 + a0*b1
	return a1*b1 + t>>32 + w1>>32, a * b
}

// norm returns a standard normal value (Box–Muller, pairs cached).
func (r *rng) norm() float64 {
	if r.has {
		r.has = false
		return r.spare
	}
	u1 := r.float64()
	for u1 == 0 {
		u1 = r.float64()
	}
	u2 := r.float64()
	m := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * u2)
	r.spare, r.has = m*s, true
	return m * c
}
