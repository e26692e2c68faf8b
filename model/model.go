// Package model holds the mathematics of the supported architectures: what a
// decode step computes, independent of where the weights come from.
//
// The seam the whole engine is built around is MoE: an architecture computes
// attention, norms and the router logits itself, then hands the normalised
// hidden states and the router logits of one layer to a MoE implementation
// ("give me these tokens' routed-expert output") that the stages package
// provides. The stages decide where expert bytes come from (a whole-file mmap,
// or O_DIRECT reads into a bounded cache) and in which order experts are
// computed; the architecture supplies the per-expert math through ExpertFFN
// and the gating rule through RouterSpec. Nothing here names a stage, and the
// stages never name an architecture: a family registers one Family value
// (family.go; package family's Register, from the family's own package) and
// is found by its GGUF general.architecture string (package model/archs
// imports them all). The engine asks the family for what differs: its own
// metadata keys (MetaReader), its model, its per-sequence state
// (StateBytes) and its inspect rows.
//
// Architectures share one decoder-block skeleton (block.go): a Decoder is
// the embedding, Layers of Attention (weights plus per-layer geometry: heads,
// head width, window, rotation, and optional biases, norms and sinks) and an
// FFN hook (the feed-forward half, where architectures differ most), and the
// output head. The KV cache (State) holds one row width per layer.
// ForwardBatch (batch.go) runs several sequences, each with its own State,
// through one pass: attention per sequence, each FFN layer (and so the MoE)
// once over all their tokens. A State in embeddings mode
// (State.Embeddings) makes Forward return each token's output-norm row
// instead of its logits; Pool and Normalize are llama.cpp's poolings and
// embd_normalize (embed.go).
//
// Buffers: a single-token Forward (decode) reuses the activations, the
// quantized inputs and the logit row kept in its State, so the logits it
// returns are valid until the next Forward on that State; a multi-token
// pass (prefill) makes its buffers for the call. A Model reads its dense
// weights from a DenseSource it does not own (the caller keeps it alive and unchanged until Close); expert bytes are
// passed per call and are only read for the duration of that call. A Model is
// safe for concurrent use by ExpertFFN calls (they only read weights and
// write the caller's buffers); Forward on one State is not re-entrant.
package model

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/clock"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// Sentinel errors.
var (
	// ErrUnsupportedArch: no architecture of the file's name is registered, or
	// the file uses a feature its architecture does not implement.
	ErrUnsupportedArch = errors.New("unsupported architecture")
	// ErrContextFull: the tokens do not fit in the context window.
	ErrContextFull = errors.New("context window exceeded")
	// ErrBadModel: a tensor the architecture needs is missing or has the wrong shape.
	ErrBadModel = errors.New("bad model")
)

// DenseSource returns the bytes of a dense (non-expert) tensor. The slice
// stays valid and unchanged until the source is closed by its owner.
type DenseSource interface {
	TensorBytes(ti *gguf.TensorInfo) ([]byte, error)
}

// MoE computes the routed-expert output of one layer for a batch of tokens.
// x[t] is token t's normalised FFN input, logits[t] its router logits; out[t]
// must be overwritten with Σ_rank weight·expert(x[t]) summed in top-k rank
// order. Implementations may read experts from anywhere but must produce the
// same bits whatever their I/O order.
type MoE interface {
	RunMoE(ctx context.Context, layer int, x, logits [][]float32, out [][]float32) error
}

// Gating names how router logits become expert weights.
type Gating int

const (
	// SoftmaxTopK: softmax over all experts, top-k, optionally renormalise (Qwen).
	SoftmaxTopK Gating = iota
	// TopKSoftmax: top-k over the raw logits, softmax over the k selected (gpt-oss).
	TopKSoftmax
	// SigmoidTopK: a sigmoid of each logit, top-k, optionally renormalise
	// (llama.cpp's sigmoid gating: DeepSeek-V3, GLM-4.7-Flash).
	SigmoidTopK
	// ScoredTopK: the family's own score (RouterSpec.Score) of each logit,
	// then as SigmoidTopK: top-k (with the bias and groups), optionally
	// renormalise, scale. A gating only one family uses (DeepSeek-V4's
	// √softplus) lives in that family's folder, not here or in router.
	ScoredTopK
)

