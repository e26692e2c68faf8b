package model

import (
	"fmt"

	"github.com/pipe-engine/pipe/internal/anon"
	"github.com/pipe-engine/pipe/kernels"
)

// State is the per-sequence decode state: the KV cache, the recurrent
// layers' state and the next position. Each layer has its own row width (KV
// heads × head dim), so architectures whose layers differ in geometry
// (gemma4's sliding-window and full layers) share one cache type; a
// recurrent layer (qwen35moe's delta-net) keeps a fixed-size float32 state
// instead of KV rows, and a layer whose Mixer has no state (a MoE-only
// block) neither. A K-only layer (latent attention) stores one row per
// position and reads its values from the same rows. It is owned by one
// decode loop; not safe for
// concurrent use.
type State struct {
	NCtx int
	Pos  int // positions filled so far
	Type KVType
	// Per layer: K and V rows of width widths[l], rows rows each (none
	// for a recurrent layer); rows is NCtx unless the state grows
	// (Growing).
	rows     int
	grows    bool
	faulted  int // rows whose pages are faulted in (fault)
	k32, v32 [][]float32
	k16, v16 [][]uint16
	widths   []int
	rec      [][]float32 // per layer: the recurrent state (nil for a KV layer)
	kOnly    []bool      // per layer: V is read from the K rows (no V rows of its own)
	pass     *Pass       // the single-token Forward's buffers, reused (block.go)
	// Embeddings is the output mode of a Forward on the state: when set it
	// returns each row's output norm (n_embd floats, the hidden state the
	// LM head would read: llama.cpp's embeddings of pooling none) instead
	// of its logits (embed.go).
	Embeddings bool
}

// newState is NewHybrid where layer l holds K rows only when kOnly[l] (nil:
// none): its values are read from its K rows (latent attention's cache,
// whose values are the leading part of its keys), and nothing at all when
// stateless[l] (nil: none; a Mixer of no state, width and rec 0).
func newState(nCtx int, widths, rec []int, kOnly, stateless []bool, t KVType) (*State, error) {
	if kOnly == nil {
		kOnly = make([]bool, len(widths))
	}
	if nCtx <= 0 {
		return nil, fmt.Errorf("model: context length %d must be positive", nCtx)
	}
	if len(rec) != len(widths) || len(kOnly) != len(widths) {
		return nil, fmt.Errorf("model: %d recurrent sizes and %d K-only flags for %d layers", len(rec), len(kOnly), len(widths))
	}
	s := &State{NCtx: nCtx, Type: t, widths: append([]int(nil), widths...), rec: make([][]float32, len(widths)),
		kOnly: append([]bool(nil), kOnly...)}
	s.k32, s.v32 = make([][]float32, len(widths)), make([][]float32, len(widths))
	s.k16, s.v16 = make([][]uint16, len(widths)), make([][]uint16, len(widths))
	for l, w := range widths {
		switch {
		case w == 0 && rec[l] > 0:
			s.rec[l] = make([]float32, rec[l])
		case w == 0 && rec[l] == 0 && stateless != nil && stateless[l]:
			// a layer whose Mixer keeps no state (nemotron_h_moe's
			// MoE-only blocks) holds nothing
		case w <= 0 || rec[l] != 0:
			return nil, fmt.Errorf("model: layer %d: KV row width %d and recurrent state %d (want one of them positive)", l, w, rec[l])
		}
	}
	s.resize(nCtx)
	return s, nil
}

// GrowStep is the granularity, in positions, of a growing State's rows.
const GrowStep = 256

// Growing makes the state's context nCtx positions (at least its filled
// ones) and holds KV rows only for the positions it fills (rounded up to
// GrowStep): rows are allocated as Reserve needs them and given back by
// Trim, so that several sequences sharing one pool of positions
// (llama-server's --kv-unified) hold no more memory than the positions
// they fill, each up to nCtx. Its filled rows are kept.
func (s *State) Growing(nCtx int) {
	s.NCtx, s.grows = max(nCtx, s.Pos), true
	s.resize(min(s.NCtx, roundUp(s.Pos, GrowStep)))
}

// Trim gives back a growing state's rows past its filled positions
// (rounded up to GrowStep); a state that does not grow keeps its rows.
func (s *State) Trim() {
	if s.grows && s.rows > roundUp(s.Pos, GrowStep) {
		s.resize(roundUp(s.Pos, GrowStep))
	}
}

// grow gives a growing state rows for its first n positions (n ≤ NCtx)
// and has the rows up to n, and past it to the next FaultStep, faulted in.
func (s *State) grow(n int) {
	if n > s.rows {
		s.resize(min(s.NCtx, roundUp(n, GrowStep)))
	}
	s.fault(n)
}

