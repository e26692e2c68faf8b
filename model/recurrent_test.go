package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
)

// TestHybridState: a recurrent layer keeps its floats instead of KV rows,
// Bytes counts both, and Rewind keeps a whole prefix only.
func TestHybridState(t *testing.T) {
	st, err := NewHybrid(4, []int{2, 0}, []int{0, 5}, KVF32)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Bytes(), int64(2*4*2*4+5*4); got != want {
		t.Fatalf("Bytes = %d, want %d", got, want)
	}
	if st.Recurrent(0) != nil || len(st.Recurrent(1)) != 5 {
		t.Fatalf("recurrent states %v %v", st.Recurrent(0), st.Recurrent(1))
	}
	st.Pos = 3
	st.Recurrent(1)[2] = 7
	if got := st.Rewind(3); got != 3 || st.Recurrent(1)[2] != 7 {
		t.Fatalf("Rewind(Pos) = %d, state %v: want 3, kept", got, st.Recurrent(1))
	}
	if got := st.Rewind(2); got != 0 || st.Pos != 0 || st.Recurrent(1)[2] != 0 {
		t.Fatalf("Rewind(2) = %d (Pos %d, state %v): want 0, state zeroed", got, st.Pos, st.Recurrent(1))
	}
	kv, _ := NewKV(4, []int{2}, KVF16)
	kv.Pos = 3
	if got := kv.Rewind(1); got != 1 || kv.Pos != 1 {
		t.Fatalf("KV Rewind(1) = %d, Pos %d", got, kv.Pos)
	}
	for _, c := range []struct{ w, r []int }{{[]int{0}, []int{0}}, {[]int{2}, []int{3}}, {[]int{2}, nil}} {
		if _, err := NewHybrid(4, c.w, c.r, KVF32); err == nil {
			t.Errorf("NewHybrid(widths %v, rec %v) accepted", c.w, c.r)
		}
	}
}

// TestSplitGate: per row, the query moves to the front and the gate out.
func TestSplitGate(t *testing.T) {
	q := []float32{1, 2, 10, 20, 3, 4, 30, 40, 5, 6, 50, 60}
	gate := make([]float32, 6)
	splitGate(q, gate, 3, 2)
	want, wantG := []float32{1, 2, 3, 4, 5, 6}, []float32{10, 20, 30, 40, 50, 60}
	for i := range want {
		if q[i] != want[i] || gate[i] != wantG[i] {
			t.Fatalf("q %v gate %v, want %v %v", q[:6], gate, want, wantG)
		}
	}
}

// TestIsRecurrent follows llama.cpp's is_recr: the stored array, else every
// full_attention_interval-th layer (default 4) is attention.
func TestIsRecurrent(t *testing.T) {
	g := SSMGeom{StateSize: 8}
	var got []bool
	for il := 0; il < 8; il++ {
		got = append(got, g.IsRecurrent(il))
	}
	if want := "[true true true false true true true false]"; fmt.Sprint(got) != want {
		t.Fatalf("default interval: %v, want %s", got, want)
	}
	g.FullAttentionInterval = 2
	if g.IsRecurrent(0) != true || g.IsRecurrent(1) != false {
		t.Fatal("interval 2")
	}
	g.Recurrent = []bool{false, true}
	if g.IsRecurrent(0) || !g.IsRecurrent(1) || g.IsRecurrent(2) {
		t.Fatal("stored array")
	}
	if (&SSMGeom{}).IsRecurrent(0) {
		t.Fatal("no SSM geometry: no recurrent layer")
	}
	h := HParams{NLayer: 4, SSM: SSMGeom{ConvKernel: 4, InnerSize: 8, StateSize: 4, GroupCount: 1}}
	if h.RecurrentLayers() != 3 || h.SSM.StateFloats() != 3*(8+2*4)+4*8 {
		t.Fatalf("RecurrentLayers %d StateFloats %d", h.RecurrentLayers(), h.SSM.StateFloats())
	}
}

