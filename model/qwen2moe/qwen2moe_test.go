package qwen2moe_test

import (
	"testing"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	_ "github.com/pipe-engine/pipe/model/qwen2moe"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

// TestIntermediatesMatchLlamaCpp compares the F32 model's p0_fox pass layer
// by layer with llama.cpp's dump (goldentest.CheckLayers): the routed
// experts' input (which from layer 1 on carries the previous layer's shared
// expert), the router, the top-k experts and their weights (not
// renormalised), the routed output, the logits. Bound: only the order of
// float sums differs (ggml's AVX-512 dots and SIMD SiLU vs ours); measured
// ≤ 4e-7.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	goldentest.CheckLayers(t, routing, "../../testdata/golden", "tiny-qwen2moe-F32", "ffn_moe_weights", 1e-5)
}

// TestRouter: softmax over all experts, top-k, the weights not renormalised
// (build_moe_ffn with norm_w false).
func TestRouter(t *testing.T) {
	m, _, _ := goldentest.Load(t, "../../testdata/golden/models/tiny-qwen2moe-F32.gguf", model.Options{})
	if s := m.Router(0); s.Normalize || s.Gating != model.SoftmaxTopK || s.K != 2 || s.NExpert != 8 {
		t.Fatalf("router %+v", s)
	}
}
