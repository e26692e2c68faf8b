package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// randomLogits returns n logits drawn from r.
func randomLogits(r *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 3)
	}
	return l
}

// TestChainWithoutHooksIsSampler: a Chain without hooks, or with only the
// probability capture, draws the Sampler's tokens on the same logits, greedy
// and seeded, with penalties — the hooks change nothing they are not asked
// to.
func TestChainWithoutHooksIsSampler(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range []Params{
		{Temp: 0, TopP: 1, RepeatPenalty: 1},
		{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 7},
		{Temp: 1.2, TopP: 1, RepeatPenalty: 1, Seed: 9},
	} {
		for _, h := range []Hooks{{}, {Capture: true, Top: 5}, {Capture: true, Top: 3, PostSampling: true}, {Capture: true}} {
			s, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			c, err := NewChain(p, h)
			if err != nil {
				t.Fatal(err)
			}
			s.AcceptAll([]int32{1, 2, 3})
			c.AcceptPrompt([]int32{1, 2, 3})
			for step := 0; step < 50; step++ {
				l := randomLogits(r, 300)
				a, err1 := s.Sample(l)
				b, err2 := c.Sample(l)
				if err1 != nil || err2 != nil || a != b {
					t.Fatalf("%v %+v step %d: sampler %d (%v), chain %d (%v)", p, h, step, a, err1, b, err2)
				}
				s.Accept(a)
				if err := c.Accept(b); err != nil {
					t.Fatal(err)
				}
				if _, ok := c.Probs(); ok != h.Capture {
					t.Fatalf("%+v: Probs ok %v", h, ok)
				}
			}
		}
	}
}

// TestChainBias: a bias of -Inf bans the argmax (greedy takes the next), a
// large bias makes a token the argmax, and the caller's logits are untouched.
func TestChainBias(t *testing.T) {
	greedy := Params{Temp: 0, TopP: 1, RepeatPenalty: 1}
	l := []float32{1, 5, 3, 4}
	for _, c := range []struct {
		bias []Bias
		want int32
	}{
		{nil, 1},
		{[]Bias{{1, float32(math.Inf(-1))}}, 3},
		{[]Bias{{1, -100}, {3, -100}}, 2},
		{[]Bias{{0, 10}}, 0},
	} {
		ch, err := NewChain(greedy, Hooks{Bias: c.bias})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ch.Sample(l)
		if err != nil || got != c.want {
			t.Fatalf("bias %v: %d (%v), want %d", c.bias, got, err, c.want)
		}
	}
	if l[1] != 5 || l[0] != 1 {
		t.Fatalf("the caller's logits changed: %v", l)
	}
	ch, _ := NewChain(greedy, Hooks{Bias: []Bias{{9, 1}}})
	if _, err := ch.Sample(l); !errors.Is(err, ErrParams) {
		t.Fatalf("bias past the logits: %v, want ErrParams", err)
	}
	for _, b := range []Bias{{-1, 0}, {0, float32(math.NaN())}, {0, float32(math.Inf(1))}} {
		if _, err := NewChain(greedy, Hooks{Bias: []Bias{b}}); !errors.Is(err, ErrParams) {
			t.Fatalf("bias %v: %v, want ErrParams", b, err)
		}
	}
	if _, err := NewChain(greedy, Hooks{Capture: true, Top: -1}); !errors.Is(err, ErrParams) {
		t.Fatalf("Top -1: %v", err)
	}
}

// oddMask allows odd ids only and records what it was told.
type oddMask struct {
	accepted []int32
	none     bool // forbid everything
}

func (m *oddMask) Apply(l []float32) error {
	for i := range l {
		if i%2 == 0 || m.none {
			l[i] = float32(math.Inf(-1))
		}
	}
	return nil
}

func (m *oddMask) Accept(id int32) error {
	if id%2 == 0 {
		return errors.New("even token")
	}
	m.accepted = append(m.accepted, id)
	return nil
}

// TestChainMask: the mask decides what can be drawn, follows generated tokens
// (not the prompt), and a mask that allows nothing or rejects a token is an
// error.
func TestChainMask(t *testing.T) {
	m := &oddMask{}
	ch, err := NewChain(Params{Temp: 1, TopP: 1, RepeatPenalty: 1, Seed: 3}, Hooks{Mask: m})
	if err != nil {
		t.Fatal(err)
	}
	ch.AcceptPrompt([]int32{2, 4})
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100; i++ {
		id, err := ch.Sample(randomLogits(r, 20))
		if err != nil || id%2 == 0 {
			t.Fatalf("step %d: %d (%v)", i, id, err)
		}
		if err := ch.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.accepted) != 100 {
		t.Fatalf("the mask saw %d tokens, want the 100 generated", len(m.accepted))
	}
	if err := ch.Accept(4); err == nil {
		t.Fatal("a token the mask rejects was accepted")
	}
	m.none = true
	if _, err := ch.Sample(randomLogits(r, 20)); !errors.Is(err, ErrLogits) {
		t.Fatalf("a mask allowing nothing: %v, want ErrLogits", err)
	}
}

