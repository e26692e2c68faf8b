// Package family is where a model family registers: one value, from the
// family's own package (model/<family>), owns everything pipe knows about
// the architecture, so that adding a family touches its folder, one import
// line in model/archs, the README and testdata.
//
// The value is a Family: the model side (model.Family) and the generator
// side (gen.Family) of one architecture, found by its GGUF
// general.architecture string:
//
//   - the metadata keys it reads beyond the common ones (ReadHParams with a
//     model.MetaReader; its own hyper-parameter struct is kept in
//     model.Desc.FamilyHP beside the common model.HParams);
//   - its model, composed from the shared pieces of package model (the
//     decoder skeleton, attention, shared experts, routers, recurrent
//     mixers: New);
//   - the size of one sequence's state, KV cache and recurrent state
//     (StateBytes: the stages ask model.StateBytes, never a family name);
//   - its `pipe gen` presets, tensor list and metadata (Presets,
//     CheckPreset, Tensors, Metadata) built from gen's shared pieces;
//   - its built-in tokenizer and chat template (Vocab);
//   - its own rows of `pipe inspect` (InspectRows).
//
// Registration is by import, as database/sql drivers: the family's package
// calls Register from its init, and package model/archs imports every
// family, so a program that imports model/archs runs them all.
//
// Every family pipe runs is registered this way (model/archs lists them);
// neither model nor gen nor the stages switch on an architecture's name.
package family

import (
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
)

// Family is everything about one architecture family. Arch is the one
// method both sides share.
type Family interface {
	model.Family
	gen.Family
}

// Register makes f runnable (model) and generatable (gen). It is called
// once, from the family package's init; a second family of the same
// architecture, or a preset name already taken, panics.
func Register(f Family) {
	model.RegisterFamily(f)
	gen.RegisterFamily(f)
}
