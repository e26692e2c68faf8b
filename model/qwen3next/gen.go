package qwen3next

// gen.go: the generator side of the qwen3next family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_QWEN3NEXT hyper-parameters
// and tensors (llama_model_qwen3next::load_arch_hparams and
// load_arch_tensors; the keys convert_hf_to_gguf.py's Qwen3NextModel
// writes): gated delta-net layers with the fused ssm_ba, gated
// full-attention layers every full_attention_interval-th layer, routed
// experts with a gated shared expert beside them. The real shape ends with
// the multi-token-prediction (NextN) block the converter writes by
// default (block_count counts it; --layers N keeps N−1 trunk blocks and
// it, --layers 1 one trunk block alone); the tiny one has none (the
// converter's --no-mtp).

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// presetNextN are the presets' NextN (MTP) blocks, the last of NLayer, by
// preset name.
var presetNextN = map[string]int{"qwen3-next-80b-a3b": 1}

// nextnOf is preset p's NextN blocks, leaving at least one trunk block
// (llama.cpp asserts nextn_predict_layers < block_count).
func nextnOf(p *gen.Preset) int { return min(presetNextN[p.Name], max(p.NLayer-1, 0)) }

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			// The values are config.json's of Qwen/Qwen3-Next-80B-A3B-Instruct
			// (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json),
			// key by key:
			Name: "qwen3-next-80b-a3b", Arch: "qwen3next", ModelName: "Qwen3-Next-80B-A3B-Instruct (synthetic)",
			Tokenizer:    instructTokenizer(),
			Description:  "Qwen/Qwen3-Next-80B-A3B-Instruct config.json; llama.cpp src/models/qwen3next.cpp",
			NLayer:       48,     // num_hidden_layers
			NEmbd:        2048,   // hidden_size
			NHead:        16,     // num_attention_heads
			NHeadKV:      2,      // num_key_value_heads
			HeadDim:      256,    // head_dim
			NExpert:      512,    // num_experts
			NExpertUsed:  10,     // num_experts_per_tok
			NFFExp:       512,    // moe_intermediate_size
			NFF:          5120,   // intermediate_size (feed_forward_length; unused: every layer is MoE, mlp_only_layers [])
			NCtxTrain:    262144, // max_position_embeddings
			RopeBase:     1e7,    // rope_theta 10000000 (rope_scaling null)
			RMSEps:       1e-6,   // rms_norm_eps
			Vocab:        151936, // vocab_size
			DefaultQuant: "Q4_K_M",
			Hybrid: gen.HybridGeom{
				ConvKernel:   4,   // linear_conv_kernel_dim
				StateSize:    128, // linear_key_head_dim = linear_value_head_dim
				KeyHeads:     16,  // linear_num_key_heads
				ValueHeads:   32,  // linear_num_value_heads
				AttnInterval: 4,   // full_attention_interval
				NRot:         64,  // head_dim 256 × partial_rotary_factor 0.25 (the converter's rope.dimension_count)
				NFFShExp:     512, // shared_expert_intermediate_size
			},
		},
		{
			// two delta-net and two attention layers; each key head read
			// by two value heads (grouped: heads 0,1 read key 0 — where
			// qwen35moe's tiling would give 0,2), a quarter of each head
			// rotated as partial_rotary_factor 0.25
			Name: "qwen3next-tiny", Arch: "qwen3next", ModelName: "tiny-random-qwen3next",
			Description: "qwen3-next-80b-a3b scaled down",
			NLayer:      4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 8, NExpertUsed: 2, NFFExp: 128, NFF: 320, NCtxTrain: 4096,
			RopeBase: 1e7, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 32, KeyHeads: 2, ValueHeads: 4, AttnInterval: 2,
				NRot: 16, NFFShExp: 128},
		},
	}
}

