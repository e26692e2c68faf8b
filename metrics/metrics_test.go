package metrics

import (
	"math"
	"testing"
)

func TestWarmupEnd(t *testing.T) {
	tests := []struct {
		name string
		wall []float64
		want int
	}{
		{"empty", nil, 0},
		{"one", []float64{500}, 0},
		{"flat", []float64{100, 100, 100, 100, 100, 100}, 0},
		{"cold first token", []float64{900, 100, 110, 100, 105, 100, 100, 100, 100}, 1},
		// A lone fast token inside a slow head does not end the warm-up: the
		// window median behind it is still slow.
		{"lucky token in head", []float64{900, 900, 100, 900, 900, 900, 100, 100, 100, 100, 100, 100}, 6},
		// A spike after the steady state is reached does not move the end.
		{"late spike", []float64{800, 100, 100, 100, 100, 100, 900, 100, 100}, 1},
		// Still falling: the end is the first token within 1.5× of the last
		// third's median (150 ms).
		{"monotone", []float64{1000, 800, 600, 400, 200, 100}, 4},
		{"threshold inclusive", []float64{150, 100, 100, 100, 100, 100}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := WarmupEnd(tc.wall); got != tc.want {
				t.Errorf("WarmupEnd(%v) = %d, want %d", tc.wall, got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	rows := []Token{
		{Step: 1, WallMS: 1000, IOMS: 500, ComputeMS: 900, ReadBytes: 2 << 20, CacheHitPct: 0, StallMS: 100, MgmtMS: 10, Majflt: 30, CPUMS: 3000},
		{Step: 2, WallMS: 100, IOMS: 50, ComputeMS: 90, ReadBytes: 1 << 20, CacheHitPct: 50, StallMS: 10, MgmtMS: 1, Majflt: 0, CPUMS: 300},
		{Step: 3, WallMS: 100, IOMS: 50, ComputeMS: 90, ReadBytes: 1 << 20, CacheHitPct: 60, StallMS: 10, MgmtMS: 1, Majflt: 0, CPUMS: 300},
	}
	s := Summarize(rows, Options{Warmup: -1, Threads: 4, HasMajflt: true, HasCPU: true})
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Tokens != 3 || s.WarmupTokens != 1 || s.WarmupForced || s.LastThirdTokens != 1 {
		t.Fatalf("tokens/warmup/third = %d/%d/%v/%d", s.Tokens, s.WarmupTokens, s.WarmupForced, s.LastThirdTokens)
	}
	check("mean", s.MeanTokS, 3000.0/1200)
	check("steady", s.SteadyTokS, 10)
	check("first5", s.First5WallMS, 400)
	check("lastthird", s.LastThirdTokS, 10)
	check("finalhit", s.FinalHitPct, 60)
	check("readMiB", s.ReadMiB, 4)
	check("MiB/token", s.MiBPerToken, 4.0/3)
	check("stall", s.StallShare, 120.0/1200)
	check("mgmt", s.MgmtShare, 12.0/1200)
	check("cpu", s.CPUOccupancy, 3600.0/(1200*4))
	check("majflt", s.MajfltPerToken, 10)
	check("head", s.ComputeHeadMS, 900)
	check("tail", s.ComputeTailMS, 90)

	f := Summarize(rows, Options{Warmup: 7})
	if f.WarmupTokens != 2 || !f.WarmupForced {
		t.Errorf("forced warmup clamp: %d %v", f.WarmupTokens, f.WarmupForced)
	}
	check("forced steady", f.SteadyTokS, 10)
	if !math.IsNaN(f.CPUOccupancy) || !math.IsNaN(f.MajfltPerToken) {
		t.Errorf("absent columns must give NaN: %v %v", f.CPUOccupancy, f.MajfltPerToken)
	}
	e := Summarize(nil, Options{Warmup: -1})
	if e.Tokens != 0 || !math.IsNaN(e.MeanTokS) || !math.IsNaN(e.SteadyTokS) {
		t.Errorf("empty run: %+v", e)
	}
}
