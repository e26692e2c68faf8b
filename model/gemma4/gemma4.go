// Package gemma4 is Google's Gemma-4 MoE architecture (Gemma-4-26B-A4B),
// following llama.cpp's src/models/gemma4.cpp graph and build_moe_ffn:
//
//	x = embd(tokens) · √n_embd
//	per layer ℓ (sliding-window or full, per attention.sliding_window_pattern):
//	  h = RMSNorm(x)·attn_norm
//	  q = RoPE(RMSNorm(Wq h)·q_norm), k = RoPE(RMSNorm(Wk h)·k_norm) per head,
//	  v = RMSNorm(Wv h) per head, without a weight (v = Wk h when attn_v is absent)
//	  causal attention with scale 1, sliding layers see the last sliding_window positions
//	  a = x + RMSNorm(Wo attn)·post_attention_norm                  (the attention output)
//	  mlp = Wdown geglu(Wgate n1, Wup n1), n1 = RMSNorm(a)·ffn_norm   (dense MLP beside the experts)
//	  MoE layers: mlp = RMSNorm(mlp)·post_ffw_norm_1
//	              logits = Wgate_inp (RMSNorm(a) / √n_embd · ffn_gate_inp.scale)
//	              moe = RMSNorm(Σ_rank w_r · s_e · down_e(geglu(gate_up_e n2)))·post_ffw_norm_2,
//	              n2 = RMSNorm(a)·pre_ffw_norm_2, w = softmax, top-k, renormalised
//	              mlp = mlp + moe
//	  x = (a + RMSNorm(mlp)·post_ffw_norm) · layer_output_scale
//	logits = cap·tanh(Woutput RMSNorm(x)·output_norm / cap)  (tied to token_embd when output is absent)
//
// Per layer type the file gives its own head count, KV head count, head
// width (key_length vs key_length_swa), rotated dims (rope.dimension_count vs
// rope.dimension_count_swa) and RoPE base (rope.freq_base vs
// rope.freq_base_swa); full layers divide their angles by rope_freqs.weight
// ("proportional" RoPE). geglu(g, u) = gelu(g)·u with ggml's F16 GELU table;
// s_e is ffn_down_exps.scale. The expert up/gate projections are fused
// (ffn_gate_up_exps: gate rows then up rows) or separate. Per-layer
// embeddings (embedding_length_per_layer_input) and KV sharing
// (attention.shared_kv_layers) are refused with model.ErrUnsupportedArch.
//
// The routed experts are computed behind model.MoE; this package supplies
// their math (model.Experts with GEGLU, fused or separate gate and up, and
// the output scales) and the gating rule. The router input handed to
// a model.RouterInputMoE (and read by PeekRouter) is the attention output a,
// so next-layer prefetch applies layer ℓ+1's whole router (norm, scales,
// matrix) to layer ℓ's attention output.
//
// The package is the whole family (family.Family, family.go; its `pipe
// gen` presets, tensors and metadata in gen.go). It registers itself as
// "gemma4" on import.
//
// Buffers: dense weights are borrowed from the DenseSource for the model's
// lifetime; norms, scales and rope factors are copied to float32 at load.
// The expert math only reads the model and writes the caller's buffers, so
// it is safe for concurrent use; Forward on one State is not re-entrant.
package gemma4

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
)

// Model is a loaded Gemma-4: the shared decoder skeleton with gemma4's FFN
// hook per layer, plus the expert math.
type Model struct {
	*model.Decoder
	*model.Experts
	d          *model.Desc
	nEmbd, nFF int // nFF: expert feed-forward length
	nExpert, k int
}

// New builds a Gemma-4 model from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	if err := checkSupported(hp); err != nil {
		return nil, err
	}
	geoms, err := layerGeoms(hp)
	if err != nil {
		return nil, err
	}
	m := &Model{d: d, nEmbd: hp.NEmbd, nFF: hp.NFFExp, nExpert: hp.NExpert, k: k}
	if m.nEmbd <= 0 || m.nExpert <= 0 || m.k <= 0 || m.nFF <= 0 || hp.RMSEps <= 0 {
		return nil, fmt.Errorf("%w: gemma4 hyper-parameters %+v", model.ErrBadModel, hp)
	}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: hp.RMSEps, Timings: opt.Timings, Clock: opt.Clock,
		EmbdScale: sqrtf(float32(hp.NEmbd)), Softcap: hp.FinalLogitSoftcap}
	m.Experts = &model.Experts{Arch: "gemma4", Pool: opt.Pool, NEmbd: m.nEmbd, NFF: m.nFF, NExpert: m.nExpert, Act: model.GEGLU}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	var ropeFreqs []float32
	for l, g := range geoms {
		if g.Window == 0 { // full attention: proportional RoPE through rope_freqs
			if ropeFreqs == nil {
				ropeFreqs = ld.Vector("rope_freqs.weight", g.HeadDim/2)
			}
			r := g.Rope.(model.Rope)
			r.FreqFactors = ropeFreqs
			g.Rope = r
		}
		a := loadAttention(ld, l, m.nEmbd, g)
		m.Layers = append(m.Layers, model.Layer{Attn: a, FFN: m.loadFFN(ld, l)})
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// checkSupported refuses the gemma4 features llama.cpp has and this package
// does not implement, naming their keys.
func checkSupported(hp model.HParams) error {
	if hp.EmbdPerLayer > 0 {
		return fmt.Errorf("%w: gemma4: per-layer embeddings (gemma4.embedding_length_per_layer_input = %d) are not implemented", model.ErrUnsupportedArch, hp.EmbdPerLayer)
	}
	if hp.SharedKVLayers > 0 {
		return fmt.Errorf("%w: gemma4: KV sharing (gemma4.attention.shared_kv_layers = %d) is not implemented", model.ErrUnsupportedArch, hp.SharedKVLayers)
	}
	return nil
}

// loadAttention loads layer l's attention: Q/K norms, the weightless V
// norm, the post-attention norm; attn_v is optional (V = K's projection).
func loadAttention(ld *model.Loader, l, nEmbd int, g model.Geom) model.Attention {
	p := fmt.Sprintf("blk.%d.", l)
	a := model.Attention{Geom: g,
		Norm:     ld.Vector(p+"attn_norm.weight", nEmbd),
		Wq:       ld.Matrix(p+"attn_q.weight", nEmbd, g.QDim()),
		Wk:       ld.Matrix(p+"attn_k.weight", nEmbd, g.KVDim()),
		Wo:       ld.Matrix(p+"attn_output.weight", g.QDim(), nEmbd),
		QNorm:    ld.Vector(p+"attn_q_norm.weight", g.HeadDim),
		KNorm:    ld.Vector(p+"attn_k_norm.weight", g.HeadDim),
		VNorm:    true,
		PostNorm: ld.Vector(p+"post_attention_norm.weight", nEmbd),
	}
	a.Wv, _ = ld.OptionalMatrix(p+"attn_v.weight", nEmbd, g.KVDim())
	return a
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model: softmax over all experts, top-k,
// renormalised (build_moe_ffn with SOFTMAX gating and norm_w).
func (m *Model) Router(int) model.RouterSpec {
	return model.RouterSpec{Gating: model.SoftmaxTopK, NExpert: m.nExpert, K: m.k, Normalize: true}
}
