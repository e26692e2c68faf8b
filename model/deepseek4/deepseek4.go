// Package deepseek4 is the DeepSeek-V4 architecture (DeepSeek-V4-Flash),
// following llama.cpp's src/models/deepseek4.cpp graph, its DSV4 KV cache
// (llama-kv-cache-dsv4.cpp) and build_moe_ffn / build_ffn:
//
//	x = [e, e, e, e]  (hc_mult = 4 residual streams of the embedding e)
//	per layer, twice (the attention, then the FFN), a hyper-connection:
//	  m = Wfn RMSNorm(x_flat)                        (24 mixes per token)
//	  pre_i = σ(m_i·s_0 + b_i) + ε, post_i = 2σ(m_{4+i}·s_1 + b_{4+i})
//	  C = Sinkhorn(m_{8..23}·s_2 + b)   (softmax over dst, + ε, then
//	      columns and rows divided by their sums + ε, hc_sinkhorn_iters times)
//	  y = f(RMSNorm(Σ_i pre_i x_i)·norm)
//	  x_dst ← post_dst·y + Σ_src C[dst,src]·x_src
//	attention f: qr = RMSNorm(Wq_a h)·q_a_norm, q = RMSNorm_head(Wq_b qr),
//	  kv = RMSNorm(Wkv h)·kv_norm (one row shared by every head as key and
//	  value), "normal" RoPE on the last n_rot dims of q and kv (base
//	  compress_rope_freq_base on compressed layers), then per head a softmax
//	  with the head's sink over the raw rows of the last sliding_window
//	  positions and the compressed rows the layer sees; the output is
//	  rotated back (RoPE at −θ), each group of heads goes through its
//	  Wo_a matrix and the groups' results through Wo_b.
//	compressed layers (compress_ratios[l] = 128, "HCA"): every 128
//	  positions a block row Σ_j softmax_j(Wgate h_j + ape_j) ⊙ Wkv h_j
//	  (per channel), RMS-normed and rotated at the block's first position;
//	  a query sees every block it completed.
//	ratio-4 layers ("CSA"): the same over 8 positions overlapping the
//	  previous block (its first half of a double-width row, this block's
//	  second half), and a lightning indexer — its own compressor of
//	  index_head_dim rows, queries Wiq_b qr rotated and Hadamard-transformed
//	  like its keys, head weights Wproj h / √(heads·dim) — scores each block
//	  Σ_h relu(q_h·k)·w_h; the query sees the indexer's top_k blocks.
//	FFN f: Σ_rank w_r·expert_r(h) with √softplus scores, the selection bias
//	  exp_probs_b, renormalisation and expert_weights_scale (the MoE seam),
//	  plus the shared expert; SwiGLU with the limit L: silu(min(g, L))·
//	  clamp(u, −L, L).
//	logits = Woutput RMSNorm(Σ_i pre_i x_i)·output_norm  (pre from the
//	  head's own mixes, without post or Sinkhorn)
//
// The compressed layers, their rows and the indexer rotate with the
// file's YaRN scaling (at llama.cpp's dsv4 attention factor); the
// window-only layers without it. The first hash_layer_count layers route
// by token id: the token's ffn_gate_tid2eid row names its experts, which
// the MoE seam weighs by their √softplus scores as the others (the other
// experts' logits are −∞ there, and the layer has no selection bias).
// Files with NextN layers are refused with model.ErrUnsupportedArch.
//
// The package is the whole family (family.Family: family.go; its `pipe
// gen` presets, tensors and metadata in gen.go; the state layout in
// state.go). It registers itself as "deepseek4" on import.
package deepseek4

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

// clampEps is llama.cpp's threshold: a limit at most this is no limit.
const clampEps = 1e-6

// hcMix is one hyper-connection's weights: fn (mixes × hc·n_embd), base
// and scale.
type hcMix struct {
	fn          model.Weight
	base, scale []float32
}

