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
//
// # Adding a family
//
// A new family is a folder model/<family> with its Family value (family.go:
// ReadHParams, New, StateBytes, TokenWork, InspectRows; gen.go: Presets,
// CheckPreset, Tensors, Metadata, Vocab), its model composed from package
// model's pieces, and its tests; one import line in model/archs; its lines
// in README.md; its goldens under testdata (testdata/golden and the two
// logits fingerprints in cmd/pipe/testdata/logits.sha256). What only the
// family computes stays in its folder behind a hook of the shared pieces:
// a router score no other family uses is its model.Scorer in its
// model.RouterSpec (model.ScoredTopK: DeepSeek-V4's √softplus lives in
// model/deepseek4/gating.go, not in router), hash routing masks its own
// router logits before the MoE seam (model/deepseek4/forward.go), its
// per-sequence state is its StateBytes and NewState.
//
// The last family added, deepseek4, shows it. One commit that removes it
// again (model/deepseek4, its import line, its README lines, its testdata;
// made on a scratch branch and not kept) leaves go build ./..., go vet ./...
// and the other families' tests (go test -short ./model/... ./router/
// ./decode/... ./cmd/pipe) passing, and the diff from that commit back to
// the tree with deepseek4 lists nothing else (102 files, 4009 insertions,
// 10 deletions):
//
//	README.md                                    |  27 +++---
//	cmd/pipe/testdata/logits.sha256              |   2 +
//	model/archs/archs.go                         |   1 +
//	model/deepseek4/*.go (13 files)              | 2134 +++++++
//	testdata/golden/README.md                    |  54 ++
//	testdata/golden/models/tiny-deepseek4-*.gguf (2), logs/ (1)
//	testdata/golden/runs/tiny-deepseek4-*/ (12 runs)
//	testdata/golden/tensors/tiny-deepseek4-F32/ (52 dumps)
//	testdata/golden/deepseek4-hash/ (2 models, 1 log, 12 runs)
//	testdata/golden/prompts-long/p5_long.txt     |   1 +
//	testdata/golden/tools/dsv4-hash/ (2 files)   | 106 +++
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