// FaultStep is the granularity, in positions, at which a State's KV rows
// are faulted in ahead of their first Store. The rows are allocated for
// the whole context (or GrowStep) at once but their pages are only
// committed when first written; left to Store, every decode step's first
// write into each layer's next K and V page took a page fault of its own
// on the decode goroutine, while the other compute threads waited
// (olmoe-1b-7b: 32 fresh pages a token; the cost per page is in
// docs/measurements.md, issue 39 session 7). Faulting FaultStep positions of every
// layer in one system call per layer (anon.Populate) costs a fraction of
// that and commits memory only shortly before it is used.
const FaultStep = 64

// fault has the KV rows of positions below n, rounded up to FaultStep (at
// most the rows allocated), faulted in; rows faulted before are not
// faulted again. Contents never change, so results do not depend on it; a
// kernel without the call leaves the pages to fault on first write.
func (s *State) fault(n int) {
	if n <= s.faulted {
		return
	}
	hi := min(s.rows, roundUp(n, FaultStep))
	for l, w := range s.widths {
		lo, end := s.faulted*w, hi*w
		switch {
		case s.rec[l] != nil || w == 0:
		case s.Type == KVF32:
			populateRows(s.k32[l][lo:end], s.v32[l][lo:end], s.kOnly[l])
		default:
			populateRows(s.k16[l][lo:end], s.v16[l][lo:end], s.kOnly[l])
		}
	}
	s.faulted = hi
}

// populateRows faults in a layer's K rows k and V rows v (none of its own
// when kOnly); a refusal only leaves them to fault on first write.
func populateRows[E float32 | uint16](k, v []E, kOnly bool) {
	_ = anon.Populate(k)
	if !kOnly {
		_ = anon.Populate(v)
	}
}

// resize reallocates every KV layer's rows to rows positions, keeping the
// filled ones.
func (s *State) resize(rows int) {
	keep := min(s.Pos, rows)
	for l, w := range s.widths {
		if s.rec[l] != nil {
			continue
		}
		if s.Type == KVF32 {
			s.k32[l], s.v32[l] = resized(s.k32[l], s.v32[l], s.kOnly[l], rows*w, keep*w)
			continue
		}
		s.k16[l], s.v16[l] = resized(s.k16[l], s.v16[l], s.kOnly[l], rows*w, keep*w)
	}
	s.rows = rows
	s.faulted = keep // the copied rows; the others are fresh
}

// resized is a layer's K and V rows reallocated to n elements, the first
// keep copied; V is K for a K-only layer.
func resized[E float32 | uint16](k, v []E, kOnly bool, n, keep int) ([]E, []E) {
	nk := make([]E, n)
	copy(nk, k[:min(keep, len(k))])
	if kOnly {
		return nk, nk
	}
	nv := make([]E, n)
	copy(nv, v[:min(keep, len(v))])
	return nk, nv
}

func roundUp(n, step int) int { return (n + step - 1) / step * step }

// Bytes is the memory the cache holds: KV rows (of a growing state, those
// allocated now) and recurrent states.
func (s *State) Bytes() int64 {
	per := int64(2)
	if s.Type == KVF32 {
		per = 4
	}
	var n int64
	for l, w := range s.widths {
		rows := int64(2)
		if s.kOnly[l] {
			rows = 1
		}
		n += rows*int64(s.rows)*int64(w)*per + 4*int64(len(s.rec[l]))
	}
	return n
}

// Recurrent is layer l's recurrent state (nil for a KV layer).
func (s *State) Recurrent(l int) []float32 { return s.rec[l] }

// hasRecurrent reports whether any layer keeps a recurrent state.
func (s *State) hasRecurrent() bool {
	for _, r := range s.rec {
		if r != nil {
			return true
		}
	}
	return false
}

// Rewind moves the next position back to pos (0 ≤ pos ≤ Pos) so that the
// positions from pos on are fed again, and returns the position it kept. KV
// rows past a position are simply overwritten, so a state without recurrent
// layers keeps pos. A recurrent state folds every position in and cannot be
// rolled back: it keeps Pos when pos == Pos, else starts over (the
// recurrent states zeroed) and returns 0, as llama.cpp's recurrent memory
// refuses a partial sequence removal. A growing state gives back the rows
// past the kept position (Trim).
func (s *State) Rewind(pos int) int {
	defer s.Trim()
	pos = min(max(pos, 0), s.Pos)
	if pos == s.Pos || !s.hasRecurrent() {
		s.Pos = pos
		return pos
	}
	for _, r := range s.rec {
		clear(r)
	}
	s.Pos = 0
	return 0
}

