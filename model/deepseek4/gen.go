package deepseek4

// gen.go: the generator side of the deepseek4 family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_DEEPSEEK4 hyper-parameters
// and tensors (llama.cpp's conversion/deepseek.py, DeepseekV4Model, and
// llama_model_deepseek4::load_arch_{hparams,tensors}): hyper-connection
// mixing around every block, a shared-KV attention with a low-rank query,
// sinks and a grouped low-rank output, compressors on the layers of
// compress ratio 4 (with the lightning indexer) and 128, and routed experts
// scored by sqrt-softplus with a selection bias (hash-routed leading layers
// when hash_layer_count > 0) plus a shared expert.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// shape is what a deepseek4 preset has beyond gen.Preset's fields.
type shape struct {
	Ratios        []int   // compress_ratios, one per layer: 0, 4 or 128
	Window        int     // sliding_window: the raw KV rows a query sees
	IdxHeads      int     // index_n_heads
	IdxDim        int     // index_head_dim
	IdxTopK       int     // index_topk
	OGroups       int     // o_groups
	OLora         int     // o_lora_rank
	HC            int     // hc_mult
	Sinkhorn      int     // hc_sinkhorn_iters
	HCEps         float32 // hc_eps
	HashLayers    int     // num_hash_layers
	CompressBase  float32 // compress_rope_theta
	SwiGLULimit   float32 // swiglu_limit
	YarnFactor    float32 // rope_scaling.factor (0: none)
	YarnOrigCtx   int     // rope_scaling.original_max_position_embeddings
	YarnBetaFast  float32 // rope_scaling.beta_fast
	YarnBetaSlow  float32 // rope_scaling.beta_slow
	RopeScaleType string  // rope_scaling.type
}

// flashRatios is DeepSeek-V4-Flash's compress_ratios for its 43 layers:
// 0, 0, then 4 and 128 alternating, and 4 on the last layer (the config's
// trailing entries belong to the MTP / draft layers, not written).
func flashRatios() []int {
	r := make([]int, 43)
	for l := 2; l < 42; l++ {
		r[l] = 4
		if l%2 == 1 {
			r[l] = 128
		}
	}
	r[42] = 4
	return r
}

// shapes are the presets' own values by preset name.
//
// deepseek-v4-flash is deepseek-ai/DeepSeek-V4-Flash's config.json
// (DeepseekV4ForCausalLM, model_type deepseek_v4) as public copies quote
// it in full (a Rust test "exact_official_config_contract" that checks the
// text against the file's SHA-256, and several loaders' config tests):
// hidden_size 4096, num_hidden_layers 43, num_attention_heads 64,
// num_key_value_heads 1, head_dim 512, qk_rope_head_dim 64, q_lora_rank
// 1024, o_groups 8, o_lora_rank 1024, sliding_window 128,
// compress_ratios [0, 0, 4, 128, …, 4, 128, 4] (flashRatios),
// compress_rope_theta 160000, index_n_heads 64, index_head_dim 128,
// index_topk 512, hc_mult 4, hc_sinkhorn_iters 20, hc_eps 1e-6,
// n_routed_experts 256, num_experts_per_tok 6, moe_intermediate_size 2048,
// n_shared_experts 1, scoring_func sqrtsoftplus, norm_topk_prob true,
// routed_scaling_factor 1.5, swiglu_limit 10.0, num_hash_layers 3,
// rope_theta 10000, rope_scaling yarn (factor 16, original 65536,
// beta_fast 32, beta_slow 1), max_position_embeddings 1048576,
// rms_norm_eps 1e-6, vocab_size 129280, tie_word_embeddings false. Its
// NextN layer (num_nextn_predict_layers 1) is not written. Its hash-routed
// layers' ffn_gate_tid2eid tables are I32, as the converter's: each token
// id's n_expert_used distinct experts, drawn uniformly.
var shapes = map[string]shape{
	"deepseek-v4-flash": {Ratios: flashRatios(), Window: 128, IdxHeads: 64, IdxDim: 128, IdxTopK: 512,
		OGroups: 8, OLora: 1024, HC: 4, Sinkhorn: 20, HCEps: 1e-6, HashLayers: 3, CompressBase: 160000,
		SwiGLULimit: 10, YarnFactor: 16, YarnOrigCtx: 65536, YarnBetaFast: 32, YarnBetaSlow: 1, RopeScaleType: "yarn"},
	// every path of the graph at tiny widths: a raw-only layer, two CSA
	// layers (ratio 4: overlapping compressor, indexer choosing 2 blocks)
	// and an HCA layer (ratio 128), a window of 8 raw rows, two output
	// groups, a SwiGLU limit that clamps some gate and up values, YaRN on
	// the compressed layers (factor 4 over an original context of 64); no
	// hash layers (tiny-deepseek4-hash, the golden, has one)
	"deepseek4-tiny": {Ratios: []int{0, 4, 128, 4}, Window: 8, IdxHeads: 4, IdxDim: 64, IdxTopK: 2,
		OGroups: 2, OLora: 32, HC: 4, Sinkhorn: 20, HCEps: 1e-6, CompressBase: 160000, SwiGLULimit: 0.3,
		YarnFactor: 4, YarnOrigCtx: 64, YarnBetaFast: 32, YarnBetaSlow: 1, RopeScaleType: "yarn"},
}

