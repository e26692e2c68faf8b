// Package nemotronh is NVIDIA's Nemotron-H MoE architecture, nemotron_h_moe (Nemotron 3
// Nano 30B-A3B: 52 blocks, 30B total / 3.5B active), following llama.cpp's
// src/models/nemotron-h.cpp graph (which nemotron-h-moe.cpp reuses for the
// trunk), mamba-base.cpp's build_mamba2_layer and build_moe_ffn. Every
// block is one of three kinds, told apart by the per-layer
// attention.head_count_kv and feed_forward_length (both 0: Mamba-2; only
// feed_forward_length 0: attention; else MoE), and each is
//
//	x += block(RMSNorm(x)·attn_norm)
//
// with block one of
//
//	Mamba-2:   z|xBC|dt = Win h; xBC = silu(conv(xBC) + conv_b) (a causal
//	           depthwise convolution of ssm.conv_kernel taps whose last
//	           inputs are kept in the state); x|B|C = xBC; per head h of
//	           ssm.time_step_rank (B and C of group h/(heads/groups)):
//	           Δ = softplus(dt_h + dt_b_h); S = S·exp(Δ·A_h) + Δ·x⊗B;
//	           y = S·C + D_h·x (the state S, head_dim × d_state per head,
//	           kept in the state); y = silu(z)·y, RMS-normed per group
//	           (ssm_norm); Wout y
//	attention: causal GQA without RoPE, KQ scale 1/√head_dim (optional
//	           projection biases)
//	MoE:       sigmoid router with the exp_probs_b selection bias, weights
//	           renormalised (expert_weights_norm) and scaled
//	           (expert_weights_scale); Σ_rank w_r·down_e(relu(up_e h)²) plus
//	           the shared expert down_s(relu(up_s h)²)   (the MoE seam)
//
//	logits = Woutput RMSNorm(x)·output_norm
//
// The Mamba-2 blocks are model.Mixer hooks (their convolution and SSM
// states beside the attention blocks' KV rows in model.State, the
// convolution model.CausalConv); the MoE blocks are FFN hooks behind an
// empty Mixer (no state); the ungated squared-ReLU experts are this
// package's ComputeExpert. Nemotron 3 Super's latent MoE
// (moe_latent_size) and an appended MTP block (nextn_predict_layers),
// which llama.cpp loads, are refused.
//
// The package is the whole family (family.Family, family.go): its own key
// (the per-layer feed_forward_length, as HParams.Pattern), its
// per-sequence state, its inspect rows; its `pipe gen` presets, tensors and
// metadata are in gen.go. It registers itself as "nemotron_h_moe" on
// import.
package nemotronh

import (
	"context"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// Model is a loaded Nemotron-H MoE.
type Model struct {
	*model.Decoder
	experts
	d      *model.Desc
	router []model.RouterSpec // per layer (zero for a Mamba-2 or attention block)
}

// New builds a Nemotron-H MoE from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	o := own(d)
	if err := checkHParams(&hp, o, k); err != nil {
		return nil, err
	}
	m := &Model{d: d, experts: experts{pool: opt.Pool, E: hp.NEmbd, F: hp.NFFExp, n: hp.NExpert}}
	m.Decoder = &model.Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: hp.RMSEps, Timings: opt.Timings, Clock: opt.Clock}
	ld := model.NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	spec := model.RouterSpec{Gating: model.SigmoidTopK, NExpert: hp.NExpert, K: k, Normalize: hp.MoE.WeightsNorm, Scale: hp.MoE.WeightsScale}
	for l := 0; l < hp.NLayer; l++ {
		var layer model.Layer
		var s model.RouterSpec
		switch o.Pattern[l] {
		case 'M':
			layer = model.Layer{Mixer: loadMamba2(ld, l, &hp, opt.Pool), FFN: noFFN{}}
		case '*':
			a, err := loadAttention(ld, l, &hp)
			if err != nil {
				return nil, err
			}
			layer = model.Layer{Attn: a, FFN: noFFN{}}
		default:
			layer = model.Layer{Mixer: noMixer{}, FFN: loadMoE(ld, l, &hp)}
			s = spec
			s.Bias = ld.Vector(blk(l, "exp_probs_b.bias"), hp.NExpert)
		}
		m.addLayer(ld, l, o.Pattern[l] == 'E')
		m.router = append(m.router, s)
		m.Layers = append(m.Layers, layer)
	}
	if err := ld.CheckVocab(m.Decoder, hp.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}