// Scorer is a family-supplied gate score for ScoredTopK: it overwrites each
// router logit in p with that expert's gate probability, in place. It runs
// on the decode hot path for every token and layer, so it must not
// allocate, keep p or depend on anything but p's values (routing is a pure
// function of the logits).
type Scorer func(p []float32)

// RouterSpec is the gating rule of a layer. The fields after Normalize are
// llama.cpp's build_moe_ffn options; their zero values leave the rule as
// the Gating alone defines it.
type RouterSpec struct {
	Gating    Gating
	NExpert   int
	K         int  // experts used per token
	Normalize bool // renormalise the selected weights to sum 1 (SoftmaxTopK, SigmoidTopK, ScoredTopK)
	// Score is ScoredTopK's per-logit score, supplied by the family (a
	// top-level function, so copying the spec allocates nothing); nil for
	// the other gatings.
	Score Scorer
	// Scale multiplies the weights after renormalisation (expert_weights_scale);
	// 0 and 1 leave them.
	Scale float32
	// Bias is added to the gate probabilities to choose the experts, not to
	// weight them (exp_probs_b); nil: none.
	Bias []float32
	// Groups > 1 limits the choice to experts of GroupsUsed of Groups equal
	// groups (expert_group_count, expert_group_used_count): the groups whose
	// two best (biased) probabilities sum highest.
	Groups, GroupsUsed int
}

// ExpertFFN is an architecture's per-expert math. parts are the expert's byte
// ranges in Desc.Experts order (e.g. gate, up, down). x holds the inputs of the
// n tokens routed to this expert (n×n_embd, token-major), out receives the
// expert's unweighted outputs (n×n_embd). scratch is owned by the caller, one
// per concurrent caller; the products go through scratch.On (the model's
// pool, or the caller's thread alone). The result for a token does not
// depend on which other tokens share the call.
type ExpertFFN interface {
	ComputeExpert(layer, expert int, parts [][]byte, n int, x, out []float32, scratch *Scratch) error
}

// ExpertWork is one expert's share of a batch (BatchExpertFFN): the
// expert's parts as for ComputeExpert, the inputs of its N tokens (N×n_embd)
// and its outputs.
type ExpertWork struct {
	Expert int
	Parts  [][]byte
	N      int
	X, Out []float32
}

// BatchExpertFFN is implemented by architectures that compute several
// experts of one layer together (one pool dispatch per projection for all
// of them instead of one per expert). Each expert's output equals
// ComputeExpert's bit for bit. Works may share an X slice (the same token);
// their Out slices must be distinct.
type BatchExpertFFN interface {
	ComputeExperts(layer int, work []ExpertWork, scratch *Scratch) error
}

// Scratch holds per-goroutine temporaries for ExpertFFN.
type Scratch struct {
	A, B     []float32
	Products []kernels.Product // BatchExpertFFN's products, reused
	// Local, when set, is where ComputeExpert multiplies (see On): the
	// caller runs the expert whole on one of the pool's threads
	// (kernels.Pool.ParallelWith), one Scratch and Local per thread.
	Local    *kernels.Local
	ins      []*Inputs
	nIns     int
	activate *activateJob // ComputeExperts' activation step (experts.go)
}

// MatMuler multiplies a matrix by n vectors: a *kernels.Pool (rows split
// over its threads) or a *kernels.Local (the calling goroutine alone), with
// identical results.
type MatMuler interface {
	MatMul(t quant.Type, w []byte, rows, cols int, x []float32, n int, y []float32) error
}

// On is where an ExpertFFN computing with s multiplies: s.Local if set,
// else pool.
func (s *Scratch) On(pool *kernels.Pool) MatMuler {
	if s.Local != nil {
		return s.Local
	}
	return pool
}

// Input returns the Inputs of x among those handed out since ResetInputs:
// works sharing one x slice share its quantizations.
func (s *Scratch) Input(x []float32) *Inputs {
	for _, in := range s.ins[:s.nIns] {
		if len(x) > 0 && len(in.x) == len(x) && &in.x[0] == &x[0] {
			return in
		}
	}
	if s.nIns == len(s.ins) {
		s.ins = append(s.ins, new(Inputs))
	}
	in := s.ins[s.nIns]
	s.nIns++
	in.Reset(x)
	return in
}