// shapeOf is preset p's own values (zero for a preset this file does not
// define).
func shapeOf(p *gen.Preset) shape { return shapes[p.Name] }

// gatingSqrtSoftplus is llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS.
const gatingSqrtSoftplus = 4

// Presets implements gen.Family (the values' sources: shapes).
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			Name: "deepseek-v4-flash", Arch: "deepseek4", ModelName: "DeepSeek-V4-Flash (synthetic)",
			Description: "deepseek-ai/DeepSeek-V4-Flash config.json; llama.cpp src/models/deepseek4.cpp",
			NLayer:      43, NEmbd: 4096, NHead: 64, NHeadKV: 1, HeadDim: 512, NRot: 64, QLoraRank: 1024,
			NExpert: 256, NExpertUsed: 6, NFFExp: 2048, NFF: 2048, NShared: 1, NCtxTrain: 1048576,
			RopeBase: 10000, RMSEps: 1e-6, Vocab: 129280, DefaultQuant: "Q4_K_M",
			GatingFunc: gatingSqrtSoftplus, WeightsNorm: true, WeightsScale: 1.5, ProbsBias: true,
		},
		{
			Name: "deepseek4-tiny", Arch: "deepseek4", ModelName: "tiny-random-deepseek4",
			Description: "deepseek-v4-flash with tiny widths",
			NLayer:      4, NEmbd: 128, NHead: 4, NHeadKV: 1, HeadDim: 96, NRot: 32, QLoraRank: 64,
			NExpert: 16, NExpertUsed: 4, NFFExp: 64, NFF: 64, NShared: 1, NCtxTrain: 4096,
			RopeBase: 10000, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			GatingFunc: gatingSqrtSoftplus, WeightsNorm: true, WeightsScale: 1.5, ProbsBias: true,
		},
	}
}

