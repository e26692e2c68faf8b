package bailingmoe3

// family.go: the bailingmoe3 family's value (family.Family) and its model
// side beyond New: its own metadata keys, the state of its KDA and MLA
// layers, a decode token's work and its `pipe inspect` rows.

import (
	"fmt"
	"math"
	"strings"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the bailingmoe3 family: the model (New), its keys and state
// here, the generator side in gen.go.
type Family struct{}

// HParams are bailingmoe3's own hyper-parameters (model.Desc.FamilyHP).
type HParams struct {
	HeadDim        int     `json:"kda_head_dim"`         // kda.head_dim: a KDA head's width (keys, values, state)
	GateLowerBound float32 `json:"kda_gate_lower_bound"` // kda.gate_lower_bound (< 0)
	ConvKernel     int     `json:"conv_kernel"`          // ssm.conv_kernel: the KDA convolutions' taps
	// KDA marks the KDA layers: attention.head_count_kv[il] = 0 (llama.cpp's is_recr).
	KDA []bool `json:"kda_layers"`
	// ClampExp and ClampShExp are swiglu_clamp_exp and swiglu_clamp_shexp
	// per layer (nil: none; a limit ≤ 1e-6 is none).
	ClampExp   []float32 `json:"swiglu_clamp_exp,omitempty"`
	ClampShExp []float32 `json:"swiglu_clamp_shexp,omitempty"`
	// NextN is nextn_predict_layers: the last NextN (MTP) blocks of
	// block_count, loaded as llama.cpp loads them and not run.
	NextN int `json:"nextn_predict_layers,omitempty"`
}

// IsKDA reports whether layer l is a KDA layer.
func (h HParams) IsKDA(l int) bool { return l >= 0 && l < len(h.KDA) && h.KDA[l] }

// Arch implements family.Family.
func (Family) Arch() string { return "bailingmoe3" }

// ReadHParams implements model.Family: the KDA keys (kda.head_dim,
// kda.safe_gate, which must be true as llama.cpp asserts,
// kda.gate_lower_bound, which must be < 0, ssm.conv_kernel), the layer
// kinds from the per-layer attention.head_count_kv, the SwiGLU limits, and
// nextn_predict_layers, below block_count (the NextN layers are not run).
func (Family) ReadHParams(r *model.MetaReader, h *model.HParams) (any, error) {
	own := HParams{
		HeadDim:    r.Int("kda.head_dim", true, model.MaxDim),
		ConvKernel: r.Int("ssm.conv_kernel", true, 64),
	}
	if v, ok := r.Get("kda.safe_gate"); ok {
		if b, _ := v.Bool(); !b {
			return nil, fmt.Errorf("%w: bailingmoe3.kda.safe_gate = false (llama.cpp runs safe gates only)", model.ErrUnsupportedArch)
		}
	}
	lb, err := lowerBound(r)
	if err != nil {
		return nil, err
	}
	own.GateLowerBound = lb
	own.NextN = r.Int("nextn_predict_layers", false, model.MaxDim)
	if r.Known() && h.NLayer > 0 && own.NextN >= h.NLayer {
		return nil, r.Bad("bailingmoe3.nextn_predict_layers %d is not below block_count %d", own.NextN, h.NLayer)
	}
	own.KDA = make([]bool, h.NLayer)
	for l := range own.KDA {
		own.KDA[l] = l < len(h.HeadCountKVLayers) && h.HeadCountKVLayers[l] == 0
	}
	if own.ClampExp, err = r.Limits("swiglu_clamp_exp", h.NLayer); err != nil {
		return nil, err
	}
	if own.ClampShExp, err = r.Limits("swiglu_clamp_shexp", h.NLayer); err != nil {
		return nil, err
	}
	return own, r.Err()
}

// lowerBound reads kda.gate_lower_bound, required and finite below 0
// (llama.cpp asserts it).
func lowerBound(r *model.MetaReader) (float32, error) {
	v, ok := r.Get("kda.gate_lower_bound")
	if !ok {
		if !r.Known() {
			return 0, nil
		}
		return 0, r.Bad("bailingmoe3.kda.gate_lower_bound is missing")
	}
	x, isNum := v.Float()
	if !isNum || !(x < 0) || math.IsInf(x, 0) {
		return 0, r.Bad("bailingmoe3.kda.gate_lower_bound = %v (want a finite number < 0)", v)
	}
	return float32(x), nil
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// own is d's bailingmoe3 hyper-parameters (zero for a description without).
func own(d *model.Desc) HParams {
	h, _ := d.FamilyHP.(HParams)
	return h
}

// kdaLayers counts the KDA layers that run.
func kdaLayers(d *model.Desc) int {
	n, h := 0, own(d)
	for l := 0; l < runLayers(d); l++ {
		if h.IsKDA(l) {
			n++
		}
	}
	return n
}

// kdaFloats is one KDA layer's state: three convolutions' last K-1 inputs
// of d_inner channels and an S×S matrix per head (llama.cpp's n_embd_r +
// n_embd_s), in float32.
func kdaFloats(d *model.Desc) int {
	h := own(d)
	D := d.HParams.NHead * h.HeadDim
	return 3*max(h.ConvKernel-1, 0)*D + d.HParams.NHead*h.HeadDim*h.HeadDim
}

// StateBytes implements model.Family: the MLA layers' latent rows
// (kv_lora_rank + n_rot per position) and the KDA layers' float32 states,
// of the layers that run (the NextN layers keep none).
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp := &d.HParams
	nk := kdaLayers(d)
	kv := model.KVStateBytes(runLayers(d)-nk, hp.MLA.KVLoraRank+hp.NRot, positions, elemBytes)
	if kv == 1<<62 {
		return kv
	}
	return kv + int64(nk)*4*int64(kdaFloats(d))
}

// StateKeys implements model.StateKeyer: the keys that size a KDA layer's
// state.
func (Family) StateKeys(d *model.Desc) string {
	h := own(d)
	return fmt.Sprintf("kda.head_dim %d, attention.head_count %d, ssm.conv_kernel %d", h.HeadDim, d.HParams.NHead, h.ConvKernel)
}

// TokenWork implements model.Family: the MLA layers' latent rows at the
// depth, each KDA layer's S×S state per head read and written and its
// three convolutions.
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp, h := &d.HParams, own(d)
	nk := kdaLayers(d)
	D := hp.NHead * h.HeadDim
	return model.TokenWork{
		Attention: model.AttentionWork(runLayers(d)-nk, hp.MLA.KVLoraRank+hp.NRot, positions),
		Recurrent: 2 * int64(nk) * int64(hp.NHead*h.HeadDim*h.HeadDim),
		Conv:      int64(nk) * int64(3*h.ConvKernel*D),
	}
}