// TestCausalConv: out[t] = Σ taps over the state then the tokens; the
// state carries the last K-1 inputs, so two passes equal one.
func TestCausalConv(t *testing.T) {
	taps := []float32{1, 10, 100, 2, 20, 200} // 2 channels, K = 3
	x := []float32{1, 2, 3, 4, 5, 6}          // 3 tokens × 2 channels
	state := make([]float32, 4)
	win := make([]float32, 8)
	one := append([]float32(nil), x...)
	CausalConv(state, one, taps, 3, 2, 3, win)
	// channel 0 inputs 0,0,1,3,5: t0 = 100·1, t1 = 10·1+100·3, t2 = 1+30+500
	if want := []float32{100, 400, 310, 2*20 + 200*4, 531, 2*2 + 20*4 + 200*6}; fmt.Sprint(one) != fmt.Sprint(want) {
		t.Fatalf("one pass %v, want %v", one, want)
	}
	if fmt.Sprint(state) != "[3 5 4 6]" {
		t.Fatalf("state %v, want each channel's last 2 inputs", state)
	}
	clear(state)
	two := append([]float32(nil), x...)
	CausalConv(state, two[:2], taps, 1, 2, 3, win)
	CausalConv(state, two[2:], taps, 2, 2, 3, win)
	if fmt.Sprint(two) != fmt.Sprint(one) {
		t.Fatalf("two passes %v, one pass %v", two, one)
	}
}

// TestCausalConvTokenByToken: random float inputs convolved token by token
// (the single-token path) give the whole pass's outputs and state bit for
// bit, for 1 to 5 taps.
func TestCausalConvTokenByToken(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 2))
	const n, ch = 9, 13
	for K := 1; K <= 5; K++ {
		vec := func(m int) []float32 {
			v := make([]float32, m)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		taps, x, st0 := vec(ch*K), vec(n*ch), vec(ch*(K-1))
		whole, st := slices.Clone(x), slices.Clone(st0)
		CausalConv(st, whole, taps, n, ch, K, make([]float32, K-1+n))
		steps, st1 := slices.Clone(x), slices.Clone(st0)
		for tok := 0; tok < n; tok++ {
			CausalConv(st1, steps[tok*ch:(tok+1)*ch], taps, 1, ch, K, make([]float32, K))
		}
		for i := range whole {
			if math.Float32bits(whole[i]) != math.Float32bits(steps[i]) {
				t.Fatalf("K=%d: output %d: token by token %g, whole pass %g", K, i, steps[i], whole[i])
			}
		}
		for i := range st {
			if math.Float32bits(st[i]) != math.Float32bits(st1[i]) {
				t.Fatalf("K=%d: state %d: token by token %g, whole pass %g", K, i, st1[i], st[i])
			}
		}
	}
}

// TestStatelessLayer: a layer whose Mixer keeps no state (nemotron_h_moe's
// MoE-only blocks) holds neither KV rows nor a recurrent state when it is
// marked so; unmarked, a layer of neither is still refused.
func TestStatelessLayer(t *testing.T) {
	st, err := newState(4, []int{2, 0, 0}, []int{0, 0, 3}, nil, []bool{false, true, false}, KVF32)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recurrent(1) != nil || st.Bytes() != 2*4*2*4+3*4 {
		t.Errorf("stateless layer: recurrent %v, state %d bytes, want nil and %d", st.Recurrent(1), st.Bytes(), 2*4*2*4+3*4)
	}
	if _, err := newState(4, []int{2, 0}, []int{0, 0}, nil, []bool{true, false}, KVF32); err == nil {
		t.Error("an unmarked layer of neither KV rows nor state accepted")
	}
}

