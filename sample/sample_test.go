package sample

import (
	"errors"
	"math"
	"slices"
	"testing"
)

type want struct {
	id int32
	p  float64
}

// TestDistributions checks the final candidate distributions against values
// computed by hand (softmax of the listed logits, rounded to 5 digits).
func TestDistributions(t *testing.T) {
	base := []float32{1, 2, 3, 4}
	off := Params{Temp: 1, RepeatPenalty: 1, TopP: 1}
	with := func(f func(*Params)) Params { p := off; f(&p); return p }
	cases := []struct {
		name   string
		p      Params
		logits []float32
		hist   []int32
		want   []want
	}{
		{"plain softmax", off, base, nil,
			[]want{{3, 0.64391}, {2, 0.23688}, {1, 0.08714}, {0, 0.03206}}},
		{"top-k 2", with(func(p *Params) { p.TopK = 2 }), base, nil,
			[]want{{3, 0.73106}, {2, 0.26894}}},
		{"top-k larger than vocab", with(func(p *Params) { p.TopK = 10 }), base, nil,
			[]want{{3, 0.64391}, {2, 0.23688}, {1, 0.08714}, {0, 0.03206}}},
		// cumulative 0.64391, 0.88079 < 0.9, 0.96793 >= 0.9: three survive
		{"top-p 0.9", with(func(p *Params) { p.TopP = 0.9 }), base, nil,
			[]want{{3, 0.66524}, {2, 0.24473}, {1, 0.09003}}},
		{"top-p with min-keep", with(func(p *Params) { p.TopP = 0.1; p.MinKeep = 2 }), base, nil,
			[]want{{3, 0.73106}, {2, 0.26894}}},
		// keep logit >= 4 + ln 0.2 = 2.39
		{"min-p 0.2", with(func(p *Params) { p.MinP = 0.2 }), base, nil,
			[]want{{3, 0.73106}, {2, 0.26894}}},
		{"temp 0.5", with(func(p *Params) { p.Temp = 0.5 }), base, nil,
			[]want{{3, 0.86495}, {2, 0.11706}, {1, 0.015842}, {0, 0.0021440}}},
		{"top-k 3 then temp 2", with(func(p *Params) { p.TopK = 3; p.Temp = 2 }), base, nil,
			[]want{{3, 0.50648}, {2, 0.30719}, {1, 0.18632}}},
		// top-p sees temperature-1 probabilities (0.665, 0.245 -> keep 2),
		// then temperature 0.1 sharpens: 1/(1+e^-10).
		{"top-p before temp", with(func(p *Params) { p.TopP = 0.7; p.Temp = 0.1 }), []float32{0, 1, 2}, nil,
			[]want{{2, 0.9999546}, {1, 0.0000454}}},
		// id3: 4/2 = 2, id0: 1/2 = 0.5; ties (id1, id3 at 2) keep lower id first
		{"repeat penalty 2", with(func(p *Params) { p.RepeatPenalty = 2; p.RepeatLastN = 64 }), base, []int32{3, 0},
			[]want{{2, 0.55010}, {1, 0.20237}, {3, 0.20237}, {0, 0.045155}}},
		// negative logits are multiplied: id0 -1 -> -2; exp(-2-1), exp(0-1), 1
		{"repeat penalty on negative logit", with(func(p *Params) { p.RepeatPenalty = 2; p.RepeatLastN = 64 }), []float32{-1, 0, 1}, []int32{0},
			[]want{{2, 0.70538}, {1, 0.25950}, {0, 0.035119}}},
		// only the last 2 accepted ids (1, 2) count: id2 3 -> 1.5, id1 2 -> 1;
		// logits (1, 1, 1.5, 4), the tie keeps id 0 first
		{"repeat last n window", with(func(p *Params) { p.RepeatPenalty = 2; p.RepeatLastN = 2 }), base, []int32{3, 1, 2},
			[]want{{3, 0.84627}, {2, 0.069466}, {0, 0.042133}, {1, 0.042133}}},
		// id0: 1 - 2*0.5 - 0.25 = -0.25, id1: 1 - 0.5 - 0.25 = 0.25, id2: 1
		{"frequency and presence", with(func(p *Params) { p.FreqPenalty = 0.5; p.PresencePenalty = 0.25; p.RepeatLastN = 64 }), []float32{1, 1, 1}, []int32{0, 0, 1},
			[]want{{2, 0.56855}, {1, 0.26856}, {0, 0.16289}}},
		{"penalties off with last n 0", with(func(p *Params) { p.RepeatPenalty = 2; p.RepeatLastN = 0 }), base, []int32{3},
			[]want{{3, 0.64391}, {2, 0.23688}, {1, 0.08714}, {0, 0.03206}}},
		{"greedy", with(func(p *Params) { p.Temp = 0 }), []float32{1, 3, 3, 2}, nil,
			[]want{{1, 1}}},
		{"greedy after penalty", with(func(p *Params) { p.Temp = 0; p.RepeatPenalty = 2; p.RepeatLastN = -1 }), []float32{1, 3, 3, 2}, []int32{1},
			[]want{{2, 1}}},
		{"NaN and -Inf dropped", off, []float32{float32(math.NaN()), float32(math.Inf(-1)), 0, 0}, nil,
			[]want{{2, 0.5}, {3, 0.5}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(c.p)
			if err != nil {
				t.Fatal(err)
			}
			s.AcceptAll(c.hist)
			in := slices.Clone(c.logits)
			got, err := s.Candidates(c.logits)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(in, c.logits, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
				t.Fatalf("Candidates modified the logits")
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d candidates %+v, want %d", len(got), got, len(c.want))
			}
			for i, w := range c.want {
				if got[i].ID != w.id || math.Abs(got[i].P-w.p) > 1e-5*max(1, w.p) {
					t.Errorf("candidate %d = (%d, %.7f), want (%d, %.7f)", i, got[i].ID, got[i].P, w.id, w.p)
				}
			}
		})
	}
}

