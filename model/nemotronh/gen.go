package nemotronh

// gen.go: the generator side of the nemotron_h_moe family (gen.Family):
// its `pipe gen` presets and llama.cpp's LLM_ARCH_NEMOTRON_H_MOE
// hyper-parameters and tensors, as conversion/nemotron.py's
// NemotronHModel (over GraniteHybridModel and TextModel) writes them and
// llama_model_nemotron_h::load_arch_tensors creates them.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// shape is what a preset holds beyond gen.Preset: the layer pattern (M a
// Mamba-2 block, * an attention block, E a MoE block: the config's
// hybrid_override_pattern) and the Mamba-2 heads' width.
type shape struct {
	pattern      string
	mambaHeadDim int
}

// shapes are the presets' own fields, by preset name.
var shapes = map[string]shape{
	"nemotron-3-nano-30b-a3b": {pattern: "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", mambaHeadDim: 64},
	// every block kind, an attention block between two Mamba-2 ones
	"nemotron-h-moe-tiny": {pattern: "ME*EME", mambaHeadDim: 32},
}

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json
			// (NemotronHForCausalLM), key by key: num_hidden_layers 52
			// (hybrid_override_pattern, in shapes: 23 M, 23 E, 6 *);
			// hidden_size 2688; num_attention_heads 32;
			// num_key_value_heads 2; head_dim 128; n_routed_experts 128;
			// num_experts_per_tok 6; moe_intermediate_size 1856 →
			// feed_forward_length (of the E blocks) and
			// expert_feed_forward_length; moe_shared_expert_intermediate_size
			// 3712; n_shared_experts 1; norm_topk_prob true;
			// routed_scaling_factor 2.5; n_group 1 → expert_group_count;
			// mamba_num_heads 64 → ssm.time_step_rank; mamba_head_dim 64
			// (ssm.inner_size 64·64 = 4096); ssm_state_size 128; n_groups
			// 8 → ssm.group_count; conv_kernel 4; layer_norm_epsilon 1e-05
			// (both epsilons); rope_theta 10000; vocab_size 131072;
			// tie_word_embeddings false (output.weight). context_length
			// is 2^20: GraniteHybridModel writes it for a model without
			// RoPE, over max_position_embeddings 262144.
			Name: "nemotron-3-nano-30b-a3b", Arch: arch, ModelName: "NVIDIA-Nemotron-3-Nano-30B-A3B (synthetic)",
			Tokenizer:   nanoTokenizer(),
			Description: "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json; llama.cpp src/models/nemotron-h.cpp",
			NLayer:      52, NEmbd: 2688, NHead: 32, NHeadKV: 2, HeadDim: 128,
			NExpert: 128, NExpertUsed: 6, NFFExp: 1856, NFF: 1856, NFFShExp: 3712, NCtxTrain: 1 << 20,
			RopeBase: 10000, RMSEps: 1e-5, Vocab: 131072, DefaultQuant: "Q4_K_M",
			NShared: 1, WeightsNorm: true, WeightsScale: 2.5, ProbsBias: true, GatingFunc: gatingSigmoid, ExpertGroups: 1,
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 128, KeyHeads: 8, ValueHeads: 64},
		},
		{
			// Nemotron 3 Nano's paths scaled down: GQA 2:1, Mamba-2 heads
			// in 2 groups, 16 experts top-4 scaled by 2.5
			Name: "nemotron-h-moe-tiny", Arch: arch, ModelName: "tiny-random-nemotron-h-moe",
			Description: "nemotron-3-nano-30b-a3b scaled down",
			NLayer:      6, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64,
			NExpert: 16, NExpertUsed: 4, NFFExp: 128, NFF: 128, NFFShExp: 256, NCtxTrain: 4096,
			RopeBase: 10000, RMSEps: 1e-5, Vocab: 512, DefaultQuant: "Q4_K_M",
			NShared: 1, WeightsNorm: true, WeightsScale: 2.5, ProbsBias: true, GatingFunc: gatingSigmoid, ExpertGroups: 1,
			Hybrid: gen.HybridGeom{ConvKernel: 4, StateSize: 16, KeyHeads: 2, ValueHeads: 8},
		},
	}
}

// shapeOf is p's own fields, its pattern cut to p.NLayer (--layers).
func shapeOf(p *gen.Preset) (shape, error) {
	s, ok := shapes[p.Name]
	if !ok || len(s.pattern) < p.NLayer {
		return s, fmt.Errorf("%w: nemotron_h_moe preset %q has no layer pattern of %d blocks", gen.ErrBadOptions, p.Name, p.NLayer)
	}
	s.pattern = s.pattern[:p.NLayer]
	return s, nil
}

// innerSize is ssm.inner_size: the Mamba-2 heads times their width.
func (s shape) innerSize(p *gen.Preset) int { return p.Hybrid.ValueHeads * s.mambaHeadDim }