// TestChainProbs: pre-sampling probabilities are the softmax of the model's
// logits (not of the biased ones), the top ones most likely first; post-
// sampling ones are the chain's survivors after bias and temperature.
func TestChainProbs(t *testing.T) {
	l := []float32{1, 2, 3, 4}
	// softmax(1,2,3,4) = 0.03206, 0.08714, 0.23688, 0.64391
	soft := []float64{0.0320586, 0.0871443, 0.2368828, 0.6439142}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	greedy := Params{Temp: 0, TopP: 1, RepeatPenalty: 1}
	ch, _ := NewChain(greedy, Hooks{Capture: true, Top: 2, Bias: []Bias{{3, float32(math.Inf(-1))}}})
	id, err := ch.Sample(l)
	if err != nil || id != 2 {
		t.Fatalf("%d %v", id, err)
	}
	tp, ok := ch.Probs()
	if !ok || tp.ID != 2 || !near(tp.P, soft[2]) || len(tp.Top) != 2 ||
		tp.Top[0].ID != 3 || !near(tp.Top[0].P, soft[3]) || tp.Top[1].ID != 2 || !near(tp.Top[1].P, soft[2]) {
		t.Fatalf("pre-sampling probs %+v", tp)
	}
	// the chosen token alone (Top 0)
	ch, _ = NewChain(greedy, Hooks{Capture: true})
	ch.Sample(l)
	if tp, ok := ch.Probs(); !ok || tp.ID != 3 || !near(tp.P, soft[3]) || len(tp.Top) != 0 {
		t.Fatalf("Top 0: %+v", tp)
	}
	// post-sampling, greedy: the one survivor with P 1
	ch, _ = NewChain(greedy, Hooks{Capture: true, Top: 3, PostSampling: true})
	if id, _ := ch.Sample(l); id != 3 {
		t.Fatalf("greedy %d", id)
	}
	if tp, _ := ch.Probs(); tp.P != 1 || len(tp.Top) != 1 || tp.Top[0] != (Prob{3, 1}) {
		t.Fatalf("post-sampling greedy %+v", tp)
	}
	// post-sampling, top-k 2 at temperature 1: (3, 4) → 0.26894, 0.73106
	ch, _ = NewChain(Params{Temp: 1, TopK: 2, TopP: 1, RepeatPenalty: 1, Seed: 5}, Hooks{Capture: true, Top: 5, PostSampling: true})
	id, _ = ch.Sample(l)
	tp, _ = ch.Probs()
	if len(tp.Top) != 2 || tp.Top[0].ID != 3 || !near(tp.Top[0].P, 0.7310586) || !near(tp.Top[1].P, 0.2689414) {
		t.Fatalf("post-sampling top-k %+v", tp)
	}
	if (id == 3 && !near(tp.P, 0.7310586)) || (id == 2 && !near(tp.P, 0.2689414)) || tp.ID != id {
		t.Fatalf("chosen %d with %+v", id, tp)
	}
	// a copy: the next Sample does not change what the caller holds
	top0 := tp.Top[0]
	ch.Sample([]float32{9, 0, 0, 0})
	if tp.Top[0] != top0 {
		t.Fatal("Probs returned the chain's own slice")
	}
}

// BenchmarkChain is one greedy step over a Qwen3-sized vocabulary (151,936
// logits): the bare sampler, a logit bias of 10 tokens, the capture of the
// top 20 probabilities from the model's logits, and after the chain.
func BenchmarkChain(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	l := randomLogits(r, 151936)
	greedy := Params{Temp: 0, TopP: 1, RepeatPenalty: 1}
	var bias []Bias
	for i := range 10 {
		bias = append(bias, Bias{ID: int32(i * 1000), Value: -5})
	}
	for _, c := range []struct {
		name string
		h    Hooks
	}{
		{"none", Hooks{}},
		{"bias", Hooks{Bias: bias}},
		{"logprobs20", Hooks{Capture: true, Top: 20}},
		{"post20", Hooks{Capture: true, Top: 20, PostSampling: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ch, err := NewChain(greedy, c.h)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := ch.Sample(l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