// Store writes position pos's K and V rows for layer l.
func (s *State) Store(l, pos int, k, v []float32) {
	w := s.widths[l]
	o := pos * w
	if s.Type == KVF32 {
		copy(s.k32[l][o:o+w], k[:w])
		if !s.kOnly[l] {
			copy(s.v32[l][o:o+w], v[:w])
		}
		return
	}
	kernels.FP32ToFP16s(s.k16[l][o:o+w], k)
	if s.kOnly[l] {
		return
	}
	kernels.FP32ToFP16s(s.v16[l][o:o+w], v)
}

// AttnArgs name one query head's attention over the cache: layer Layer's
// KV head columns [Off, Off+Dim) at positions [Lo, Hi], scores scaled by
// Scale. With HasSink, Sink is one extra logit that joins the softmax
// denominator but has no value row (gpt-oss), as ggml_soft_max_add_sinks
// computes it (the max includes the sink, exp(sink - max) joins the sum).
type AttnArgs struct {
	Layer    int
	Off, Dim int
	VDim     int // output width (the first VDim columns of V): 0 means Dim
	Lo, Hi   int
	Scale    float32
	Sink     float32
	HasSink  bool
}

// Attend computes one query head's attention output as a describes it.
// scores must hold Hi-Lo+1 floats; out receives Dim floats. The arithmetic
// is kernels.AttendF16/AttendF32's (ggml's non-flash path: KQ dot with Q
// rounded to F16 when the cache is F16, softmax of KQ·scale, then the
// probabilities, rounded to F16 for an F16 cache, times V).
func (s *State) Attend(a *AttnArgs, q, scores, out []float32) {
	kvDim := s.widths[a.Layer]
	at, n := a.Lo*kvDim+a.Off, a.Hi-a.Lo+1
	h := kernels.Head{Scale: a.Scale, Sink: a.Sink, HasSink: a.HasSink}
	if a.VDim > 0 {
		out = out[:a.VDim]
	}
	if s.Type == KVF32 {
		kernels.AttendF32(q[:a.Dim], s.k32[a.Layer][at:], s.v32[a.Layer][at:], kvDim, n, h, scores, out)
		return
	}
	kernels.AttendF16(q[:a.Dim], s.k16[a.Layer][at:], s.v16[a.Layer][at:], kvDim, n, h, scores, out)
}

// AttendGroup is Attend for kernels.GroupSlots query heads that read the
// same KV head (a's Off and Dim): q and out hold their vectors back to back,
// sinks is nil or one logit per head, scores holds GroupSlots·(Hi-Lo+1)
// floats. Each head's result equals Attend's bit for bit; the cache rows
// are read once for all of them.
func (s *State) AttendGroup(a *AttnArgs, sinks, q, scores, out []float32) {
	kvDim, g := s.widths[a.Layer], kernels.GroupSlots
	at, n := a.Lo*kvDim+a.Off, a.Hi-a.Lo+1
	q, out, scores = q[:g*a.Dim], out[:g*a.Dim], scores[:g*n]
	if s.Type == KVF32 {
		kernels.AttendGroupF32(q, s.k32[a.Layer][at:], s.v32[a.Layer][at:], kvDim, n, a.Scale, sinks, scores, out)
		return
	}
	kernels.AttendGroupF16(q, s.k16[a.Layer][at:], s.v16[a.Layer][at:], kvDim, n, a.Scale, sinks, scores, out)
}

// AttendTile is AttendGroup for query heads whose rows all start at a's Lo
// but end at different positions: head s reads rows [Lo, Lo+rows[s]) (a
// prompt's consecutive tokens under the causal mask). scores holds
// GroupSlots·max(rows) floats. Each head's result equals Attend's over its
// own rows bit for bit.
func (s *State) AttendTile(a *AttnArgs, rows *[kernels.GroupSlots]int, sinks, q, scores, out []float32) {
	kvDim, g := s.widths[a.Layer], kernels.GroupSlots
	at := a.Lo*kvDim + a.Off
	q, out = q[:g*a.Dim], out[:g*a.Dim]
	if s.Type == KVF32 {
		kernels.AttendTileF32(q, s.k32[a.Layer][at:], s.v32[a.Layer][at:], kvDim, rows, a.Scale, sinks, scores, out)
		return
	}
	kernels.AttendTileF16(q, s.k16[a.Layer][at:], s.v16[a.Layer][at:], kvDim, rows, a.Scale, sinks, scores, out)
}