// CheckPreset implements gen.Family: a known pattern, Mamba-2 heads in
// whole groups, a shared expert, sigmoid routing with the selection bias.
func (Family) CheckPreset(p *gen.Preset) error {
	s, err := shapeOf(p)
	if err != nil {
		return err
	}
	h := p.Hybrid
	switch {
	case h.ConvKernel < 2 || h.StateSize <= 0 || h.KeyHeads <= 0 || h.ValueHeads%h.KeyHeads != 0 || s.mambaHeadDim <= 0:
		return fmt.Errorf("%w: nemotron_h_moe preset %q: Mamba-2 geometry %+v, head width %d", gen.ErrBadOptions, p.Name, h, s.mambaHeadDim)
	case p.NFFShExp <= 0 || p.NShared != 1 || !p.ProbsBias || p.GatingFunc != gatingSigmoid:
		return fmt.Errorf("%w: nemotron_h_moe preset %q needs one shared expert and sigmoid routing with exp_probs_b", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Metadata implements gen.Family: the converter's keys (TextModel's and
// GraniteHybridModel's, then NemotronHModel's), feed_forward_length and
// attention.head_count_kv per layer: 0 marks a Mamba-2 block (both 0) or
// an attention block (feed_forward_length 0).
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	s, _ := shapeOf(p) // CheckPreset passed
	u32 := func(x int) uint32 { return uint32(x) }
	ff, kv := make([]uint32, p.NLayer), make([]uint32, p.NLayer)
	for il, c := range s.pattern {
		switch c {
		case 'E':
			ff[il] = u32(p.NFFExp)
		case '*':
			kv[il] = u32(p.NHeadKV)
		}
	}
	h := p.Hybrid
	return []gen.MetaKV{
		{Key: "feed_forward_length", Value: ff},
		{Key: "rope.freq_base", Value: p.RopeBase},
		{Key: "attention.layer_norm_rms_epsilon", Value: p.RMSEps},
		{Key: "attention.layer_norm_epsilon", Value: p.RMSEps},
		{Key: "expert_count", Value: u32(p.NExpert)},
		{Key: "expert_used_count", Value: u32(p.NExpertUsed)},
		{Key: "ssm.conv_kernel", Value: u32(h.ConvKernel)},
		{Key: "ssm.state_size", Value: u32(h.StateSize)},
		{Key: "ssm.group_count", Value: u32(h.KeyHeads)},
		{Key: "ssm.inner_size", Value: u32(s.innerSize(p))},
		{Key: "ssm.time_step_rank", Value: u32(h.ValueHeads)},
		{Key: "attention.head_count_kv", Value: kv},
		{Key: "attention.key_length", Value: u32(p.HeadDim)},
		{Key: "attention.value_length", Value: u32(p.HeadDim)},
		{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		{Key: "expert_shared_feed_forward_length", Value: u32(p.NFFShExp)},
		{Key: "expert_shared_count", Value: u32(p.NShared)},
		{Key: "expert_weights_norm", Value: p.WeightsNorm},
		{Key: "expert_weights_scale", Value: p.WeightsScale},
		{Key: "expert_group_count", Value: u32(p.ExpertGroups)},
	}
}

// Tensors implements gen.Family: llama_model_nemotron_h::load_arch_tensors
// (an untied output, the Mamba-2 blocks' optional conv1d bias written).
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	s, _ := shapeOf(p)
	ts := gen.HeadTensors(p, vocab)
	for il, c := range s.pattern {
		t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
			return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
		}
		ts = append(ts, t("attn_norm.weight", gen.RoleNorm, p.NEmbd))
		switch c {
		case 'M':
			ts = append(ts, mambaTensors(p, s, t)...)
		case '*':
			E, hd := p.NEmbd, p.HeadDim
			ts = append(ts,
				t("attn_q.weight", gen.RoleProj, E, hd*p.NHead),
				t("attn_k.weight", gen.RoleProj, E, hd*p.NHeadKV),
				t("attn_v.weight", gen.RoleProj, E, hd*p.NHeadKV),
				t("attn_output.weight", gen.RoleProjOut, hd*p.NHead, E))
		default:
			E, F := p.NEmbd, p.NFFExp
			ts = append(ts,
				t("ffn_gate_inp.weight", gen.RoleRouter, E, p.NExpert),
				t("exp_probs_b.bias", gen.RoleBias, p.NExpert),
				t("ffn_up_exps.weight", gen.RoleExpert, E, F, p.NExpert),
				t("ffn_down_exps.weight", gen.RoleExpertOut, F, E, p.NExpert),
				t("ffn_up_shexp.weight", gen.RoleExpert, E, p.NFFShExp),
				t("ffn_down_shexp.weight", gen.RoleExpertOut, p.NFFShExp, E))
		}
	}
	return ts
}

// mambaTensors are a Mamba-2 block's: in_proj (z, x, B, C, dt), the
// convolution over x, B and C with its bias, dt's bias, A (-exp(A_log))
// and D per head, the grouped norm and out_proj.
func mambaTensors(p *gen.Preset, s shape, t func(string, gen.Role, ...int) gen.TensorSpec) []gen.TensorSpec {
	h, E, inner := p.Hybrid, p.NEmbd, s.innerSize(p)
	conv := inner + 2*h.KeyHeads*h.StateSize
	return []gen.TensorSpec{
		t("ssm_in.weight", gen.RoleProj, E, 2*inner+2*h.KeyHeads*h.StateSize+h.ValueHeads),
		t("ssm_conv1d.weight", gen.RoleConv, h.ConvKernel, conv),
		t("ssm_conv1d.bias", gen.RoleBias, conv),
		t("ssm_dt.bias", gen.RoleBias, h.ValueHeads),
		t("ssm_a", gen.RoleSSMA, 1, h.ValueHeads),
		t("ssm_d", gen.RoleNorm, 1, h.ValueHeads),
		t("ssm_norm.weight", gen.RoleNorm, inner/h.KeyHeads, h.KeyHeads),
		t("ssm_out.weight", gen.RoleProjOut, inner, E),
	}
}

// Vocab implements gen.Family: the ChatML tokenizer, which the tiny preset
// writes (Nemotron 3's chat turns are <|im_start|>role … <|im_end|>;
// nemotron-3-nano-30b-a3b writes its specials and template, chat.go).
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