// compressor is a compressed layer's (or its indexer's) compressor.
type compressor struct {
	wkv, wgate model.Weight
	ape        model.Weight // ratio rows of the kv width
	norm       []float32
	width      int // the compressed row's width
}

// layer is one block's weights.
type layer struct {
	attnNorm, sinks []float32
	wqA, wqB, wkv   model.Weight
	qaNorm, kvNorm  []float32
	woA             []model.Weight // per output group
	woB             model.Weight
	hcAttn, hcFFN   hcMix
	ratio           int
	comp            *compressor
	idx             *compressor
	idxProj, idxQB  model.Weight
	ffnNorm         []float32
	gateInp         model.Weight
	tid2eid         []int32 // hash-routed layers: the experts of each token id (n_expert_used a token)
	shGate, shUp    model.Weight
	shDown          model.Weight
	shAct           model.Activation
}

// Model is a loaded DeepSeek-V4.
type Model struct {
	*model.Experts
	d       *model.Desc
	pool    *kernels.Pool
	eps     float32
	E, hd   int
	nh      int
	nope    int
	own     HParams
	geom    geometry
	slots   []slots
	alloc   *model.Decoder
	tokEmbd model.Weight
	output  model.Weight
	outNorm []float32
	hcHead  hcMix
	layers  []layer
	router  []model.RouterSpec
	nrot    int
	ropeRaw angles // rope.freq_base, unscaled: layers of ratio 0
	ropeCmp angles // compress_rope_freq_base with the file's YaRN: compressed layers and the indexer
}

// New builds a DeepSeek-V4 from its description and dense weights.
func New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	hp := d.HParams
	h, ok := d.FamilyHP.(HParams)
	if !ok {
		return nil, fmt.Errorf("%w: deepseek4: no family hyper-parameters", model.ErrBadModel)
	}
	if err := checkHParams(hp, h); err != nil {
		return nil, err
	}
	k, err := model.ExpertsUsed(hp, opt)
	if err != nil {
		return nil, err
	}
	eps := hp.RMSEps
	if eps == 0 {
		eps = 1e-6
	}
	m := &Model{d: d, pool: opt.Pool, eps: eps, E: hp.NEmbd, hd: hp.HeadDim, nh: hp.NHead, nope: hp.HeadDim - hp.NRot, own: h,
		nrot: hp.NRot, ropeRaw: model.Rope{NDims: hp.NRot, Base: hp.RopeFreqBase, FreqScale: 1, AttnScale: 1}}
	if m.ropeCmp, err = compressRope(d, h); err != nil {
		return nil, err
	}
	m.geom = geometryOf(d)
	m.slots, m.alloc = m.geom.layout()
	m.Experts = &model.Experts{Arch: "deepseek4", Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: hp.NFFExp, NExpert: hp.NExpert,
		Act: swiGLU(limit(h.ClampExp, 0))}
	ld := model.NewLoader(d, src)
	m.loadHead(ld)
	for l := 0; l < hp.NLayer; l++ {
		m.layers = append(m.layers, m.loadLayer(ld, l))
		m.AddLayer(ld, l)
		var bias []float32
		if l < h.HashLayers {
			if m.layers[l].tid2eid, err = hashTable(d, src, l); err != nil {
				return nil, err
			}
		} else {
			bias = ld.Vector(blk(l, "exp_probs_b.bias"), hp.NExpert)
		}
		m.router = append(m.router, routerSpec(&hp, k, bias))
	}
	if err := ld.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// loadHead loads the embeddings, the output head and its hyper-connection
// mixer.
func (m *Model) loadHead(ld *model.Loader) {
	hp, hc := m.d.HParams, m.own.HC
	m.tokEmbd = ld.Matrix("token_embd.weight", hp.NEmbd, hp.NVocab)
	m.outNorm = ld.Vector("output_norm.weight", hp.NEmbd)
	m.output = ld.Matrix("output.weight", hp.NEmbd, hp.NVocab)
	m.hcHead = hcMix{fn: ld.Matrix("output_hc_fn.weight", hc*hp.NEmbd, hc),
		base: ld.Vector("output_hc_base.weight", hc), scale: ld.Vector("output_hc_scale.weight", 1)}
}

