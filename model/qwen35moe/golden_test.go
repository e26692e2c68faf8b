package qwen35moe_test

import (
	"testing"

	"github.com/pipe-engine/pipe/model/goldentest"
)

const golden = "../../testdata/golden"

// TestIntermediatesMatchLlamaCpp runs the golden F32 model on p0_fox and
// compares, layer by layer, with llama.cpp's dump of the same pass: the FFN
// input (attn_post_norm: the delta-net or gated attention output through
// the residual and the norm), the router logits, the top-2 experts and
// their renormalised weights, and the routed-expert output; the last
// position's logits last. A divergence shows at its first layer and op. The
// only differences are float summation orders (ggml's SIMD dot products,
// and its delta rule's, vs ours), a few 1e-7 relative; bound 1e-5.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	goldentest.CheckLayersFrom(t, routing, golden, "tiny-qwen35moe-F32", "attn_post_norm", "ffn_moe_weights_norm", 1e-5)
}