// CheckPreset implements gen.Family: the shapes llama.cpp's loader and
// graph assert (one KV head, hc_mult 4, ratios 0, 4 or 128, heads in whole
// output groups, an indexer width of whole 64-wide Hadamard blocks).
func (Family) CheckPreset(p *gen.Preset) error {
	s := shapeOf(p)
	ok := p.NHeadKV == 1 && p.NRot > 0 && p.NRot%2 == 0 && p.NRot <= p.HeadDim && p.QLoraRank > 0 &&
		s.HC == 4 && s.Window > 0 && s.OGroups > 0 && p.NHead%s.OGroups == 0 && s.OLora > 0 &&
		s.IdxHeads > 0 && s.IdxDim >= p.NRot && s.IdxDim%64 == 0 && s.IdxTopK > 0 &&
		len(s.Ratios) >= p.NLayer && p.NShared > 0 && p.GatingFunc == gatingSqrtSoftplus
	for _, r := range s.Ratios {
		ok = ok && (r == 0 || r == 4 || r == 128)
	}
	if !ok {
		return fmt.Errorf("%w: deepseek4 preset %q needs one KV head, an even rope width within the head, a query rank, hc_mult 4, "+
			"a window, heads in whole output groups, an indexer of whole 64-wide blocks, a compress ratio (0, 4, 128) per layer, "+
			"a shared expert and sqrt-softplus gating", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Metadata implements gen.Family: the converter's keys (TextModel's, then
// DeepseekV4Model.set_gguf_parameters').
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	s := shapeOf(p)
	ratios := make([]uint32, p.NLayer)
	limits := make([]float32, p.NLayer)
	for l := range ratios {
		ratios[l] = u32(s.Ratios[l])
		limits[l] = s.SwiGLULimit
	}
	ps := []gen.MetaKV{
		{Key: "attention.head_count_kv", Value: u32(p.NHeadKV)},
		{Key: "rope.freq_base", Value: p.RopeBase},
		{Key: "attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: "expert_count", Value: u32(p.NExpert)},
		{Key: "expert_used_count", Value: u32(p.NExpertUsed)},
		{Key: "attention.key_length", Value: u32(p.HeadDim)},
		{Key: "attention.value_length", Value: u32(p.HeadDim)},
		{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
	}
	if s.YarnFactor > 0 {
		ps = append(ps,
			gen.MetaKV{Key: "rope.scaling.type", Value: s.RopeScaleType},
			gen.MetaKV{Key: "rope.scaling.factor", Value: s.YarnFactor},
			gen.MetaKV{Key: "rope.scaling.original_context_length", Value: u32(s.YarnOrigCtx)},
			gen.MetaKV{Key: "rope.scaling.yarn_beta_fast", Value: s.YarnBetaFast},
			gen.MetaKV{Key: "rope.scaling.yarn_beta_slow", Value: s.YarnBetaSlow})
	}
	return append(ps, []gen.MetaKV{
		{Key: "vocab_size", Value: u32(p.Vocab)},
		{Key: "rope.dimension_count", Value: u32(p.NRot)},
		{Key: "attention.q_lora_rank", Value: u32(p.QLoraRank)},
		{Key: "attention.sliding_window", Value: u32(s.Window)},
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "expert_shared_count", Value: u32(p.NShared)},
		{Key: "expert_weights_scale", Value: p.WeightsScale},
		{Key: "expert_weights_norm", Value: p.WeightsNorm},
		{Key: "swiglu_clamp_exp", Value: limits},
		{Key: "swiglu_clamp_shexp", Value: limits},
		{Key: "attention.indexer.head_count", Value: u32(s.IdxHeads)},
		{Key: "attention.indexer.key_length", Value: u32(s.IdxDim)},
		{Key: "attention.indexer.top_k", Value: u32(s.IdxTopK)},
		{Key: "attention.output_group_count", Value: u32(s.OGroups)},
		{Key: "attention.output_lora_rank", Value: u32(s.OLora)},
		{Key: "attention.compress_ratios", Value: ratios},
		{Key: "attention.compress_rope_freq_base", Value: s.CompressBase},
		{Key: "hyper_connection.count", Value: u32(s.HC)},
		{Key: "hyper_connection.sinkhorn_iterations", Value: u32(s.Sinkhorn)},
		{Key: "hyper_connection.epsilon", Value: s.HCEps},
		{Key: "hash_layer_count", Value: u32(hashLayers(p, s))},
		{Key: "embedding_length_out", Value: u32(p.NEmbd * s.HC)},
	}...)
}

// Tensors implements gen.Family: the head with its hyper-connection
// mixer, then every block.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	s := shapeOf(p)
	hcDim := s.HC * p.NEmbd
	head := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: name, Layer: -1, Dims: gen.Dims(dims...), Role: role}
	}
	ts := append(gen.HeadTensors(p, vocab),
		head("output_hc_fn.weight", gen.RoleProj, hcDim, s.HC),
		head("output_hc_base.weight", gen.RoleBias, s.HC),
		head("output_hc_scale.weight", gen.RoleScale, 1))
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, s, il, vocab)...)
	}
	return ts
}

type tensorFn func(name string, role gen.Role, dims ...int) gen.TensorSpec

