package minimaxm2

// gen.go: the generator side of the minimax-m2 family (gen.Family): its
// `pipe gen` presets and llama.cpp's LLM_ARCH_MINIMAX_M2 hyper-parameters
// and tensors (conversion/minimax.py's MiniMaxM2Model and the common
// TextModel keys it inherits; the tensors are what
// llama_model_minimax_m2::load_arch_tensors creates).

import (
	"fmt"

	"github.com/pipe-engine/pipe/model/gen"
)

// Presets implements gen.Family.
func (Family) Presets() []gen.Preset {
	return []gen.Preset{
		{
			// MiniMaxAI/MiniMax-M2 config.json (MiniMaxM2ForCausalLM), key
			// by key: num_hidden_layers 62; hidden_size 3072;
			// num_attention_heads 48; num_key_value_heads 8; head_dim 128;
			// rotary_dim 64 → rope.dimension_count; num_local_experts 256;
			// num_experts_per_tok 8; intermediate_size 1536 →
			// feed_forward_length and expert_feed_forward_length;
			// shared_intermediate_size 0 (no shared experts);
			// max_position_embeddings 196608; rope_theta 5000000;
			// rms_norm_eps 1e-06; vocab_size 200064; scoring_func
			// "sigmoid" → expert_gating_func 2; use_routing_bias true →
			// exp_probs_b; use_qk_norm true with qk_norm_type "per_layer"
			// (one norm over the whole projection); tie_word_embeddings
			// false (output.weight).
			Name: "minimax-m2", Arch: "minimax-m2", ModelName: "MiniMax-M2 (synthetic)",
			Tokenizer:   m2Tokenizer(),
			Description: "MiniMaxAI/MiniMax-M2 config.json; llama.cpp src/models/minimax-m2.cpp",
			NLayer:      62, NEmbd: 3072, NHead: 48, NHeadKV: 8, HeadDim: 128, NRot: 64,
			NExpert: 256, NExpertUsed: 8, NFFExp: 1536, NFF: 1536, NCtxTrain: 196608,
			RopeBase: 5e6, RMSEps: 1e-6, Vocab: 200064, DefaultQuant: "Q4_K_M",
			GatingFunc: 2, WeightsNorm: true, ProbsBias: true,
		},
		{
			// MiniMax-M2's paths scaled down: GQA 2:1, half the head
			// rotated, sigmoid routing with the selection bias
			Name: "minimax-m2-tiny", Arch: "minimax-m2", ModelName: "tiny-random-minimax-m2",
			Description: "minimax-m2 scaled down",
			NLayer:      3, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64, NRot: 32,
			NExpert: 16, NExpertUsed: 4, NFFExp: 128, NFF: 128, NCtxTrain: 4096,
			RopeBase: 5e6, RMSEps: 1e-6, Vocab: 512, DefaultQuant: "Q4_K_M",
			GatingFunc: 2, WeightsNorm: true, ProbsBias: true,
		},
	}
}

// CheckPreset implements gen.Family: partial rotation of an even number
// of dims within the head, experts as wide as feed_forward_length (the
// width llama.cpp's loader gives them), sigmoid gating with exp_probs_b.
func (Family) CheckPreset(p *gen.Preset) error {
	switch {
	case p.NRot <= 0 || p.NRot%2 != 0 || p.NRot > p.HeadDim:
		return fmt.Errorf("%w: minimax-m2 preset %q: NRot %d must be even and <= HeadDim %d", gen.ErrBadOptions, p.Name, p.NRot, p.HeadDim)
	case p.NFF != p.NFFExp:
		return fmt.Errorf("%w: minimax-m2 preset %q: NFF %d must equal NFFExp %d (llama.cpp sizes the experts by feed_forward_length)", gen.ErrBadOptions, p.Name, p.NFF, p.NFFExp)
	case !p.ProbsBias || p.GatingFunc != gatingSigmoid || !p.WeightsNorm || p.LeadingDense != 0 || p.NShared != 0:
		return fmt.Errorf("%w: minimax-m2 preset %q needs sigmoid gating with exp_probs_b, renormalised, and no dense or shared layers", gen.ErrBadOptions, p.Name)
	}
	return nil
}

// Metadata implements gen.Family: the converter's keys (TextModel's
// set_gguf_parameters, scoring_func as expert_gating_func, then
// MiniMaxM2Model's own two).
func (Family) Metadata(p *gen.Preset) []gen.MetaKV {
	u32 := func(x int) uint32 { return uint32(x) }
	return append(gen.AttentionMoEMeta(p),
		gen.MetaKV{Key: "expert_gating_func", Value: u32(p.GatingFunc)},
		gen.MetaKV{Key: "expert_feed_forward_length", Value: u32(p.NFFExp)},
		gen.MetaKV{Key: "rope.dimension_count", Value: u32(p.NRot)})
}

// Tensors implements gen.Family: every block is the routed block with
// whole-projection q/k norms and the router's selection bias.
func (Family) Tensors(p *gen.Preset, vocab int) []gen.TensorSpec {
	ts := gen.HeadTensors(p, vocab)
	for il := 0; il < p.NLayer; il++ {
		t := func(name string, role gen.Role, dims ...int) gen.TensorSpec {
			return gen.TensorSpec{Name: gen.Blk(il, name), Layer: il, Dims: gen.Dims(dims...), Role: role}
		}
		ts = append(ts, gen.RoutedBlock(p, il)...)
		ts = append(ts,
			t("attn_q_norm.weight", gen.RoleNorm, p.HeadDim*p.NHead),
			t("attn_k_norm.weight", gen.RoleNorm, p.HeadDim*p.NHeadKV),
			t("exp_probs_b.bias", gen.RoleBias, p.NExpert))
	}
	return ts
}

// Vocab implements gen.Family: the built-in ChatML tokenizer, which the
// tiny preset writes (minimax-m2 writes MiniMax-M2's specials and
// template, chat.go; MiniMax's own BPE vocabulary is not reproduced).
func (Family) Vocab() gen.VocabSpec { return gen.ChatMLVocab() }
