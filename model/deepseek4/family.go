package deepseek4

// family.go: the deepseek4 family's value (family.Family) and its model
// side beyond New: its own metadata keys, the state of its layers, a
// decode token's work and its `pipe inspect` rows.

import (
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the deepseek4 family: the model (New), its keys and state
// here, the generator side in gen.go.
type Family struct{}

// HParams are deepseek4's own hyper-parameters (model.Desc.FamilyHP).
type HParams struct {
	Ratios       []int     `json:"compress_ratios"`              // attention.compress_ratios: 0, 4 (CSA) or 128 (HCA) per layer
	IdxHeads     int       `json:"indexer_head_count"`           // attention.indexer.head_count
	IdxDim       int       `json:"indexer_key_length"`           // attention.indexer.key_length
	IdxTopK      int       `json:"indexer_top_k"`                // attention.indexer.top_k
	OGroups      int       `json:"output_group_count"`           // attention.output_group_count
	OLora        int       `json:"output_lora_rank"`             // attention.output_lora_rank
	CompressBase float32   `json:"compress_rope_freq_base"`      // attention.compress_rope_freq_base
	HC           int       `json:"hyper_connection_count"`       // hyper_connection.count (4)
	Sinkhorn     int       `json:"hyper_connection_sinkhorn"`    // hyper_connection.sinkhorn_iterations
	HCEps        float32   `json:"hyper_connection_epsilon"`     // hyper_connection.epsilon
	HashLayers   int       `json:"hash_layer_count"`             // hash_layer_count
	ClampExp     []float32 `json:"swiglu_clamp_exp,omitempty"`   // per layer (≤ 1e-6: none)
	ClampShExp   []float32 `json:"swiglu_clamp_shexp,omitempty"` // per layer; swiglu_clamp_exp when absent
}

// ratio is layer l's compress ratio (0 outside the list).
func (h HParams) ratio(l int) int {
	if l < 0 || l >= len(h.Ratios) {
		return 0
	}
	return h.Ratios[l]
}

// Arch implements family.Family.
func (Family) Arch() string { return "deepseek4" }

// ReadHParams implements model.Family: the indexer, output, compressor,
// hyper-connection and hash-routing keys, the SwiGLU limits, and
// nextn_predict_layers, which must be 0 (files with MTP layers are not
// run). The hash-routed layers are refused later, by New.
func (Family) ReadHParams(r *model.MetaReader, h *model.HParams) (any, error) {
	own := HParams{
		IdxHeads:   r.Int("attention.indexer.head_count", true, model.MaxDim),
		IdxDim:     r.Int("attention.indexer.key_length", true, model.MaxDim),
		IdxTopK:    r.Int("attention.indexer.top_k", true, 1<<30),
		OGroups:    r.Int("attention.output_group_count", true, model.MaxDim),
		OLora:      r.Int("attention.output_lora_rank", true, model.MaxDim),
		HC:         r.Int("hyper_connection.count", true, 64),
		Sinkhorn:   r.Int("hyper_connection.sinkhorn_iterations", true, 1<<16),
		HashLayers: r.Int("hash_layer_count", true, 1<<16),
	}
	own.CompressBase = r.Float("attention.compress_rope_freq_base", 1e12)
	own.HCEps = r.Float("hyper_connection.epsilon", 1)
	if n := r.Int("nextn_predict_layers", false, model.MaxDim); n > 0 {
		return nil, fmt.Errorf("%w: deepseek4.nextn_predict_layers = %d (NextN/MTP layers)", model.ErrUnsupportedArch, n)
	}
	_, own.Ratios = r.Ints("attention.compress_ratios", true, 1<<20)
	if r.Known() && len(own.Ratios) < h.NLayer {
		return nil, r.Bad("deepseek4.attention.compress_ratios has %d entries for %d layers", len(own.Ratios), h.NLayer)
	}
	var err error
	if own.ClampExp, err = r.Limits("swiglu_clamp_exp", h.NLayer); err != nil {
		return nil, err
	}
	if own.ClampShExp, err = r.Limits("swiglu_clamp_shexp", h.NLayer); err != nil {
		return nil, err
	}
	if own.ClampShExp == nil {
		own.ClampShExp = own.ClampExp
	}
	return own, r.Err()
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// own is d's deepseek4 hyper-parameters (zero for a description without).
func own(d *model.Desc) HParams {
	h, _ := d.FamilyHP.(HParams)
	return h
}

// StateBytes implements model.Family: what NewState allocates (state.go):
// per layer a fixed part (the raw rows of the window and the compressors'
// pending rows, float32) and, on compressed layers, one row per position
// of the compressed cache (the head's width, and the indexer's on ratio-4
// layers).
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	g := geometryOf(d)
	var row, fixed int64
	for l := 0; l < d.HParams.NLayer; l++ {
		row += int64(g.rowWidth(l))
		fixed += 4 * int64(g.fixedFloats(l))
	}
	if row > 0 && int64(positions) > (1<<62)/(row*int64(max(elemBytes, 2))) {
		return 1 << 62
	}
	return row*int64(positions)*int64(max(elemBytes, 2)) + fixed
}

// TokenWork implements model.Family: a decode token reads the window's raw
// rows of every layer, the indexer rows of every block of a ratio-4 layer
// and the selected or visible compressed rows.
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	g := geometryOf(d)
	var w int64
	for l := 0; l < d.HParams.NLayer; l++ {
		w += int64(min(positions, g.window)) * int64(g.hd)
		switch g.own.ratio(l) {
		case 4:
			w += int64(positions/4)*int64(g.own.IdxDim) + int64(min(positions/4, g.own.IdxTopK))*int64(g.hd)
		case 128:
			w += int64(positions/128) * int64(g.hd)
		}
	}
	return model.TokenWork{Attention: w}
}

