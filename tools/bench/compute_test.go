package bench

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// TestMeasureCompute measures the kernels on every weight format of the
// tiny model: the formats split the token's bytes exactly, each rate is
// positive and finite, and the report names the compute term.
func TestMeasureCompute(t *testing.T) {
	path := tinyMoE(t, t.TempDir())
	r, err := MeasureRoofline(context.Background(), path, 1, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Compute) < 2 {
		t.Fatalf("%d formats measured, want the tiny model's (at least 2)", len(r.Compute))
	}
	var sum int64
	for i, tr := range r.Compute {
		sum += tr.Bytes
		if tr.hot == nil {
			t.Errorf("%s: no kernel measured", tr.Type)
		}
		for _, g := range []float64{tr.GBsT1, tr.GBsT2} {
			if !(g > 0) || math.IsInf(g, 0) {
				t.Errorf("%s: rates %g and %g GB/s, want positive and finite", tr.Type, tr.GBsT1, tr.GBsT2)
			}
		}
		if i > 0 && tr.Bytes > r.Compute[i-1].Bytes {
			t.Errorf("formats not in order of bytes: %s %d after %s %d", tr.Type, tr.Bytes, r.Compute[i-1].Type, r.Compute[i-1].Bytes)
		}
	}
	if sum != r.TokenBytes {
		t.Fatalf("the formats hold %d bytes, the token %d", sum, r.TokenBytes)
	}
	if c := computeSeconds(r.Compute, 2); !(c > 0) {
		t.Fatalf("compute time %g s per token", c)
	}
	if s := r.String(false); !strings.Contains(s, "kernels on cached rows") || !strings.Contains(s, " bounds (memory ") {
		t.Fatalf("String: %s", s)
	}
}

// TestTypeRatesNoKernel: a format without a kernel gets no hot matrix, null
// rates in JSON, and no part in the compute term.
func TestTypeRatesNoKernel(t *testing.T) {
	rates, err := typeRates(map[quant.Type]int64{quant.Q8_K: 1 << 20, quant.Q8_0: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != 2 || rates[0].Type != quant.Q8_K.String() || rates[0].hot != nil || rates[1].hot == nil {
		t.Fatalf("rates %+v: want Q8_K (no kernel) first, then Q8_0 with a hot matrix", rates)
	}
	if err := measureCompute(context.Background(), rates); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(rates[0].GBsT1) || !(rates[1].GBsT2 > 0) {
		t.Fatalf("rates %+v", rates)
	}
	if got, want := computeSeconds(rates, 2), float64(1<<10)/(rates[1].GBsT2*1e9); got != want {
		t.Fatalf("compute %g s, want Q8_0's alone %g", got, want)
	}
	b, err := json.Marshal(rates)
	if err != nil || !strings.Contains(string(b), `"GB_s_t1":null`) {
		t.Fatalf("json %s, %v: want a null rate", b, err)
	}
}

// TestRemeasureOwnRates: a remeasured copy does not write the rates of the
// roofline it was copied from (each run keeps its own).
func TestRemeasureOwnRates(t *testing.T) {
	rates, err := typeRates(map[quant.Type]int64{quant.Q4_K: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := &Roofline{TokenBytes: 1 << 20, Compute: rates, DiskGBs: math.NaN()}
	r.Compute[0].GBsT1, r.Compute[0].GBsT2 = -1, -1
	c, err := r.Remeasure(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !(c.Compute[0].GBsT1 > 0) || r.Compute[0].GBsT1 != -1 || r.Compute[0].GBsT2 != -1 {
		t.Fatalf("copy %+v, original %+v", c.Compute[0], r.Compute[0])
	}
}

// TestReportBoundBy: each run carries the term that bounds it, a
// configuration the terms of its runs, and the table shows them.
func TestReportBoundBy(t *testing.T) {
	mem := &Roofline{TokenBytes: 1e9, MemGBs: [2]float64{10, 20}, DiskGBs: math.NaN()}
	cpu := &Roofline{TokenBytes: 1e9, MemGBs: [2]float64{10, 20}, DiskGBs: math.NaN(),
		Compute: []TypeRate{{Type: "Q4_K", Bytes: 1e9, GBsT1: 5, GBsT2: 10}}}
	summary := map[string]string{"threads": "2"}
	rep := &Report{Repeat: 2, Roofline: mem, Configs: []ConfigStats{{Label: "a"}}, Runs: []RunResult{
		{Config: 0, Rep: 1, Summary: summary, SteadyTokS: 5, Roofline: mem},
		{Config: 0, Rep: 2, Summary: summary, SteadyTokS: 5, Roofline: cpu},
	}}
	rep.aggregate()
	if rep.Runs[0].BoundBy != BoundMemory || rep.Runs[1].BoundBy != BoundCompute || rep.Runs[1].BoundTokS != 10 {
		t.Fatalf("runs bound by %q and %q (%g tok/s)", rep.Runs[0].BoundBy, rep.Runs[1].BoundBy, rep.Runs[1].BoundTokS)
	}
	if got := rep.Configs[0].BoundBy; got != "memory/compute" {
		t.Fatalf("config bound by %q, want memory/compute", got)
	}
	var b strings.Builder
	if err := rep.Write(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| bound by |") || !strings.Contains(b.String(), "| memory/compute |") {
		t.Fatalf("table without the bounding term:\n%s", b.String())
	}
}