// checkHParams refuses hyper-parameters the graph cannot run, naming the
// first bad key and its value (k is the experts used).
func checkHParams(hp *model.HParams, o HParams, k int) error {
	g := hp.SSM
	heads := max(g.TimeStepRank, 1)
	for _, c := range []struct {
		bad  bool
		key  string
		val  int
		want string
	}{
		{hp.NLayer <= 0 || len(o.Pattern) != hp.NLayer, "block_count", hp.NLayer, "> 0, one kind per block"},
		{hp.NEmbd <= 0, "embedding_length", hp.NEmbd, "> 0"},
		{k <= 0 || k > hp.NExpert, "expert_used_count", k, fmt.Sprintf("in 1..expert_count %d", hp.NExpert)},
		{hp.NFFExp <= 0, "expert_feed_forward_length", hp.NFFExp, "> 0"},
		{o.count('E') > 0 && hp.NFFShExp <= 0, "expert_shared_feed_forward_length", hp.NFFShExp, "> 0"},
		{hp.RMSEps <= 0, "attention.layer_norm_rms_epsilon", 0, "> 0"},
		{o.count('M') > 0 && g.ConvKernel < 1, "ssm.conv_kernel", g.ConvKernel, ">= 1"},
		{o.count('M') > 0 && g.StateSize <= 0, "ssm.state_size", g.StateSize, "> 0"},
		{o.count('M') > 0 && (g.TimeStepRank <= 0 || g.InnerSize <= 0 || g.InnerSize%heads != 0), "ssm.inner_size", g.InnerSize, fmt.Sprintf("a positive multiple of ssm.time_step_rank %d", g.TimeStepRank)},
		{o.count('M') > 0 && (g.GroupCount <= 0 || g.TimeStepRank%max(g.GroupCount, 1) != 0), "ssm.group_count", g.GroupCount, fmt.Sprintf("a divisor of ssm.time_step_rank %d", g.TimeStepRank)},
		{o.count('*') > 0 && (hp.NHead <= 0 || hp.HeadDim <= 0 || hp.HeadDimV != hp.HeadDim), "attention.key_length", hp.HeadDim, fmt.Sprintf("> 0 and equal to value_length %d", hp.HeadDimV)},
		{o.LatentSize > 0, "moe_latent_size", o.LatentSize, "0 (latent MoE is not supported)"},
		{o.NextN > 0, "nextn_predict_layers", o.NextN, "0 (an MTP block is not supported)"},
	} {
		if c.bad {
			return fmt.Errorf("%w: %s.%s = %d (want %s)", model.ErrBadModel, arch, c.key, c.val, c.want)
		}
	}
	return nil
}

// loadAttention is block l's attention: GQA over its own KV heads, no
// rotation, KQ scale 1/√head_dim, the projections' optional biases.
func loadAttention(ld *model.Loader, l int, hp *model.HParams) (model.Attention, error) {
	nkv := hp.NHeadKV
	if hp.HeadCountKVLayers != nil {
		nkv = hp.HeadCountKVLayers[l]
	}
	if nkv <= 0 || hp.NHead%nkv != 0 {
		return model.Attention{}, fmt.Errorf("%w: %s block %d: attention.head_count %d over head_count_kv %d", model.ErrBadModel, arch, l, hp.NHead, nkv)
	}
	hd := hp.HeadDim
	g := model.Geom{NHead: hp.NHead, NHeadKV: nkv, HeadDim: hd, Rope: noRope{}, Scale: float32(1 / math.Sqrt(float64(hd)))}
	a := ld.Attention(l, hp.NEmbd, g)
	a.Bq, _ = ld.OptionalVector(blk(l, "attn_q.bias"), g.QDim())
	a.Bk, _ = ld.OptionalVector(blk(l, "attn_k.bias"), g.KVDim())
	a.Bv, _ = ld.OptionalVector(blk(l, "attn_v.bias"), g.KVDim())
	a.Bo, _ = ld.OptionalVector(blk(l, "attn_output.bias"), hp.NEmbd)
	return a, nil
}

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// noRope is the attention's rotation: none (Nemotron-H's attention has no
// positional encoding; the Mamba-2 blocks carry the order).
type noRope struct{}

// ApplyNeoX implements model.Rotation: x is left as it is.
func (noRope) ApplyNeoX([]float32, int) {}

// noFFN is the feed-forward of a Mamba-2 or attention block: none.
type noFFN struct{}

// Run implements model.FFN: x is left as it is.
func (noFFN) Run(context.Context, *model.Pass, int, []float32) error { return nil }

// noMixer is the token mixer of a MoE block: none, and no state.
type noMixer struct{}

// Mix implements model.Mixer: x is left as it is.
func (noMixer) Mix(*model.Pass, *model.State, int, []float32) error { return nil }

// StateFloats implements model.Mixer: no state.
func (noMixer) StateFloats() int { return 0 }

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(l int) model.RouterSpec {
	if l < 0 || l >= len(m.router) {
		return model.RouterSpec{}
	}
	return m.router[l]
}
