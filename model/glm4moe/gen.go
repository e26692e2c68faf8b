package glm4moe

// gen.go: the generator side of the glm4moe family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_GLM4_MOE hyper-parameters
// and tensors (conversion/glm.py's Glm4MoeModel writes the keys; the
// tensors are what llama_model_glm4_moe::load_arch_tensors creates):
// block_count counts the NextN layers, which carry a whole decoder block
// plus their nextn.* tensors.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// shape is what a glm4moe preset has beyond gen.Preset's fields.
type shape struct {
	nextn  int  // nextn_predict_layers: the last blocks of NLayer
	qkNorm bool // attn_q_norm / attn_k_norm (GLM-4.5 355B's use_qk_norm)
	// nextnFull: the NextN layers also carry llama.cpp's optional
	// nextn.embed_tokens and nextn.shared_head_head
	nextnFull bool
}

// shapes are the presets' extra shape, by preset name.
var shapes = map[string]shape{
	"glm4moe-tiny": {nextn: 1, qkNorm: true, nextnFull: true},
	"glm-4.5-air":  {nextn: 1},
}

// nextnOf is preset p's NextN layers: its shape's, fewer when --layers
// keeps too few blocks for them and one run layer.
func nextnOf(p *gen.Preset) int { return max(min(shapes[p.Name].nextn, p.NLayer-1), 0) }

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			// zai-org/GLM-4.5-Air config.json (Glm4MoeForCausalLM). The search
			// tool did not return that file itself; each value below is the
			// Air config's as published, and where it was checked, the text
			// it was checked against:
			//  [V] GLM-4.5V's config.json text_config (the same 106B-A12B
			//      language model; a dump of it found in a public repository),
			//  [S] slime's scripts/models/glm4.5-106B-A12B.sh (Megatron args
			//      of the Air shape), [C] llama.cpp conversion/glm.py.
			// num_hidden_layers 46 [V, S: 1 dense + 45 MoE] + num_nextn_predict_layers
			// 1 (the Air card's MTP layer) = block_count 47 [C adds them];
			// hidden_size 4096 [V, S]; num_attention_heads 96 [V, S];
			// num_key_value_heads 8 [V, S]; head_dim 128 [V, S kv-channels];
			// partial_rotary_factor 0.5 [V, S rotary-percent] → rope.dimension_count
			// 64 [C]; n_routed_experts 128 [V]; num_experts_per_tok 8 [V];
			// moe_intermediate_size 1408 [V, S]; intermediate_size 10944 [V, S];
			// first_k_dense_replace 1 [V]; n_shared_experts 1 [V];
			// routed_scaling_factor 1.0 [V]; norm_topk_prob true [V];
			// rms_norm_eps 1e-05 [V]; vocab_size 151552 [V, S]; attention_bias
			// true [V: q/k/v biased, o not; S add-qkv-bias]; use_qk_norm false
			// [V]; sigmoid scoring with e_score_correction_bias [V's weights,
			// S] (exp_probs_b); rope_theta 1000000 [S rotary-base; GLM-4.5V's
			// own is 10000]; max_position_embeddings 131072 (the Air card's 128K
			// context; GLM-4.5V's is 65536).
			Name: "glm-4.5-air", Arch: "glm4moe", ModelName: "GLM-4.5-Air (synthetic)",
			Description: "zai-org/GLM-4.5-Air config.json; llama.cpp src/models/glm4-moe.cpp",
			NLayer:      46 + 1, NEmbd: 4096, NHead: 96, NHeadKV: 8, HeadDim: 128, NRot: 64,
			NExpert: 128, NExpertUsed: 8, NFFExp: 1408, NFF: 10944, NCtxTrain: 131072,
			RopeBase: 1e6, RMSEps: 1e-5, Vocab: 151552, DefaultQuant: "Q4_K_M",
			LeadingDense: 1, NShared: 1, GatingFunc: 2, WeightsNorm: true, WeightsScale: 1, ProbsBias: true,
			Tokenizer: airTokenizer(),
		},
		{
			// GLM-4.5-Air's paths scaled down, with GLM-4.5 355B's Q/K norms,
			// GLM-4.6/4.7's routed_scaling_factor 2.5 and a NextN layer
			// carrying every optional nextn tensor
			Name: "glm4moe-tiny", Arch: "glm4moe", ModelName: "tiny-random-glm4moe",
			Description: "glm-4.5-air scaled down, with q/k norms",
			NLayer:      3 + 1, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64, NRot: 32,
			NExpert: 16, NExpertUsed: 4, NFFExp: 128, NFF: 512, NCtxTrain: 4096,
			RopeBase: 1e6, RMSEps: 1e-5, Vocab: 512, DefaultQuant: "Q4_K_M",
			LeadingDense: 1, NShared: 1, GatingFunc: 2, WeightsNorm: true, WeightsScale: 2.5, ProbsBias: true,
		},
	}
}

