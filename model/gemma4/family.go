package gemma4

// family.go: the gemma4 family's value (family.Family).

import (
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/family"
)

func init() { family.Register(Family{}) }

// Family is the gemma4 family: the model (New), the generator side in
// gen.go. Its keys (the sliding-window geometry, the per-layer pattern, the
// soft-cap) are the common ones gemma4's kin share, and its state is
// model.AttentionOnly's: every layer sized as the widest (the
// full-attention layers' KV heads × key_length), the bound the engine has
// always checked.
type Family struct{ model.AttentionOnly }

// Arch implements family.Family.
func (Family) Arch() string { return "gemma4" }

// New implements model.Family.
func (Family) New(d *model.Desc, src model.DenseSource, opt model.Options) (model.Model, error) {
	return New(d, src, opt)
}