func TestGreedyTies(t *testing.T) {
	for _, c := range []struct {
		logits []float32
		want   int32
	}{
		{[]float32{0}, 0},
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{5, 5, 5}, 0},
		{[]float32{float32(math.NaN()), -1, -1}, 1},
		{[]float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.Inf(1))}, 1},
	} {
		got, err := Greedy(c.logits)
		if err != nil || got != c.want {
			t.Errorf("Greedy(%v) = %d, %v; want %d", c.logits, got, err, c.want)
		}
		s, _ := New(Params{Temp: 0, RepeatPenalty: 1})
		if got, err := s.Sample(c.logits); err != nil || got != c.want {
			t.Errorf("Sample greedy(%v) = %d, %v; want %d", c.logits, got, err, c.want)
		}
	}
}

func TestDeterminism(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.37)) * 3
	}
	run := func(seed uint64) []int32 {
		p := DefaultParams()
		p.Seed = seed
		p.RepeatPenalty = 1.1
		s, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for range 200 {
			id, err := s.Sample(logits)
			if err != nil {
				t.Fatal(err)
			}
			s.Accept(id)
			out = append(out, id)
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different sequences")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave the same 200-token sequence")
	}
	// Reset restarts the same sequence.
	p := DefaultParams()
	p.Seed = 42
	p.RepeatPenalty = 1.1
	s, _ := New(p)
	for range 50 {
		id, _ := s.Sample(logits)
		s.Accept(id)
	}
	s.Reset()
	for i := range 200 {
		id, _ := s.Sample(logits)
		s.Accept(id)
		if id != a[i] {
			t.Fatalf("after Reset token %d = %d, want %d", i, id, a[i])
		}
	}
}

// TestDrawFrequencies checks that draws follow the candidate distribution:
// every empirical frequency within 5 standard deviations.
func TestDrawFrequencies(t *testing.T) {
	s, err := New(Params{Temp: 1, RepeatPenalty: 1, TopP: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	logits := []float32{1, 2, 3, 4}
	probs := []float64{0.03206, 0.08714, 0.23688, 0.64391}
	const n = 20000
	var hits [4]int
	for range n {
		id, err := s.Sample(logits)
		if err != nil {
			t.Fatal(err)
		}
		hits[id]++
	}
	for i, p := range probs {
		sd := math.Sqrt(n * p * (1 - p))
		if d := math.Abs(float64(hits[i]) - n*p); d > 5*sd {
			t.Errorf("id %d drawn %d times, expected %.0f ± %.0f", i, hits[i], n*p, sd)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, p := range []Params{
		{Temp: float32(math.NaN()), RepeatPenalty: 1},
		{Temp: 1, RepeatPenalty: 0},
		{Temp: 1, RepeatPenalty: 1, TopP: -0.1},
		{Temp: 1, RepeatPenalty: 1, MinP: 1.5},
		{Temp: 1, RepeatPenalty: 1, MinKeep: -1},
		{Temp: 1, RepeatPenalty: float32(math.Inf(1))},
	} {
		if _, err := New(p); !errors.Is(err, ErrParams) {
			t.Errorf("New(%+v) error %v, want ErrParams", p, err)
		}
	}
	s, _ := New(DefaultParams())
	for _, l := range [][]float32{nil, {float32(math.NaN())}, {float32(math.Inf(-1)), float32(math.NaN())}} {
		if _, err := s.Sample(l); !errors.Is(err, ErrLogits) {
			t.Errorf("Sample(%v) error %v, want ErrLogits", l, err)
		}
	}
	g, _ := New(Params{RepeatPenalty: 1})
	if _, err := g.Sample([]float32{float32(math.NaN())}); !errors.Is(err, ErrLogits) {
		t.Errorf("greedy Sample(NaN) error %v, want ErrLogits", err)
	}
	if _, err := Greedy(nil); !errors.Is(err, ErrLogits) {
		t.Errorf("Greedy(nil) error %v, want ErrLogits", err)
	}
}

func BenchmarkSample(b *testing.B) {
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)*0.001)) * 10
	}
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{RepeatPenalty: 1}},
		{"default", DefaultParams()},
		{"no-top-k", Params{Temp: 0.8, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := New(c.p)
			for i := range 64 {
				s.Accept(int32(i * 97))
			}
			b.SetBytes(int64(4 * len(logits)))
			for b.Loop() {
				if _, err := s.Sample(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestParamsString(t *testing.T) {
	p := DefaultParams()
	p.Seed = 42
	p.RepeatPenalty = 1.1
	if got, want := p.String(), "penalties(repeat=1.10 freq=0.00 present=0.00 last_n=64) → top-k 40 → top-p 0.95 → min-p 0.05 → temp 0.80 → dist(seed=42)"; got != want {
		t.Errorf("%q", got)
	}
	if got := (Params{RepeatPenalty: 1}).String(); got != "greedy" {
		t.Errorf("%q", got)
	}
}

// DefaultParams are llama.cpp's common defaults (temp 0.8, top-k 40,
// top-p 0.95, min-p 0.05, repeat penalty 1.0 over the last 64 tokens).
func DefaultParams() Params {
	return Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
}