// refCausalConv is the channel-at-a-time convolution CausalConv replaced
// (a window per channel gathered from the token rows): the reference its
// blocks are held to.
func refCausalConv(state, x, taps []float32, n, channels, K int) {
	win := make([]float32, K-1+n)
	for c := 0; c < channels; c++ {
		st, w := state[c*(K-1):(c+1)*(K-1)], taps[c*K:(c+1)*K]
		copy(win, st)
		for t := 0; t < n; t++ {
			win[K-1+t] = x[t*channels+c]
		}
		for t := 0; t < n; t++ {
			var sum float32
			for i, wi := range w {
				sum += float32(win[t+i] * wi)
			}
			x[t*channels+c] = sum
		}
		copy(st, win[n:n+K-1])
	}
}

// TestCausalConvBlocks: the blocked convolution (serial with the smallest
// and a large window, and CausalConvPool on 1–3 threads with SiLU applied
// per block) equals the channel-at-a-time reference bit for bit, outputs
// and state, for 1 to 5 taps, passes shorter and longer than the state and
// channel counts that leave a partial block. Signed zeros count: the sum
// starts at +0 as ggml's does.
func TestCausalConvBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 3))
	vec := func(m int) []float32 {
		v := make([]float32, m)
		for i := range v {
			switch rng.IntN(8) {
			case 0:
				v[i] = float32(math.Copysign(0, -1))
			default:
				v[i] = float32(rng.NormFloat64())
			}
		}
		return v
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d: %g, reference %g", what, i, got[i], want[i])
			}
		}
	}
	pools := []*kernels.Pool{kernels.NewPool(1), kernels.NewPool(2), kernels.NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for K := 1; K <= 5; K++ {
		for _, n := range []int{1, 2, 3, 5, 17, 64} {
			for _, ch := range []int{1, 7, convBlockChannels + 9, 2*convBlockChannels + 1} {
				taps, x, st0 := vec(ch*K), vec(n*ch), vec(ch*(K-1))
				want, wst := slices.Clone(x), slices.Clone(st0)
				refCausalConv(wst, want, taps, n, ch, K)
				for _, w := range []int{K - 1 + n, 4096} {
					got, gst := slices.Clone(x), slices.Clone(st0)
					CausalConv(gst, got, taps, n, ch, K, make([]float32, w))
					name := fmt.Sprintf("K=%d n=%d channels=%d win=%d", K, n, ch, w)
					same(name+" output", got, want)
					same(name+" state", gst, wst)
				}
				silu := slices.Clone(want)
				kernels.SiLU(silu, silu)
				for i, p := range pools {
					got, gst := slices.Clone(x), slices.Clone(st0)
					err := CausalConvPool(p, gst, got, taps, n, ch, K, make([]float32, ch*(K-1)), func(v []float32) { kernels.SiLU(v, v) })
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("pool of %d: K=%d n=%d channels=%d", i+1, K, n, ch)
					same(name+" output", got, silu)
					same(name+" state", gst, wst)
				}
			}
		}
	}
}

// BenchmarkCausalConv: a qwen35moe delta-net's convolution of a 64-token
// prompt pass (8192 channels, 4 taps): the channel-at-a-time reference,
// the blocks on this thread, and CausalConvPool on two threads.
func BenchmarkCausalConv(b *testing.B) {
	const n, ch, K = 64, 8192, 4
	rng := rand.New(rand.NewPCG(39, 4))
	taps, x, st := make([]float32, ch*K), make([]float32, n*ch), make([]float32, ch*(K-1))
	for i := range taps {
		taps[i] = float32(rng.NormFloat64())
	}
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"channel-at-a-time", func() { refCausalConv(st, x, taps, n, ch, K) }},
		{"blocks", func() { CausalConv(st, x, taps, n, ch, K, make([]float32, 4096)) }},
		{"pool-t2", func() { _ = CausalConvPool(pool, st, x, taps, n, ch, K, make([]float32, ch*(K-1)), nil) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(4 * n * ch))
			for i := 0; i < b.N; i++ {
				bc.run()
			}
		})
	}
}
