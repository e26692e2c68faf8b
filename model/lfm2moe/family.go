package lfm2moe

// family.go: the lfm2moe family's value (family.Family) and its model
// side: its own metadata key, its per-sequence state and its inspect rows.

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the lfm2moe family: the model (New), the keys, state and
// inspect rows here, the generator side in gen.go.
type Family struct{}

// HParams are lfm2moe's own hyper-parameters (model.Desc.FamilyHP).
type HParams struct {
	// ShortConvL is shortconv.l_cache: the taps of the short-conv layers,
	// the layers whose attention.head_count_kv is 0.
	ShortConvL int `json:"shortconv_l_cache"`
}

// Arch implements family.Family.
func (Family) Arch() string { return "lfm2moe" }

// ReadHParams implements model.Family: shortconv.l_cache.
func (Family) ReadHParams(r *model.MetaReader, _ *model.HParams) (any, error) {
	return HParams{ShortConvL: r.Int("shortconv.l_cache", false, model.MaxDim)}, nil
}

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}

// convLayer reports whether layer il is a short-conv layer (no KV heads:
// llama.cpp's lfm2 is_recr).
func convLayer(hp *model.HParams, il int) bool {
	return il < len(hp.HeadCountKVLayers) && hp.HeadCountKVLayers[il] == 0
}

// convLayers is the number of short-conv layers.
func convLayers(hp *model.HParams) int {
	n := 0
	for il := 0; il < hp.NLayer; il++ {
		if convLayer(hp, il) {
			n++
		}
	}
	return n
}

// convFloats is one short-conv layer's state: its last l_cache-1 inputs of
// n_embd (llama.cpp's n_embd_r).
func convFloats(d *model.Desc) int {
	own, _ := d.FamilyHP.(HParams)
	return max(own.ShortConvL-1, 0) * d.HParams.NEmbd
}

// StateBytes implements model.Family: the attention layers' K and V rows
// and the short-conv layers' float32 inputs.
func (Family) StateBytes(d *model.Desc, positions, elemBytes int) int64 {
	hp := &d.HParams
	conv := func(il int) bool { return convLayer(hp, il) }
	return model.HybridStateBytes(hp, conv, convFloats(d), positions, elemBytes)
}

// StateKeys implements model.StateKeyer: the keys that size the
// short-conv layers' state.
func (Family) StateKeys(d *model.Desc) string {
	own, _ := d.FamilyHP.(HParams)
	return fmt.Sprintf("shortconv.l_cache %d, embedding_length %d", own.ShortConvL, d.HParams.NEmbd)
}

// InspectRows implements model.Family: the short-conv layers.
func (Family) InspectRows(d *model.Desc) []model.InspectRow {
	own, _ := d.FamilyHP.(HParams)
	hp := &d.HParams
	return []model.InspectRow{
		{Key: "recurrent layers", Value: fmt.Sprintf("%d of %d (state %d floats each)", convLayers(hp), hp.NLayer, convFloats(d))},
		{Key: "shortconv l_cache", Value: fmt.Sprint(own.ShortConvL)},
	}
}

// TokenWork implements model.Family: the attention layers' K and V rows
// at the depth and each short-conv layer's convolution (l_cache taps over
// n_embd channels); the short convolutions keep no state beyond their
// inputs.
func (Family) TokenWork(d *model.Desc, positions int) model.TokenWork {
	hp := &d.HParams
	own, _ := d.FamilyHP.(HParams)
	conv := func(il int) bool { return convLayer(hp, il) }
	return model.HybridWork(hp, conv, 0, own.ShortConvL*hp.NEmbd, positions)
}
