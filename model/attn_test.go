package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
)

// TestAttendPromptGroupsEqualHeads: the layer attention equals
// State.Attend head by head for every way attendPrompt splits the work —
// grouped heads (16 query heads over 2 KV heads: two slot groups per KV
// head), prompt tiles (2, 4 and 8 tokens per tile for 4, 2 and 1 query
// heads per KV head, the last tile partial), head by head (3 per KV head)
// — for F16 and F32 caches, with a sliding window (also one that starts
// moving inside a tile) and with sinks, for a decode step and prompts, at 1
// and 2 threads.
func TestAttendPromptGroupsEqualHeads(t *testing.T) {
	for _, geo := range [][2]int{{16, 2}, {8, 2}, {8, 4}, {4, 4}, {6, 2}} {
		a := &Attention{Geom: Geom{NHead: geo[0], NHeadKV: geo[1], HeadDim: 64, Scale: 0.125}}
		for _, kv := range []KVType{KVF16, KVF32} {
			for _, c := range []struct{ pos, n, window int }{{40, 1, 0}, {0, 9, 0}, {30, 7, 5}, {0, 13, 6}} {
				for _, sinks := range []bool{false, true} {
					for _, threads := range []int{1, 2} {
						name := fmt.Sprintf("h%d_kv%d/%v/pos%d/n%d/w%d/sinks%v/t%d", geo[0], geo[1], kv, c.pos, c.n, c.window, sinks, threads)
						t.Run(name, func(t *testing.T) {
							a.Window, a.Sinks = c.window, nil
							if sinks {
								a.Sinks = make([]float32, a.NHead)
								for i := range a.Sinks {
									a.Sinks[i] = float32(i%5) - 1
								}
							}
							checkAttendPrompt(t, a, kv, c.pos, c.n, threads)
						})
					}
				}
			}
		}
	}
}

func checkAttendPrompt(t *testing.T, a *Attention, kv KVType, pos, n, threads int) {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	st, q := attnFixture(t, a, pos+n, kv)
	p := attnPass(pool, a, n, pos)
	got := make([]float32, n*a.QDim())
	if err := p.attendPrompt(st, 0, a, q[:n*a.QDim()], got); err != nil {
		t.Fatal(err)
	}
	hd, qd, group := a.HeadDim, a.QDim(), a.NHead/a.NHeadKV
	want, sc := make([]float32, hd), make([]float32, pos+n)
	for tok := 0; tok < n; tok++ {
		for h := 0; h < a.NHead; h++ {
			args := AttnArgs{Layer: 0, Off: h / group * hd, Dim: hd, Scale: a.Scale, Hi: pos + tok}
			if a.Window > 0 {
				args.Lo = max(0, args.Hi-a.Window+1)
			}
			if a.Sinks != nil {
				args.Sink, args.HasSink = a.Sinks[h], true
			}
			o := tok*qd + h*hd
			st.Attend(&args, q[o:], sc, want)
			for i, w := range want {
				if math.Float32bits(got[o+i]) != math.Float32bits(w) {
					t.Fatalf("token %d head %d [%d]: layer %g, head alone %g", tok, h, i, got[o+i], w)
				}
			}
		}
	}
}

// attnFixture is a one-layer cache of n positions filled with random K/V
// rows, and n tokens' random queries.
func attnFixture(tb testing.TB, a *Attention, n int, kv KVType) (*State, []float32) {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	st, err := NewKV(n, []int{a.KVDim()}, kv)
	if err != nil {
		tb.Fatal(err)
	}
	k, v := make([]float32, a.KVDim()), make([]float32, a.KVDim())
	for pos := 0; pos < n; pos++ {
		for i := range k {
			k[i], v[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		st.Store(0, pos, k, v)
	}
	q := make([]float32, n*a.QDim())
	for i := range q {
		q[i] = float32(rng.NormFloat64())
	}
	return st, q
}

// attnPass is a Pass with just what attendPrompt uses for layer
// attention a: n tokens from position pos, scores as newPass sizes them.
func attnPass(pool *kernels.Pool, a *Attention, n, pos int) *Pass {
	heads := max(a.NHead, kernels.GroupSlots*a.NHeadKV)
	p := &Pass{N: n, Pos0: pos, Pool: pool, scores: make([]float32, heads*(pos+n))}
	p.heads.p = p
	p.heads.fn = p.heads.run
	return p
}
