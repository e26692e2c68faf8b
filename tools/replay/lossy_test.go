package replay

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

// lossyTrace: one layer of 4 one-byte experts, top-2. The prompt routes
// experts 0 and 1 (resident after it); decode token 1 routes 0 (0.7) and 2
// (0.3), token 2 routes 2 (0.6) and 3 (0.4).
const lossyTrace = Magic + `
# model=/tmp/m.gguf arch=test n_layer=1 n_expert=4 n_expert_used=2
# layer=0 expert_bytes=1 dense_bytes=100
` + Columns + `
0,0,0,0,0,0,0.6,0,1
0,0,0,0,1,1,0.4,0,1
0,1,1,0,0,0,0.7,1,0
0,1,1,0,1,2,0.3,0,1
0,1,2,0,0,2,0.6,0,1
0,1,2,0,1,3,0.4,0,1
`

// TestLossyReplayHandComputed: with drop F = 1 (threshold 0.5) token 1's
// missed expert 2 (0.3) is not read; token 2's expert 2 (0.6, still missed)
// is read and its expert 3 (0.4, missed) is not: 1 byte read against
// lossless's 2, 0.7 of 2.0 weight discarded, 2 of 4 slots skipped. topk=1
// keeps each token's first slot.
func TestLossyReplayHandComputed(t *testing.T) {
	s := compileString(t, lossyTrace)
	modes, err := ParseLossyModes("drop=1,topk=1")
	if err != nil {
		t.Fatal(err)
	}
	r, err := LossySweep("hand", s, "lru", []int64{4}, modes, 1)
	if err != nil {
		t.Fatal(err)
	}
	off, drop, top1 := r.Results[0][0], r.Results[1][0], r.Results[2][0]
	if off.Mode != "off" || off.MiBPerTok*mib*2 != 2 || off.HitPct != 50 {
		t.Fatalf("lossless: %+v (want 2 bytes read over 2 tokens, 50 %% hits)", off)
	}
	if drop.MiBPerTok*mib*2 != 1 || drop.ReadsAvoidedPct != 50 || math.Abs(drop.WeightCutPct-35) > 1e-4 || drop.SkippedPct != 50 || drop.HitPct != 50 {
		t.Fatalf("drop=1: %+v", drop)
	}
	// topk=1: token 1 keeps 0 (hit), token 2 keeps 2 (miss).
	if top1.MiBPerTok*mib*2 != 1 || top1.SkippedPct != 50 || math.Abs(top1.WeightCutPct-35) > 1e-4 {
		t.Fatalf("topk=1: %+v", top1)
	}
}

// TestLossyReplayOffIsTheReplay: the lossless row equals the plain replay's
// numbers on a real trace.
func TestLossyReplayOffIsTheReplay(t *testing.T) {
	s := loadReal(t, "qwen")
	r, err := LossySweep("qwen", s, "layer", []int64{1000 * mib}, []LossyMode{{Name: "off"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	plain := run(t, s, "layer", 1000*mib, CountDecode, 1)
	if got := r.Results[0][0]; got.HitPct != plain.HitRate() || got.MiBPerTok != plain.MiBPerToken() {
		t.Fatalf("lossy replay off %+v, replay %v %% / %v MiB", got, plain.HitRate(), plain.MiBPerToken())
	}
}

func TestParseLossyModes(t *testing.T) {
	m, err := ParseLossyModes("drop=0.75, dynamic-k=0.9,topk=4")
	if err != nil || len(m) != 4 || m[0].Name != "off" || m[1].Lossy.Drop != 0.75 || m[2].Lossy.DynamicK != 0.9 || m[3].TopK != 4 {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []string{"substitute=0.1", "drop=2", "topk=1.5", "topk=0", "warp=1", "drop"} {
		if _, err := ParseLossyModes(bad); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	var b bytes.Buffer
	r := &LossyReport{Trace: "t", Results: [][]LossyResult{{{Mode: "off", BudgetMiB: 1}}}}
	if err := r.Write(&b, true); err != nil || !strings.Contains(b.String(), "| off | 1 |") {
		t.Fatalf("markdown: %q %v", b.String(), err)
	}
}