// loadLayer loads block l's dense weights.
func (m *Model) loadLayer(ld *model.Loader, l int) layer {
	hp, h := m.d.HParams, m.own
	E, nh, hd, qr := hp.NEmbd, hp.NHead, hp.HeadDim, hp.MLA.QLoraRank
	mix := (2 + h.HC) * h.HC
	hcm := func(kind string) hcMix {
		return hcMix{fn: ld.Matrix(blk(l, "hc_"+kind+"_fn.weight"), h.HC*E, mix),
			base: ld.Vector(blk(l, "hc_"+kind+"_base.weight"), mix), scale: ld.Vector(blk(l, "hc_"+kind+"_scale.weight"), 3)}
	}
	sh := hp.NFFExp * max(1, hp.MoE.NShared)
	L := layer{
		attnNorm: ld.Vector(blk(l, "attn_norm.weight"), E),
		sinks:    ld.Vector(blk(l, "attn_sinks.weight"), nh),
		wqA:      ld.Matrix(blk(l, "attn_q_a.weight"), E, qr),
		qaNorm:   ld.Vector(blk(l, "attn_q_a_norm.weight"), qr),
		wqB:      ld.Matrix(blk(l, "attn_q_b.weight"), qr, nh*hd),
		wkv:      ld.Matrix(blk(l, "attn_kv.weight"), E, hd),
		kvNorm:   ld.Vector(blk(l, "attn_kv_a_norm.weight"), hd),
		woB:      ld.Matrix(blk(l, "attn_output_b.weight"), h.OGroups*h.OLora, E),
		hcAttn:   hcm("attn"), hcFFN: hcm("ffn"),
		ratio:   h.ratio(l),
		ffnNorm: ld.Vector(blk(l, "ffn_norm.weight"), E),
		gateInp: ld.Matrix(blk(l, "ffn_gate_inp.weight"), E, hp.NExpert),
		shGate:  ld.Matrix(blk(l, "ffn_gate_shexp.weight"), E, sh),
		shUp:    ld.Matrix(blk(l, "ffn_up_shexp.weight"), E, sh),
		shDown:  ld.Matrix(blk(l, "ffn_down_shexp.weight"), sh, E),
		shAct:   swiGLU(limit(h.ClampShExp, l)),
	}
	L.woA = groups(ld.Matrix(blk(l, "attn_output_a.weight"), nh*hd/h.OGroups, h.OLora*h.OGroups), h.OGroups)
	if L.ratio == 0 {
		return L
	}
	cw := compWidth(L.ratio, hd)
	L.comp = &compressor{wkv: ld.Matrix(blk(l, "attn_compressor_kv.weight"), E, cw),
		wgate: ld.Matrix(blk(l, "attn_compressor_gate.weight"), E, cw),
		ape:   ld.Matrix(blk(l, "attn_compressor_ape.weight"), cw, L.ratio),
		norm:  ld.Vector(blk(l, "attn_compressor_norm.weight"), hd), width: hd}
	if L.ratio == 4 {
		id := h.IdxDim
		L.idx = &compressor{wkv: ld.Matrix(blk(l, "indexer_compressor_kv.weight"), E, 2*id),
			wgate: ld.Matrix(blk(l, "indexer_compressor_gate.weight"), E, 2*id),
			ape:   ld.Matrix(blk(l, "indexer_compressor_ape.weight"), 2*id, 4),
			norm:  ld.Vector(blk(l, "indexer_compressor_norm.weight"), id), width: id}
		L.idxProj = ld.Matrix(blk(l, "indexer.proj.weight"), E, h.IdxHeads)
		L.idxQB = ld.Matrix(blk(l, "indexer.attn_q_b.weight"), qr, h.IdxHeads*id)
	}
	return L
}

