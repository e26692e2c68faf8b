package model

import "fmt"

// MoEModel is what a Model of the routed-expert families is made of: the
// shared decoder, the expert math and one gating rule for every layer. An
// architecture embeds it, fills the decoder's layers and the experts'
// layers from its tensors, and has Model.
type MoEModel struct {
	*Decoder
	*Experts
	D    *Desc
	Spec RouterSpec
}

// NewMoEModel starts the model of d: a decoder with RMS epsilon eps and its
// embeddings and output head loaded through the returned loader, experts
// nFF wide with activation act, and the router (gating, normalize; k is the
// file's expert_used_count unless opt overrides it).
func NewMoEModel(d *Desc, src DenseSource, opt Options, nFF int, act Activation, eps float32, gating Gating, normalize bool) (*MoEModel, *Loader, error) {
	hp := d.HParams
	k, err := ExpertsUsed(hp, opt)
	if err != nil {
		return nil, nil, err
	}
	if hp.NLayer <= 0 || hp.NEmbd <= 0 || hp.NExpert <= 0 || k <= 0 || nFF <= 0 || eps <= 0 {
		return nil, nil, fmt.Errorf("%w: %s hyper-parameters %+v (expert width %d, rms eps %g)", ErrBadModel, d.Arch, hp, nFF, eps)
	}
	m := &MoEModel{D: d, Spec: RouterSpec{Gating: gating, NExpert: hp.NExpert, K: k, Normalize: normalize},
		Decoder: &Decoder{Pool: opt.Pool, NEmbd: hp.NEmbd, Eps: eps, Timings: opt.Timings, Clock: opt.Clock},
		Experts: &Experts{Arch: d.Arch, Pool: opt.Pool, NEmbd: hp.NEmbd, NFF: nFF, NExpert: hp.NExpert, Act: act}}
	ld := NewLoader(d, src)
	ld.Embeddings(m.Decoder)
	return m, ld, nil
}

// Desc implements Model.
func (m *MoEModel) Desc() *Desc { return m.D }

// Router implements Model: the same rule for every layer.
func (m *MoEModel) Router(int) RouterSpec { return m.Spec }

// Finish checks what the loader met and the vocabulary.
func (m *MoEModel) Finish(ld *Loader) (Model, error) {
	if err := ld.CheckVocab(m.Decoder, m.D.HParams.NVocab); err != nil {
		return nil, err
	}
	return m, nil
}
