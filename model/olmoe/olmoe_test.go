package olmoe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/model/olmoe"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

// TestIntermediatesMatchLlamaCpp compares the F32 model's p0_fox pass layer
// by layer with llama.cpp's dump (goldentest.CheckLayers): the routed
// experts' input (after attention with the whole-projection Q/K norms), the
// router, the top-k experts and their weights (not renormalised), the
// routed output, the logits. Bound: only the order of float sums differs;
// measured ≤ 4e-7.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	goldentest.CheckLayers(t, routing, "../../testdata/golden", "tiny-olmoe-F32", "ffn_moe_weights", 1e-5)
}

// TestRefusesGQA: llama.cpp's attn_k_norm is n_embd wide, so an olmoe file
// with fewer KV heads than heads is refused, naming the heads.
func TestRefusesGQA(t *testing.T) {
	d, raw := goldentest.Open(t, "../../testdata/golden/models/tiny-olmoe-F32.gguf")
	d.HParams.NHeadKV = 2
	pool := kernels.NewPool(1)
	defer pool.Close()
	_, err := model.New(d, goldentest.FileSource(raw), model.Options{Pool: pool})
	if !errors.Is(err, model.ErrBadModel) || !strings.Contains(err.Error(), "2 KV heads") {
		t.Fatalf("olmoe with 2 KV heads of 4: %v", err)
	}
}

// TestRouter: softmax over all experts, top-k, the weights not renormalised
// (build_moe_ffn with norm_w false).
func TestRouter(t *testing.T) {
	m, _, _ := goldentest.Load(t, "../../testdata/golden/models/tiny-olmoe-F32.gguf", model.Options{})
	if s := m.Router(0); s.Normalize || s.Gating != model.SoftmaxTopK || s.K != 2 || s.NExpert != 8 {
		t.Fatalf("router %+v", s)
	}
}

// TestFamily: olmoe is one registered value for the engine and for gen,
// and sizes its state as the KV cache of every layer (3 layers × K and V
// of 4 heads × 64 × 2 bytes per position for tiny-olmoe).
func TestFamily(t *testing.T) {
	f, ok := model.Lookup("olmoe")
	if _, isOLMoE := f.(olmoe.Family); !ok || !isOLMoE {
		t.Fatalf("model.Lookup(olmoe) = %T, %v", f, ok)
	}
	p, err := gen.LookupPreset("olmoe-tiny")
	if err != nil || p.Arch != "olmoe" {
		t.Fatalf("gen.LookupPreset(olmoe-tiny) = %+v, %v", p, err)
	}
	d, _ := goldentest.Open(t, "../../testdata/golden/models/tiny-olmoe-F32.gguf")
	if got, want := model.StateBytes(d, 512, 2), int64(3*2*4*64*2*512); got != want {
		t.Fatalf("StateBytes(512 positions, f16) = %d, want %d", got, want)
	}
	if got := model.StateBytes(d, 1<<60, 4); got != 1<<62 {
		t.Fatalf("StateBytes(2^60 positions) = %d, want the 1<<62 saturation", got)
	}
}