// ResetInputs forgets the inputs handed out by Input (keeping the buffers).
func (s *Scratch) ResetInputs() {
	for _, in := range s.ins[:s.nIns] {
		in.Reset(nil)
	}
	s.nIns = 0
}

// Grow returns s's buffers resized to at least n floats each.
func (s *Scratch) Grow(n int) ([]float32, []float32) {
	if cap(s.A) < n {
		s.A = make([]float32, n)
		s.B = make([]float32, n)
	}
	return s.A[:n], s.B[:n]
}

// KVType is the element type of the KV cache.
type KVType int

const (
	KVF16 KVType = iota // llama.cpp's default
	KVF32
)

// String implements fmt.Stringer.
func (k KVType) String() string {
	if k == KVF32 {
		return "f32"
	}
	return "f16"
}

// Model is one loaded architecture instance.
type Model interface {
	ExpertFFN
	Desc() *Desc
	// Router returns the gating rule of layer.
	Router(layer int) RouterSpec
	// NewState allocates a KV cache for nCtx positions.
	NewState(nCtx int, kv KVType) (*State, error)
	// Forward feeds tokens at the state's next positions and returns the
	// logits of every fed position when all is true, else of the last one.
	// The rows may be the state's reused buffers: valid until the next
	// Forward on st.
	Forward(ctx context.Context, st *State, tokens []int32, moe MoE, all bool) ([][]float32, error)
	// ForwardBatch is Forward over several sequences in one pass (batch.go):
	// per sequence the rows Forward would return for it alone, bit for bit;
	// the MoE sees every sequence's tokens of a layer at once.
	ForwardBatch(ctx context.Context, seqs []Seq, moe MoE) ([][][]float32, error)
}

// RouterPeeker is implemented by architectures that can apply a layer's
// router to a hidden state of an earlier layer: speculative prefetch uses
// layer ℓ+1's router on layer ℓ's router input (what the architecture hands
// a RouterInputMoE: the normalised FFN input for qwen3moe and gpt-oss, the
// attention output for gemma4) to guess which experts ℓ+1 will route before
// its attention has run. The guess only decides what is read early, never
// what is computed. x holds n router inputs (rows of n_embd), logits gets n
// rows of the layer's n_expert logits: a prompt pass guesses for all its
// tokens at once. It is called by the goroutine that runs Forward (from
// inside the MoE), never concurrently with another call on the same model,
// so implementations may keep scratch between calls.
type RouterPeeker interface {
	PeekRouter(layer int, x []float32, n int, logits []float32) error
}

// Timings accumulate where a model's Forward time goes, outside the MoE
// seam (the stages time the experts themselves). Owned by the caller of
// Forward; read between calls.
type Timings struct {
	Attention time.Duration // norms, Q/K/V/O projections, RoPE, KV store, attention
	Router    time.Duration // FFN norm and router logits
	LMHead    time.Duration // output norm and LM head
	Embed     time.Duration // token embedding rows
}

// Add accumulates o into t.
func (t *Timings) Add(o Timings) {
	t.Attention += o.Attention
	t.Router += o.Router
	t.LMHead += o.LMHead
	t.Embed += o.Embed
}

// Options configure a model instance.
type Options struct {
	Pool *kernels.Pool // matrix kernels; required
	// ExpertsUsed overrides k when > 0 (lossy but deterministic).
	ExpertsUsed int
	// Timings, if not nil, accumulates the Forward time breakdown.
	Timings *Timings
	// Clock is what Timings are read from; nil is the wall clock.
	Clock clock.Clock
}

// Weight is a resident 2-D weight matrix: Rows output rows of Cols inputs.
type Weight struct {
	Name       string
	Type       quant.Type
	Rows, Cols int
	Data       []byte
}

// ExpertsUsed is the number of experts per token: the file's, or opt's
// override when set (it must not exceed the experts there are).
func ExpertsUsed(hp HParams, opt Options) (int, error) {
	if opt.ExpertsUsed <= 0 {
		return hp.NExpertUsed, nil
	}
	if opt.ExpertsUsed > hp.NExpert {
		return 0, fmt.Errorf("--n-expert-used %d exceeds the model's %d experts", opt.ExpertsUsed, hp.NExpert)
	}
	return opt.ExpertsUsed, nil
}