// blockTensors is block il: the hyper-connection mixers, the attention,
// its compressors, and the MoE with its shared expert.
func blockTensors(p *gen.Preset, s shape, il, vocab int) []gen.TensorSpec {
	E, nh, hd := p.NEmbd, p.NHead, p.HeadDim
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	hcDim, mix := s.HC*E, (2+s.HC)*s.HC
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("attn_sinks.weight", gen.RoleSink, nh),
		t("attn_q_a.weight", gen.RoleProj, E, p.QLoraRank),
		t("attn_q_a_norm.weight", gen.RoleNorm, p.QLoraRank),
		t("attn_q_b.weight", gen.RoleProj, p.QLoraRank, nh*hd),
		t("attn_kv.weight", gen.RoleProj, E, hd),
		t("attn_kv_a_norm.weight", gen.RoleNorm, hd),
		t("attn_output_a.weight", gen.RoleProj, nh*hd/s.OGroups, s.OLora*s.OGroups),
		t("attn_output_b.weight", gen.RoleProjOut, s.OGroups*s.OLora, E),
		t("hc_attn_fn.weight", gen.RoleProj, hcDim, mix),
		t("hc_attn_base.weight", gen.RoleBias, mix),
		t("hc_attn_scale.weight", gen.RoleScale, 3),
		t("hc_ffn_fn.weight", gen.RoleProj, hcDim, mix),
		t("hc_ffn_base.weight", gen.RoleBias, mix),
		t("hc_ffn_scale.weight", gen.RoleScale, 3),
	}
	ts = append(ts, compressorTensors(p, s, il, t)...)
	ts = append(ts,
		t("ffn_norm.weight", gen.RoleNorm, E),
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert))
	if il < hashLayers(p, s) {
		ts = append(ts, t("ffn_gate_tid2eid.weight", gen.RoleExpertIDs, p.NExpertUsed, vocab))
	} else {
		ts = append(ts, t("exp_probs_b.bias", gen.RoleBias, p.NExpert))
	}
	sh := p.NFFExp * p.NShared
	return append(ts,
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
		t("ffn_gate_shexp.weight", gen.RoleProj, E, sh),
		t("ffn_up_shexp.weight", gen.RoleProj, E, sh),
		t("ffn_down_shexp.weight", gen.RoleProjOut, sh, E))
}

// compressorTensors are a compressed layer's: the compressor's kv and gate
// projections (twice the head for the overlapping ratio 4), its position
// bias over the ratio and its norm, and on ratio-4 layers the lightning
// indexer (head weights, query, its own compressor).
func compressorTensors(p *gen.Preset, s shape, il int, t tensorFn) []gen.TensorSpec {
	ratio := s.Ratios[il]
	if ratio == 0 {
		return nil
	}
	E, hd := p.NEmbd, p.HeadDim
	coff := 1
	if ratio == 4 {
		coff = 2
	}
	ts := []gen.TensorSpec{
		t("attn_compressor_kv.weight", gen.RoleProj, E, coff*hd),
		t("attn_compressor_gate.weight", gen.RoleProj, E, coff*hd),
		t("attn_compressor_ape.weight", gen.RoleBias, coff*hd, ratio),
		t("attn_compressor_norm.weight", gen.RoleNorm, hd),
	}
	if ratio != 4 {
		return ts
	}
	id := s.IdxDim
	return append(ts,
		t("indexer.proj.weight", gen.RoleProj, E, s.IdxHeads),
		t("indexer.attn_q_b.weight", gen.RoleProj, p.QLoraRank, s.IdxHeads*id),
		t("indexer_compressor_kv.weight", gen.RoleProj, E, 2*id),
		t("indexer_compressor_gate.weight", gen.RoleProj, E, 2*id),
		t("indexer_compressor_ape.weight", gen.RoleBias, 2*id, ratio),
		t("indexer_compressor_norm.weight", gen.RoleNorm, id))
}

// hashLayers is the preset's hash-routed layers within a --layers cut.
func hashLayers(p *gen.Preset, s shape) int { return min(s.HashLayers, p.NLayer) }

// Vocab implements gen.Family: the ChatML tokenizer of the other families
// (DeepSeek-V4's own template is not built in).
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