// hashTable reads layer l's ffn_gate_tid2eid: an I32 table of
// n_expert_used expert ids per token id, each below expert_count.
func hashTable(d *model.Desc, src model.DenseSource, l int) ([]int32, error) {
	hp := d.HParams
	name := blk(l, "ffn_gate_tid2eid.weight")
	ti, ok := d.Tensor(name)
	if !ok || ti.Type != quant.I32 || len(ti.Dims) != 2 || ti.Dims[0] != uint64(hp.NExpertUsed) || ti.Dims[1] != uint64(hp.NVocab) {
		return nil, fmt.Errorf("%w: deepseek4: %s missing or not I32 {%d, %d}", model.ErrBadModel, name, hp.NExpertUsed, hp.NVocab)
	}
	b, err := src.TensorBytes(ti)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ids := make([]int32, len(b)/4)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		if ids[i] < 0 || int(ids[i]) >= hp.NExpert {
			return nil, fmt.Errorf("%w: deepseek4: %s[%d] = %d (want an expert below %d)", model.ErrBadModel, name, i, ids[i], hp.NExpert)
		}
	}
	return ids, nil
}

// groups splits w (rows of n groups back to back) into one matrix per
// group, as llama.cpp reshapes attn_output_a to {cols, rank, groups}.
func groups(w model.Weight, n int) []model.Weight {
	if w.Data == nil || n <= 0 || w.Rows%n != 0 {
		return nil
	}
	rs, err := w.Type.RowSize(int64(w.Cols))
	if err != nil {
		return nil
	}
	rows := w.Rows / n
	out := make([]model.Weight, n)
	for g := range out {
		out[g] = w
		out[g].Name = fmt.Sprintf("%s[group %d]", w.Name, g)
		out[g].Rows = rows
		out[g].Data = w.Data[int64(g*rows)*rs : int64((g+1)*rows)*rs]
	}
	return out
}

// checkHParams refuses hyper-parameters the graph cannot run, naming the
// first bad key and its value.
func checkHParams(hp model.HParams, h HParams) error {
	for _, c := range []struct {
		bad  bool
		key  string
		val  int
		want string
	}{
		{hp.NLayer <= 0, "block_count", hp.NLayer, "> 0"},
		{hp.NEmbd <= 0, "embedding_length", hp.NEmbd, "> 0"},
		{hp.NHead <= 0, "attention.head_count", hp.NHead, "> 0"},
		{hp.NHeadKV != 1, "attention.head_count_kv", hp.NHeadKV, "1"},
		{hp.HeadDimV != hp.HeadDim, "attention.value_length", hp.HeadDimV, fmt.Sprintf("= key_length %d", hp.HeadDim)},
		{hp.NRot <= 0 || hp.NRot%2 != 0 || hp.NRot > hp.HeadDim, "rope.dimension_count", hp.NRot, "even, > 0 and ≤ key_length"},
		{hp.MLA.QLoraRank <= 0, "attention.q_lora_rank", hp.MLA.QLoraRank, "> 0"},
		{hp.SlidingWindow <= 0, "attention.sliding_window", hp.SlidingWindow, "> 0"},
		{hp.NFFExp <= 0, "expert_feed_forward_length", hp.NFFExp, "> 0"},
		{hp.MoE.GatingFunc != gatingSqrtSoftplus, "expert_gating_func", hp.MoE.GatingFunc, "4 (sqrt-softplus)"},
		{h.HC != 4, "hyper_connection.count", h.HC, "4"},
		{h.Sinkhorn < 1, "hyper_connection.sinkhorn_iterations", h.Sinkhorn, ">= 1"},
		{h.OGroups <= 0 || hp.NHead%max(h.OGroups, 1) != 0, "attention.output_group_count", h.OGroups, fmt.Sprintf("a divisor of head_count %d", hp.NHead)},
		{h.OLora <= 0, "attention.output_lora_rank", h.OLora, "> 0"},
		{h.IdxHeads <= 0, "attention.indexer.head_count", h.IdxHeads, "> 0"},
		{h.IdxDim < hp.NRot || h.IdxDim%fwhtMin != 0, "attention.indexer.key_length", h.IdxDim, fmt.Sprintf("a multiple of %d, ≥ rope.dimension_count", fwhtMin)},
		{h.IdxTopK <= 0, "attention.indexer.top_k", h.IdxTopK, "> 0"},
	} {
		if c.bad {
			return fmt.Errorf("%w: deepseek4.%s = %d (want %s)", model.ErrBadModel, c.key, c.val, c.want)
		}
	}
	for l := 0; l < hp.NLayer; l++ {
		if r := h.ratio(l); r != 0 && r != 4 && r != 128 {
			return fmt.Errorf("%w: deepseek4.attention.compress_ratios[%d] = %d (want 0, 4 or 128)", model.ErrBadModel, l, r)
		}
	}
	if h.HashLayers > hp.NLayer {
		return fmt.Errorf("%w: deepseek4.hash_layer_count = %d (want ≤ block_count %d)", model.ErrBadModel, h.HashLayers, hp.NLayer)
	}
	switch hp.RopeScalingType {
	case "", "none", "yarn":
	default:
		return fmt.Errorf("%w: deepseek4: rope scaling %q is not supported", model.ErrUnsupportedArch, hp.RopeScalingType)
	}
	return nil
}

