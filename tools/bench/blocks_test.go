package bench

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
)

const goldenModels = "../../testdata/golden/models/"

// goldenHP is the hyper-parameters of a golden model.
func goldenHP(t *testing.T, path string) *model.HParams {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	return &d.HParams
}

// wantWork is the token work the hyper-parameters imply at a depth of
// positions: per attention layer positions × KV heads × head dim × 2 (K
// and V); per delta-net layer the S×S state of every value head (state
// size × inner size) read and written and the convolution's taps over its
// q, k and v channels.
func wantWork(hp *model.HParams, positions int) model.TokenWork {
	g := &hp.SSM
	var w model.TokenWork
	for il := 0; il < hp.NLayer; il++ {
		if g.IsRecurrent(il) {
			w.Recurrent += int64(2 * g.StateSize * g.InnerSize)
			w.Conv += int64(g.ConvKernel * (g.InnerSize + 2*g.GroupCount*g.StateSize))
			continue
		}
		w.Attention += int64(positions * hp.NHeadKV * hp.HeadDim * 2)
	}
	return w
}

// TestBlockWorkGolden: on the tiny qwen3moe (attention only) and qwen35moe
// (gated delta-net and attention) goldens, the block terms are the ones
// the hyper-parameters imply, the attention term doubles with the depth
// and the recurrent terms do not move with it.
func TestBlockWorkGolden(t *testing.T) {
	for _, c := range []struct {
		file      string
		recurrent bool
	}{{"tiny-qwen3moe-F32.gguf", false}, {"tiny-qwen35moe-F32.gguf", true}} {
		path := goldenModels + c.file
		hp := goldenHP(t, path)
		var prev model.TokenWork
		for _, pos := range []int{100, 200} {
			b, err := blockWork(path, pos)
			if err != nil {
				t.Fatal(err)
			}
			if want := wantWork(hp, pos); b.Elems != want || b.Positions != pos {
				t.Fatalf("%s at %d: work %+v (depth %d), want %+v", c.file, pos, b.Elems, b.Positions, want)
			}
			if b.Elems.Attention == 0 || (b.Elems.Recurrent > 0) != c.recurrent || (b.Elems.Conv > 0) != c.recurrent {
				t.Fatalf("%s: work %+v: want attention, and recurrent and conv terms only in the recurrent model", c.file, b.Elems)
			}
			if pos == 200 && (b.Elems.Attention != 2*prev.Attention || b.Elems.Recurrent != prev.Recurrent || b.Elems.Conv != prev.Conv) {
				t.Fatalf("%s: work %+v at 200, %+v at 100: attention should double, the rest stay", c.file, b.Elems, prev)
			}
			prev = b.Elems
		}
	}
}

// TestBlockWorkShortConv: the tiny lfm2moe golden's work is, per layer
// with KV heads, positions × its KV heads × head dim × 2, and per
// short-conv layer (no KV heads) shortconv.l_cache × n_embd, no recurrent
// state.
func TestBlockWorkShortConv(t *testing.T) {
	path := goldenModels + "tiny-lfm2moe-F32.gguf"
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.GetUint("lfm2moe.shortconv.l_cache")
	if err != nil {
		t.Fatal(err)
	}
	hp := goldenHP(t, path)
	const pos = 50
	var want model.TokenWork
	for il := 0; il < hp.NLayer; il++ {
		if kv := hp.HeadCountKVLayers[il]; kv > 0 {
			want.Attention += int64(pos * kv * hp.HeadDim * 2)
		} else {
			want.Conv += int64(l) * int64(hp.NEmbd)
		}
	}
	b, err := blockWork(path, pos)
	if err != nil {
		t.Fatal(err)
	}
	if b.Elems != want || want.Attention == 0 || want.Conv == 0 {
		t.Fatalf("work %+v, want %+v (attention and conv both present)", b.Elems, want)
	}
}

// TestRooflineBlocks: the measured roofline of the tiny qwen35moe carries
// its blocks' work, times it in the compute term, and names it in its
// line and its JSON.
func TestRooflineBlocks(t *testing.T) {
	path := goldenModels + "tiny-qwen35moe-F32.gguf"
	r, err := MeasureRoofline(context.Background(), path, 1, 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	if want := wantWork(goldenHP(t, path), 64); r.Blocks.Elems != want {
		t.Fatalf("blocks %+v, want %+v", r.Blocks.Elems, want)
	}
	if !(r.Blocks.GBsT2 > 0) || !(r.Blocks.Seconds(2) > 0) || !(r.computeTime(2) > computeSeconds(r.Compute, 2)) {
		t.Fatalf("blocks rate %g GB/s, %g s: want a measured rate and a compute term above the weights' alone", r.Blocks.GBsT2, r.Blocks.Seconds(2))
	}
	s := r.String(false)
	for _, w := range []string{"blocks at depth 64", "attention ", "recurrent ", "conv ", "blocks "} {
		if !strings.Contains(s, w) {
			t.Fatalf("String without %q: %s", w, s)
		}
	}
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"blocks":{`) || !strings.Contains(string(b), `"recurrent":`) {
		t.Fatalf("json %s, %v: want the blocks' work", b, err)
	}
}

// TestRunRatesBlocks: each run's rates name the blocks' share of its
// compute term: 1 GB of weights at 10 GB/s and 250 M elements (1 GB) at
// 40 GB/s are 100 ms and 25 ms, 20 %.
func TestRunRatesBlocks(t *testing.T) {
	rf := &Roofline{TokenBytes: 1e9, MemGBs: [2]float64{10, 20}, DiskGBs: math.NaN(),
		Compute: []TypeRate{{Type: "Q4_K", Bytes: 1e9, GBsT1: 5, GBsT2: 10}},
		Blocks:  BlockWork{Elems: model.TokenWork{Attention: 200e6, Recurrent: 50e6}, GBsT1: 20, GBsT2: 40}}
	rep := &Report{Runs: []RunResult{{Label: "a", Rep: 1, Roofline: rf}}}
	if s := rep.runRates(); !strings.Contains(s, "compute 8.00 tok/s (blocks 20 %)") {
		t.Fatalf("runRates: %s", s)
	}
	if tokS, by := rf.Bound(2, 0); by != BoundCompute || math.Abs(tokS-8) > 1e-9 {
		t.Fatalf("bound %g tok/s by %s, want 8 by compute", tokS, by)
	}
}