// InspectRows implements model.Family: the layer kinds, the attention's
// shape, the indexer, the hyper-connections, the routing and the SwiGLU
// limits (the dense / expert split is a common row).
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp, h := &d.HParams, own(d)
	var raw, csa, hca []string
	for l := 0; l < hp.NLayer; l++ {
		switch h.ratio(l) {
		case 4:
			csa = append(csa, fmt.Sprint(l))
		case 128:
			hca = append(hca, fmt.Sprint(l))
		default:
			raw = append(raw, fmt.Sprint(l))
		}
	}
	scaling := "none"
	if hp.RopeScalingType == "yarn" {
		scaling = fmt.Sprintf("YaRN ×%g over %d on the compressed layers and the indexer", hp.RopeScaleLinear, hp.RopeScalingOrigCtx)
	}
	return []model.InspectRow{
		{Key: "layers", Value: fmt.Sprintf("%d window-only (%s), %d CSA ratio 4 + indexer (%s), %d HCA ratio 128 (%s)",
			len(raw), strings.Join(raw, " "), len(csa), strings.Join(csa, " "), len(hca), strings.Join(hca, " "))},
		{Key: "FFN", Value: fmt.Sprintf("every layer MoE: routed top-%d of %d + %d shared expert(s); no dense layers", hp.NExpertUsed, hp.NExpert, max(1, hp.MoE.NShared))},
		{Key: "hash-routed layers", Value: hashRow(h.HashLayers)},
		{Key: "NextN (MTP) layers", Value: "none (files with them are refused)"},
		{Key: "attention", Value: fmt.Sprintf("%d heads of %d over one shared KV row (%d RoPE, base %g; compressed layers %g), q rank %d, window %d, sinks, output %d groups of rank %d",
			hp.NHead, hp.HeadDim, hp.NRot, hp.RopeFreqBase, h.CompressBase, hp.MLA.QLoraRank, hp.SlidingWindow, h.OGroups, h.OLora)},
		{Key: "rope scaling", Value: scaling},
		{Key: "indexer", Value: fmt.Sprintf("%d heads of %d, top %d compressed blocks (Hadamard-rotated)", h.IdxHeads, h.IdxDim, h.IdxTopK)},
		{Key: "hyper-connections", Value: fmt.Sprintf("%d streams, Sinkhorn %d iterations, eps %g", h.HC, h.Sinkhorn, h.HCEps)},
		{Key: "routing", Value: "√softplus scores; top-k by score + selection bias (exp_probs_b) on the score-routed layers"},
		{Key: "SwiGLU limit", Value: limitRow(h.ClampExp)},
		{Key: "shared expert width", Value: fmt.Sprint(hp.NFFExp * max(1, hp.MoE.NShared))},
	}
}

// hashRow names the hash-routed layers: the first n choose their experts
// by the token's ffn_gate_tid2eid row.
func hashRow(n int) string {
	switch n {
	case 0:
		return "none"
	case 1:
		return "1 (0: experts by token id, ffn_gate_tid2eid; no selection bias)"
	}
	return fmt.Sprintf("%d (0-%d: experts by token id, ffn_gate_tid2eid; no selection bias)", n, n-1)
}

// limitRow names the layers' SwiGLU limits ("none", one value for all,
// or per layer).
func limitRow(xs []float32) string {
	var ls []string
	same := true
	for l, x := range xs {
		same = same && x == xs[0]
		if x > clampEps {
			ls = append(ls, fmt.Sprintf("%d:%g", l, x))
		}
	}
	switch {
	case len(ls) == 0:
		return "none"
	case same:
		return fmt.Sprintf("%g on every layer (gate ≤ L, up in [−L, L])", xs[0])
	}
	return strings.Join(ls, " ")
}
