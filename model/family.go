package model

// family.go: the model side of a family (Family) and the registry of the
// architectures pipe runs. A family registers one value, from its own
// package (package family's Register, which also hands the value to gen);
// the engine finds it by the GGUF general.architecture string and asks it,
// never a switch on the name, for everything that differs between
// families: the metadata keys beyond the common ones (ReadHParams), the
// model (New), the per-sequence state a context needs (StateBytes), a token's work
// beside the weights (TokenWork) and
// the lines `pipe inspect` shows (InspectRows).

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Family is the model side of one architecture family.
type Family interface {
	// Arch is the GGUF general.architecture the family runs.
	Arch() string
	// ReadHParams reads the family's own metadata keys with r (which
	// reads arch.-prefixed keys and collects the first error) after the
	// common ones are in h, and returns the family's hyper-parameter
	// value, kept in Desc.FamilyHP (nil when it has none); it refuses
	// values it cannot run with r.Bad. It may fill defaults in h that
	// the family's keys imply.
	ReadHParams(r *MetaReader, h *HParams) (any, error)
	// New builds the model described by d.
	New(d *Desc, src DenseSource, opt Options) (Model, error)
	// StateBytes is the memory one sequence's state takes for a context
	// of positions positions with KV elements of elemBytes bytes: the KV
	// cache of its attention layers and any recurrent state, saturating
	// at 1<<62 instead of overflowing.
	StateBytes(d *Desc, positions, elemBytes int) int64
	// TokenWork is the state one decode token at a depth of positions
	// reads and writes beside the weights (work.go): attention over the
	// KV cache, recurrent state, short convolutions.
	TokenWork(d *Desc, positions int) TokenWork
	// InspectRows are the family's own rows of `pipe inspect`'s
	// hyper-parameter table, printed after the common ones.
	InspectRows(d *Desc) []InspectRow
}

// InspectRow is one row of `pipe inspect`'s hyper-parameter table.
type InspectRow struct {
	Key   string
	Value string
}

var (
	regMu    sync.Mutex
	registry = map[string]Family{}
)

// RegisterFamily makes family f available under f.Arch(). It is called
// once, from the family package's init (through package family's
// Register); a second family of the same name panics.
func RegisterFamily(f Family) {
	regMu.Lock()
	defer regMu.Unlock()
	arch := f.Arch()
	if _, dup := registry[arch]; dup {
		panic("model: architecture registered twice: " + arch)
	}
	registry[arch] = f
}

// Lookup returns the family registered under arch.
func Lookup(arch string) (Family, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	f, ok := registry[arch]
	return f, ok
}

// Runnable reports whether an architecture is registered.
func Runnable(arch string) bool {
	_, ok := Lookup(arch)
	return ok
}

// Architectures lists the registered architectures.
func Architectures() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var s []string
	for a := range registry {
		s = append(s, a)
	}
	sort.Strings(s)
	return s
}

// New builds the model described by d.
func New(d *Desc, src DenseSource, opt Options) (Model, error) {
	f, ok := Lookup(d.Arch)
	if !ok {
		return nil, fmt.Errorf("%w: %q (runnable: %v)", ErrUnsupportedArch, d.Arch, Architectures())
	}
	if opt.Pool == nil {
		return nil, errors.New("model: Options.Pool is nil")
	}
	return f.New(d, src, opt)
}

// StateBytes is the memory one sequence's state takes for a context of
// positions positions with KV elements of elemBytes bytes, as d's family
// sizes it (EstimateStateBytes for an architecture that is not
// registered, which nothing runs).
func StateBytes(d *Desc, positions, elemBytes int) int64 {
	if f, ok := Lookup(d.Arch); ok {
		return f.StateBytes(d, positions, elemBytes)
	}
	return EstimateStateBytes(&d.HParams, positions, elemBytes)
}

// InspectRows are the rows d's family adds to `pipe inspect`'s
// hyper-parameter table (none for an architecture that is not registered).
func InspectRows(d *Desc) []InspectRow {
	if f, ok := Lookup(d.Arch); ok {
		return f.InspectRows(d)
	}
	return nil
}