// CheckPreset implements gen.Family.
func (Family) CheckPreset(p *gen.Preset) error {
	if h := &p.Hybrid; h.ConvKernel <= 0 || h.StateSize <= 0 || h.KeyHeads <= 0 || h.ValueHeads%h.KeyHeads != 0 ||
		h.AttnInterval <= 0 || h.NRot <= 0 || h.NRot%2 != 0 || h.NRot > p.HeadDim || h.NFFShExp <= 0 {
		return fmt.Errorf("%w: qwen3next preset %q has a zero or inconsistent hybrid geometry", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// isRecurrent reports whether layer il of preset p is a delta-net layer
// (llama.cpp's default is_recr: no NextN layer is).
func isRecurrent(p *gen.Preset, il int) bool {
	return il < p.NLayer-nextnOf(p) && (il+1)%p.Hybrid.AttnInterval != 0
}

// Metadata implements gen.Family: Qwen2MoeModel's keys, then
// Qwen3NextModel's, in the converter's order.
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	h := &p.Hybrid
	u32 := func(x int) uint32 { return uint32(x) }
	meta := append(gen.AttentionMoEMeta(p), []gen.MetaKV{
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "expert_shared_feed_forward_length", Value: u32(h.NFFShExp)},
		{Key: "ssm.conv_kernel", Value: u32(h.ConvKernel)},
		{Key: "ssm.state_size", Value: u32(h.StateSize)},
		{Key: "ssm.group_count", Value: u32(h.KeyHeads)},
		{Key: "ssm.time_step_rank", Value: u32(h.ValueHeads)},
		{Key: "ssm.inner_size", Value: u32(h.StateSize * h.ValueHeads)},
		{Key: "full_attention_interval", Value: u32(h.AttnInterval)},
		{Key: "rope.dimension_count", Value: u32(h.NRot)},
	}...)
	if n := nextnOf(p); n > 0 {
		meta = append(meta, gen.MetaKV{Key: "nextn_predict_layers", Value: u32(n)})
	}
	return meta
}

// Tensors implements gen.Family: llama_model_qwen3next::load_arch_tensors
// with the converter's current split projections (attn_qkv and attn_gate
// rather than the legacy ssm_in), separate expert gate and up.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		ts = append(ts, blockTensors(p, il)...)
		if il >= p.NLayer-nextnOf(p) {
			ts = append(ts, nextnBlockTensors(p, il)...)
		}
	}
	return ts
}

// nextnBlockTensors are NextN block il's own tensors beside its attention
// block: the projection of [embedding, hidden state], their norms and the
// head's norm (the checkpoint's mtp.fc, pre_fc_norm_embedding,
// pre_fc_norm_hidden and norm; it shares the embedding and the head).
func nextnBlockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E := p.NEmbd
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	return []gen.TensorSpec{
		t("nextn.eh_proj.weight", gen.RoleProj, 2*E, E),
		t("nextn.enorm.weight", gen.RoleNorm, E),
		t("nextn.hnorm.weight", gen.RoleNorm, E),
		t("nextn.shared_head_norm.weight", gen.RoleNorm, E),
	}
}

// blockTensors is block il: norms, the routed and shared experts, then
// the gated attention or the delta-net.
func blockTensors(p *gen.Preset, il int) []gen.TensorSpec {
	E, hd, h := p.NEmbd, p.HeadDim, &p.Hybrid
	keyDim, valDim := h.StateSize*h.KeyHeads, h.StateSize*h.ValueHeads
	t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
		return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
	}
	ts := []gen.TensorSpec{
		t("attn_norm.weight", gen.RoleNorm, E),
		t("post_attention_norm.weight", gen.RoleNorm, E),
		t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
		t("ffn_gate_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_up_exps.weight", gen.RoleExpert, E, p.NFFExp, p.NExpert),
		t("ffn_down_exps.weight", gen.RoleExpertOut, p.NFFExp, E, p.NExpert),
		t("ffn_gate_inp_shexp.weight", gen.RoleProj, E),
		t("ffn_gate_shexp.weight", gen.RoleExpert, E, h.NFFShExp),
		t("ffn_up_shexp.weight", gen.RoleExpert, E, h.NFFShExp),
		t("ffn_down_shexp.weight", gen.RoleExpertOut, h.NFFShExp, E),
	}
	if !isRecurrent(p, il) {
		return append(ts,
			t("attn_q.weight", gen.RoleProj, E, 2*hd*p.NHead),
			t("attn_k.weight", gen.RoleProj, E, hd*p.NHeadKV),
			t("attn_v.weight", gen.RoleProj, E, hd*p.NHeadKV),
			t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E),
			t("attn_q_norm.weight", gen.RoleNorm, hd),
			t("attn_k_norm.weight", gen.RoleNorm, hd))
	}
	return append(ts,
		t("attn_qkv.weight", gen.RoleProj, E, 2*keyDim+valDim),
		t("attn_gate.weight", gen.RoleProj, E, valDim),
		t("ssm_conv1d.weight", gen.RoleConv, h.ConvKernel, 2*keyDim+valDim),
		t("ssm_dt.bias", gen.RoleBias, h.ValueHeads),
		t("ssm_a", gen.RoleSSMA, h.ValueHeads),
		t("ssm_ba.weight", gen.RoleProj, E, 2*h.ValueHeads),
		t("ssm_norm.weight", gen.RoleNorm, h.StateSize),
		t("ssm_out.weight", gen.RoleProjOut, valDim, E))
}

// Vocab implements gen.Family.
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
