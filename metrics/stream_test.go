package metrics

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// run is n tokens: a slow head of warm tokens, then a noisy steady rate.
func run(n, warm int, seed uint64) []Token {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([]Token, n)
	for i := range rows {
		wall := 100 + 10*r.Float64()
		if i < warm {
			wall = 400 + 50*r.Float64()
		}
		rows[i] = Token{Step: i + 1, Steps: n, WallMS: wall, IOMS: 3 * r.Float64(), ComputeMS: 80 + r.Float64(),
			ReadBytes: int64(r.IntN(1 << 20)), CacheHitPct: float64(i%100) / 2, StallMS: r.Float64(),
			MgmtMS: r.Float64() / 10, Majflt: int64(r.IntN(3)), CPUMS: 150 * r.Float64(), ResidentFrac: -1}
	}
	return rows
}

func streamOf(rows []Token, window int) *Stream {
	s := NewStream(window)
	for _, r := range rows {
		s.Add(r)
	}
	return s
}

// same compares summaries field by field, NaN equal to NaN.
func same(a, b Summary) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if fx, ok := x.(float64); ok {
			fy := y.(float64)
			if fx != fy && !(math.IsNaN(fx) && math.IsNaN(fy)) {
				return false
			}
		} else if x != y {
			return false
		}
	}
	return true
}

// TestStreamExact: a Stream's summary is Summarize's, bit for bit, while the
// run fits its window, and always with window 0.
func TestStreamExact(t *testing.T) {
	o := Options{Warmup: -1, Threads: 2, HasMajflt: true, HasCPU: true}
	for _, c := range []struct{ n, warm, window int }{{0, 0, 64}, {1, 0, 64}, {7, 2, 64}, {64, 20, 64}, {3000, 40, 0}} {
		rows := run(c.n, c.warm, uint64(c.n))
		for _, oo := range []Options{o, {Warmup: 3, Threads: 2, HasMajflt: true, HasCPU: true}} {
			if got, want := streamOf(rows, c.window).Summary(oo), Summarize(rows, oo); !same(got, want) {
				t.Errorf("n=%d window=%d warmup=%d:\n got %+v\nwant %+v", c.n, c.window, oo.Warmup, got, want)
			}
		}
	}
}

// TestStreamBounded: past its window a Stream holds at most 2 × window
// tokens' times however long the run; its sums stay exact and the warm-up
// and steady rate agree with Summarize's on a run whose warm-up is in the
// head.
func TestStreamBounded(t *testing.T) {
	const window = 256
	rows := run(100_000, 30, 7)
	s := NewStream(window)
	for i, r := range rows {
		s.Add(r)
		if s.Retained() > 2*window {
			t.Fatalf("token %d: %d times retained, want <= %d", i+1, s.Retained(), 2*window)
		}
	}
	o := Options{Warmup: -1, Threads: 2, HasMajflt: true, HasCPU: true}
	got, want := s.Summary(o), Summarize(rows, o)
	if got.Tokens != want.Tokens || got.TotalWallMS != want.TotalWallMS || got.MeanTokS != want.MeanTokS ||
		got.ReadMiB != want.ReadMiB || got.StallShare != want.StallShare || got.CPUOccupancy != want.CPUOccupancy ||
		got.MajfltPerToken != want.MajfltPerToken || got.FinalHitPct != want.FinalHitPct || got.First5WallMS != want.First5WallMS {
		t.Errorf("sums differ:\n got %+v\nwant %+v", got, want)
	}
	if got.WarmupTokens != 30 || want.WarmupTokens != 30 {
		t.Errorf("warm-up %d (Summarize %d), want 30", got.WarmupTokens, want.WarmupTokens)
	}
	if math.Abs(got.SteadyTokS-want.SteadyTokS) > 1e-9*want.SteadyTokS {
		t.Errorf("steady %v, Summarize %v", got.SteadyTokS, want.SteadyTokS)
	}
	if got.LastThirdTokens != window || math.Abs(got.LastThirdTokS-want.LastThirdTokS) > 0.02*want.LastThirdTokS {
		t.Errorf("last third: %d tokens at %v, want %d at about %v", got.LastThirdTokens, got.LastThirdTokS, window, want.LastThirdTokS)
	}
	// No warm-up found in the head: everything before the last window.
	slow := run(10*window, 5*window, 3)
	g := streamOf(slow, window).Summary(o)
	if g.WarmupTokens != 10*window-window || math.Abs(g.SteadyTokS-rate(window, sum(wallOf(slow[9*window:])))) > 1e-9 {
		t.Errorf("warm-up beyond the head: %d tokens, steady %v", g.WarmupTokens, g.SteadyTokS)
	}
	// A forced warm-up: inside the head, reaching into the tail, between them.
	for _, w := range []int{10, len(rows) - 100, 5000} {
		f := Options{Warmup: w, HasMajflt: true, HasCPU: true}
		g, x := s.Summary(f), Summarize(rows, f)
		if g.WarmupTokens != w || !g.WarmupForced {
			t.Errorf("forced %d: %d", w, g.WarmupTokens)
		}
		if w != 5000 && math.Abs(g.SteadyTokS-x.SteadyTokS) > 1e-9*x.SteadyTokS {
			t.Errorf("forced %d: steady %v, Summarize %v", w, g.SteadyTokS, x.SteadyTokS)
		}
	}
}

func wallOf(rows []Token) []float64 {
	w := make([]float64, len(rows))
	for i, r := range rows {
		w[i] = r.WallMS
	}
	return w
}

// TestStreamSmallWindow: a window under 5 tokens summarizes a longer run
// (the first-5 mean over the tokens the window kept) instead of slicing past
// its head.
func TestStreamSmallWindow(t *testing.T) {
	rows := run(40, 3, 11)
	for window := 1; window < 5; window++ {
		got := streamOf(rows, window).Summary(Options{Warmup: -1, Threads: 2})
		var want float64
		for _, r := range rows[:window] {
			want += r.WallMS
		}
		if want /= float64(window); got.First5WallMS != want {
			t.Errorf("window %d: first5_wall_ms %v, want %v (mean of the first %d)", window, got.First5WallMS, want, window)
		}
	}
}