// InspectRows implements model.Family: the layer kinds (which are gated
// MLA), the KDA and MLA shapes and the SwiGLU limits (the dense / expert
// split and the gating are common rows) and the NextN layers.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	hp, h := &d.HParams, own(d)
	nk, run := kdaLayers(d), runLayers(d)
	var mla []string
	for l := 0; l < run; l++ {
		if !h.IsKDA(l) {
			mla = append(mla, fmt.Sprint(l))
		}
	}
	return []model.InspectRow{
		{Key: "layers", Value: fmt.Sprintf("%d KDA + %d gated MLA (MLA: %s)", nk, run-nk, strings.Join(mla, " "))},
		{Key: "NextN (MTP) layers", Value: nextnRow(run, h.NextN)},
		{Key: "KDA", Value: fmt.Sprintf("%d heads of %d, conv %d taps, per-channel decay ≥ e^%g, state %d floats/layer", hp.NHead, h.HeadDim, h.ConvKernel, h.GateLowerBound, kdaFloats(d))},
		{Key: "MLA", Value: fmt.Sprintf("latent %d + %d RoPE (normal), q %d, v %d, head-wise sigmoid output gate", hp.MLA.KVLoraRank, hp.NRot, hp.MLA.KeyLength, hp.MLA.ValLength)},
		{Key: "SwiGLU limits", Value: limitsRow(h)},
		{Key: "shared expert width", Value: fmt.Sprint(sharedWidth(*hp))},
	}
}

// limitsRow names the layers with SwiGLU limits.
func limitsRow(h HParams) string {
	var parts []string
	for _, c := range []struct {
		name string
		list []float32
	}{{"experts", h.ClampExp}, {"shared/dense", h.ClampShExp}} {
		var ls []string
		for l, x := range c.list {
			if x > clampEps {
				ls = append(ls, fmt.Sprintf("%d:%g", l, x))
			}
		}
		if len(ls) > 0 {
			parts = append(parts, c.name+" "+strings.Join(ls, " "))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// nextnRow is the inspect row of the NextN layers.
func nextnRow(run, nextn int) string {
	switch nextn {
	case 0:
		return "none"
	case 1:
		return fmt.Sprintf("1 (blk.%d: loaded, not run)", run)
	}
	return fmt.Sprintf("%d (blk.%d-%d: loaded, not run)", nextn, run, run+nextn-1)
}