// StateKeyer is implemented by a family whose state has a part no context
// size changes (recurrent layers): the metadata keys that size it, for an
// error that says which.
type StateKeyer interface {
	StateKeys(d *Desc) string
}

// StateKeys names the metadata keys that size d's recurrent state: its
// family's answer (StateKeyer), else the shared recurrent mixers' ssm.*
// keys.
func StateKeys(d *Desc) string {
	if f, ok := Lookup(d.Arch); ok {
		if k, ok := f.(StateKeyer); ok {
			return k.StateKeys(d)
		}
	}
	h := &d.HParams
	return fmt.Sprintf("ssm.conv_kernel %d, ssm.inner_size %d, ssm.state_size %d, ssm.group_count %d", h.SSM.ConvKernel, h.SSM.InnerSize, h.SSM.StateSize, h.SSM.GroupCount)
}

// KVStateBytes is the KV cache of layers attention layers of row floats
// per position (K and V together) for positions positions of elemBytes
// (at least 2) bytes each, saturating at 1<<62.
func KVStateBytes(layers, row, positions, elemBytes int) int64 {
	per := int64(layers) * int64(row) * int64(max(elemBytes, 2))
	if per > 0 && int64(positions) > (1<<62)/per {
		return 1 << 62
	}
	return per * int64(positions)
}

// AttentionOnly is what a family embeds whose only per-sequence state is
// a KV cache in every layer, sized as the widest layer
// (AttentionStateBytes), that reads only the common metadata keys and adds
// no rows to pipe inspect: it supplies ReadHParams, StateBytes, TokenWork and
// InspectRows, and the family writes Arch and New.
type AttentionOnly struct{}

// ReadHParams implements Family: no keys of the family's own.
func (AttentionOnly) ReadHParams(*MetaReader, *HParams) (any, error) { return nil, nil }

// StateBytes implements Family: a KV cache in every layer.
func (AttentionOnly) StateBytes(d *Desc, positions, elemBytes int) int64 {
	return AttentionStateBytes(&d.HParams, positions, elemBytes)
}

// InspectRows implements Family: none beyond the common rows.
func (AttentionOnly) InspectRows(*Desc) []InspectRow { return nil }

// AttentionStateBytes is the state of a model whose every layer keeps K
// and V rows of its KV heads (n_head_kv × head_dim each) per position.
func AttentionStateBytes(hp *HParams, positions, elemBytes int) int64 {
	return KVStateBytes(hp.NLayer, 2*hp.NHeadKV*hp.HeadDim, positions, elemBytes)
}

// HybridStateBytes is the state of a model whose layers keep either K and
// V rows of its KV heads (n_head_kv × head_dim each) per position or,
// where recurrent(il), recFloats float32 of recurrent state.
func HybridStateBytes(hp *HParams, recurrent func(il int) bool, recFloats, positions, elemBytes int) int64 {
	nRec := 0
	for il := 0; il < hp.NLayer; il++ {
		if recurrent(il) {
			nRec++
		}
	}
	kv := KVStateBytes(hp.NLayer-nRec, 2*hp.NHeadKV*hp.HeadDim, positions, elemBytes)
	if kv == 1<<62 {
		return kv
	}
	return kv + int64(nRec)*4*int64(recFloats)
}

// EstimateStateBytes sizes the state of an architecture no family
// describes from the shared HParams alone: the attention layers' KV cache
// of HParams.KVRow per position plus the delta-net layers' float32 states
// (HParams.RecurrentFloats each).
func EstimateStateBytes(hp *HParams, positions, elemBytes int) int64 {
	nRec := hp.RecurrentLayers()
	per := int64(hp.NLayer-nRec) * int64(hp.KVRow()) * int64(max(elemBytes, 2))
	if per > 0 && int64(positions) > (1<<62)/per {
		return 1 << 62
	}
	return per*int64(positions) + int64(nRec)*4*int64(hp.RecurrentFloats())
}