// CheckPreset implements gen.Family: a known shape, partial rotation of
// an even number of dims within the head, dense layers before the NextN
// ones (with --layers 1, none: the one block is run), the selection bias
// llama.cpp requires.
func (Family) CheckPreset(p *gen.Preset) error {
	_, ok := shapes[p.Name]
	switch {
	case !ok:
		return fmt.Errorf("%w: glm4moe preset %q has no NextN / q-k norm shape", gen.ErrBadOptions, p.Name)
	case p.NRot <= 0 || p.NRot%2 != 0 || p.NRot > p.HeadDim:
		return fmt.Errorf("%w: glm4moe preset %q: NRot %d must be even and <= HeadDim %d", gen.ErrBadOptions, p.Name, p.NRot, p.HeadDim)
	case p.LeadingDense > p.NLayer-nextnOf(p):
		return fmt.Errorf("%w: glm4moe preset %q: %d NextN and %d dense layers of %d", gen.ErrBadOptions, p.Name, nextnOf(p), p.LeadingDense, p.NLayer)
	case !p.ProbsBias || p.GatingFunc != 2:
		return fmt.Errorf("%w: glm4moe preset %q needs sigmoid gating with exp_probs_b", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Metadata implements gen.Family: the converter's keys (set_gguf_parameters
// then Glm4MoeModel's own).
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	return append(gen.AttentionMoEMeta(p),
		gen.MetaKV{Key: "rope.dimension_count", Value: u32(p.NRot)},
		gen.MetaKV{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		gen.MetaKV{Key: "expert_shared_count", Value: u32(p.NShared)},
		gen.MetaKV{Key: "leading_dense_block_count", Value: u32(p.LeadingDense)},
		gen.MetaKV{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
		gen.MetaKV{Key: "expert_weights_scale", Value: p.WeightsScale},
		gen.MetaKV{Key: "expert_weights_norm", Value: p.WeightsNorm},
		gen.MetaKV{Key: "nextn_predict_layers", Value: u32(nextnOf(p))})
}

// Tensors implements gen.Family.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	sh := shapes[p.Name]
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, sh, il)...)
		if il >= p.NLayer-nextnOf(p) {
			ts = append(ts, nextnBlockTensors(p, sh, il, vocab)...)
		}
	}
	return ts
}

// blockTensors is block il: attention with q/k/v biases (and per-head
// q/k norms), post_attention_norm, then a dense FFN (the leading layers)
// or the router with its selection bias, routed and shared experts.
func blockTensors(p *gen.Preset, sh shape, il int) []gen.TensorSpec {
	E, hd := p.NEmbd, p.HeadDim
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("attn_q.weight", gen.RoleProj, E, hd*p.NHead),
		t("attn_k.weight", gen.RoleProj, E, hd*p.NHeadKV),
		t("attn_v.weight", gen.RoleProj, E, hd*p.NHeadKV),
		t("attn_q.bias", gen.RoleBias, hd*p.NHead),
		t("attn_k.bias", gen.RoleBias, hd*p.NHeadKV),
		t("attn_v.bias", gen.RoleBias, hd*p.NHeadKV),
		t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E),
		t("post_attention_norm.weight", gen.RoleNorm, E),
	}
	if sh.qkNorm {
		ts = append(ts, t("attn_q_norm.weight", gen.RoleNorm, hd), t("attn_k_norm.weight", gen.RoleNorm, hd))
	}
	if il < p.LeadingDense {
		return append(ts,
			t("ffn_gate.weight", gen.RoleProj, E, p.NFF),
			t("ffn_up.weight", gen.RoleProj, E, p.NFF),
			t("ffn_down.weight", gen.RoleProjOut, p.NFF, E))
	}
	ts = append(ts,
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("exp_probs_b.bias", gen.RoleBias, p.NExpert),
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert))
	if n := p.NFFExp * p.NShared; n > 0 {
		ts = append(ts,
			t("ffn_gate_shexp.weight", gen.RoleProj, E, n),
			t("ffn_up_shexp.weight", gen.RoleProj, E, n),
			t("ffn_down_shexp.weight", gen.RoleProjOut, n, E))
	}
	return ts
}

// nextnBlockTensors are NextN block il's own tensors: the projection of
// the concatenated embedding and hidden state, its two norms, the shared
// head's norm and, with nextnFull, the optional embedding and head.
func nextnBlockTensors(p *gen.Preset, sh shape, il, vocab int) []gen.TensorSpec {
	E := p.NEmbd
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("nextn.eh_proj.weight", gen.RoleProj, 2*E, E),
		t("nextn.enorm.weight", gen.RoleNorm, E),
		t("nextn.hnorm.weight", gen.RoleNorm, E),
		t("nextn.shared_head_norm.weight", gen.RoleNorm, E),
	}
	if sh.nextnFull {
		ts = append(ts,
			t("nextn.embed_tokens.weight", gen.RoleProj, E, vocab),
			t("nextn.shared_head_head.weight", gen.RoleOutput, E, vocab))
	}
	return ts
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
