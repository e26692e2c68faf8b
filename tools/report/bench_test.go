package report

import (
	"math"
	"path/filepath"
	"testing"
)

func analyzeFile(t *testing.T, name string, o Options) *Analysis {
	t.Helper()
	run, err := ReadFile(filepath.Join("testdata", name+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(run, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestSeedNumbers asserts the seed note's figures on the reference CSVs.
func TestSeedNumbers(t *testing.T) {
	tests := []struct {
		name      string
		mean      float64 // seed: mean tok/s, 2 decimals (gpt-oss: 3)
		hit       float64 // seed: final/steady hit %, rounded
		lastThird float64 // seed: last-third tok/s (gpt-oss only), NaN = not stated
		ltTol     float64
		first5    float64 // seed's re-measure table: first-5 wall avg, NaN = not stated
		regime    Regime
	}{
		{"qwen_k8", 4.92, 77, math.NaN(), 0, 367, RegimeIOWarmup},
		{"qwen_k6", 7.01, 80, math.NaN(), 0, math.NaN(), RegimeIOWarmup},
		{"gemma_k8", 4.76, 83, math.NaN(), 0, 329, RegimeIOWarmup},
		{"gemma_k6", 4.79, 83, math.NaN(), 0, math.NaN(), RegimeIOWarmup},
		{"gptoss_k2", 0.163, 20, 0.74, 0.005, math.NaN(), RegimeResidency},
		{"gptoss_k4", 0.134, 13, 1.2, 0.05, 16641, RegimeResidency},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := analyzeFile(t, tc.name, Options{Warmup: -1})
			s := a.Summary
			prec := 0.005
			if tc.mean < 1 {
				prec = 0.0005
			}
			if !near(s.MeanTokS, tc.mean, prec) {
				t.Errorf("mean tok/s = %.4f, want %.3f", s.MeanTokS, tc.mean)
			}
			if math.Round(s.FinalHitPct) != tc.hit {
				t.Errorf("final hit = %.2f, want ≈ %.0f", s.FinalHitPct, tc.hit)
			}
			if !math.IsNaN(tc.lastThird) && !near(s.LastThirdTokS, tc.lastThird, tc.ltTol) {
				t.Errorf("last-third tok/s = %.3f, want ≈ %.2f", s.LastThirdTokS, tc.lastThird)
			}
			if !math.IsNaN(tc.first5) && math.Round(s.First5WallMS) != tc.first5 {
				t.Errorf("first-5 wall = %.1f, want %.0f", s.First5WallMS, tc.first5)
			}
			if a.Verdict.Regime != tc.regime {
				t.Errorf("regime = %s (%s), want %s", a.Verdict.Regime, a.Verdict.Reason, tc.regime)
			}
			if tr, ok := a.Run.TrailerFloat("tok/s"); !ok || !near(tr, s.MeanTokS, 0.0005) {
				t.Errorf("trailer tok/s = %v (%v), computed %.4f", tr, ok, s.MeanTokS)
			}
			t.Logf("%s: warmup=%d steady=%.3f lastthird=%.3f mib/tok=%.1f verdict=%s", tc.name, s.WarmupTokens, s.SteadyTokS, s.LastThirdTokS, s.MiBPerToken, a.Verdict.Reason)
		})
	}
}

// TestSeedStepRows asserts every step row printed in the seed note's tables,
// at the precision the note prints them. The note's own rounding is not
// uniform (gptoss_k4 step 24 io 2688.541 is printed 2688, gemma_k8 step 255
// tok/s 5.2752 as 5.27), so ms values may differ from it by up to 0.6 and
// tok/s by up to 0.006.
func TestSeedStepRows(t *testing.T) {
	type row struct {
		step                   int
		wall, compute, io, hit float64
		tps                    float64
	}
	nan := math.NaN()
	tables := map[string][]row{
		"qwen_k8":   {{1, 742, 521, nan, 4.5, 1.35}, {2, 252, 86, nan, 10.2, 3.97}, {3, 276, 87, nan, 14.2, 3.62}, {254, 200, 102, nan, 77.1, 5.00}, {255, 151, 100, nan, 77.2, 6.62}},
		"qwen_k6":   {{1, 311, 176, nan, 4.8, 3.22}, {2, 170, 75, nan, 10.4, 5.88}, {3, 193, 78, nan, 14.3, 5.19}, {254, 99, 88, nan, 79.9, 10.08}, {255, 131, 89, nan, 79.9, 7.63}},
		"gemma_k8":  {{1, 565, 394, nan, 5.4, 1.77}, {2, 318, 118, nan, 9.5, 3.15}, {3, 211, 108, nan, 15.5, 4.74}, {254, 197, 122, nan, 82.8, 5.08}, {255, 190, 153, nan, 82.8, 5.27}},
		"gemma_k6":  {{1, 3198, 2961, nan, 6.5, 0.31}, {2, 253, 120, nan, 11.7, 3.96}, {3, 184, 110, nan, 17.5, 5.43}, {253, 167, 117, nan, 82.7, 5.98}, {255, 425, 404, nan, 82.8, 2.35}},
		"gptoss_k2": {{1, 18444, 18058, 1435, 0.44, 0.05}, {2, 12048, 11697, 1119, 1.32, 0.08}, {3, 10765, 10498, 753, 2.99, 0.09}, {22, 909, 650, 675, 19.41, 1.10}, {24, 1244, 983, 630, 20.36, 0.80}},
		"gptoss_k4": {{1, 18534, 17859, 4316, 0.31, 0.05}, {2, 17781, 17205, 3386, 1.81, 0.06}, {3, 15984, 15421, 2964, 3.54, 0.06}, {22, 716, 231, 2609, 12.82, 1.40}, {24, 1104, 593, 2688, 13.42, 0.91}},
	}
	for name, want := range tables {
		a := analyzeFile(t, name, Options{Warmup: -1})
		for _, w := range want {
			got, ok := a.Row(w.step)
			if !ok {
				t.Errorf("%s: no step %d", name, w.step)
				continue
			}
			hitPrec := 0.05
			if name[:6] == "gptoss" {
				hitPrec = 0.005
			}
			if !near(got.WallMS, w.wall, 0.6) || !near(got.ComputeMS, w.compute, 0.6) ||
				(!math.IsNaN(w.io) && !near(got.IOMS, w.io, 0.6)) ||
				!near(got.HitPct, w.hit, hitPrec+1e-9) || !near(got.TokS, w.tps, 0.006) {
				t.Errorf("%s step %d = %+v, want %+v", name, w.step, got, w)
			}
		}
	}
}

// Row returns the step-table row of the given step.
func (a *Analysis) Row(step int) (StepRow, bool) {
	for _, t := range a.Run.Rows {
		if t.Step == step {
			return stepRow(t), true
		}
	}
	return StepRow{}, false
}