// angles is a rotation's table of one position (cos, sin per pair).
type angles interface {
	TableLen() int
	Angles(pos int, cs []float32)
}

// compressRope is the rotation of the compressed layers, their compressed
// rows and the indexer: compress_rope_freq_base with the file's scaling
// (YaRN: freq_scale 1/factor, ext_factor 1, the corrections of
// rope.scaling.original_context_length and the betas), whose attention
// factor llama.cpp sets to 1/(1 + 0.1·ln(1/freq_scale)) (dsv4_rope_attn_factor,
// which ggml's rope_yarn multiplies back to about 1).
func compressRope(d *model.Desc, h HParams) (angles, error) {
	dc := *d
	dc.HParams.RopeFreqBase = h.CompressBase
	r, err := model.NewYaRN(&dc, d.HParams.NRot, 0, false)
	if err != nil {
		return nil, err
	}
	r.AttnFactor = 1
	if r.ExtFactor != 0 {
		r.AttnFactor = 1 / (1 + float32(float32(0.1)*float32(math.Log(float64(1/r.FreqScale)))))
	}
	return &r, nil
}

// limit is layer l's entry of a per-layer limit list (0 when absent).
func limit(list []float32, l int) float32 {
	if l < 0 || l >= len(list) {
		return 0
	}
	return list[l]
}

// swiGLU is the SwiGLU of a layer with limit L (none when ≤ clampEps), as
// llama.cpp computes it for deepseek4: silu(min(gate, L))·clamp(up, −L, L)
// (ggml_clamp of both, then ggml_swiglu_split).
func swiGLU(L float32) model.Activation {
	if L <= clampEps {
		return model.SwiGLU
	}
	return func(out, gate, up []float32) {
		for i, g := range gate {
			out[i] = model.SiLU(min(g, L)) * min(max(up[i], -L), L)
		}
	}
}

// Desc implements model.Model.
func (m *Model) Desc() *model.Desc { return m.d }

// Router implements model.Model.
func (m *Model) Router(l int) model.RouterSpec {
	if l < 0 || l >= len(m.router) {
		return model.RouterSpec{Gating: model.ScoredTopK, Score: sqrtSoftplus, NExpert: m.d.HParams.NExpert, K: 1}
	}
	return m.router[l]
}

// NewState implements model.Model: the layout of state.go.
func (m *Model) NewState(nCtx int, kv model.KVType) (*model.State, error) {
	return m.alloc.NewState(nCtx, kv)
}

// kqScale is the attention's 1/√head_dim.
func (m *Model) kqScale() float32 { return 1 / float32(math.Sqrt(float64(m.hd))) }
