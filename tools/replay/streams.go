package replay

import (
	"fmt"

	"github.com/pipe-engine/pipe/cache"
)

// MaxStreams bounds Streams' k (pipe serve's --parallel has the same order
// of magnitude).
const MaxStreams = 64

// Streams replays a trace as k clients decoding at once in one batch per
// step, as `pipe serve --parallel k` runs them: stream j decodes the trace's
// decode tokens starting at token j·n/k and wrapping around, so each step's
// k tokens come from points n/k apart in the conversation. Per (step, layer)
// the k tokens' experts form one lookup batch: each distinct expert is looked
// up (and, on a miss, read) once for the whole batch, exactly as the engine
// plans a batched decode step. The prefill batches come first, once, as the
// warm-up they are in the trace. The result has k·n decode tokens, so its
// MiB per token compares directly with the trace's own.
//
// The k streams are positions of one conversation, which route more alike
// than unrelated prompts do, so the union and the bytes per token of real
// clients are at least what this reports.
func Streams(s *Sequence, k int) (*Sequence, error) {
	if k < 1 || k > MaxStreams {
		return nil, fmt.Errorf("replay: %d streams: want 1..%d", k, MaxStreams)
	}
	out := &Sequence{Header: s.Header, PrefillTokens: s.PrefillTokens}
	type tl struct{ tok, layer int }
	var order []int // decode token number → first batch index seen
	at := map[tl]*Batch{}
	tokOf := map[[2]int]int{} // (turn, step) → token number
	for i := range s.Batches {
		b := &s.Batches[i]
		if b.Phase != PhaseDecode {
			out.Batches = append(out.Batches, *b)
			continue
		}
		ts := [2]int{b.Turn, b.Step}
		n, ok := tokOf[ts]
		if !ok {
			n = len(order)
			tokOf[ts] = n
			order = append(order, i)
		}
		if at[tl{n, b.Layer}] != nil {
			return nil, fmt.Errorf("%w: decode token (turn %d, step %d) has layer %d twice", ErrMalformed, b.Turn, b.Step, b.Layer)
		}
		at[tl{n, b.Layer}] = b
	}
	n := len(order)
	if n == 0 {
		return out, nil
	}
	nl := s.Header.NLayer
	for step := 0; step < n; step++ {
		for l := 0; l < nl; l++ {
			nb := Batch{Phase: PhaseDecode, Step: step, Layer: l}
			seen := map[cache.Key]bool{}
			for j := 0; j < k; j++ {
				src := at[tl{(step + j*n/k) % n, l}]
				if src == nil {
					continue
				}
				nb.Tokens++
				for _, a := range src.Accesses {
					a.Repeat = seen[a.Key]
					seen[a.Key] = true
					nb.Accesses = append(nb.Accesses, a)
				}
			}
			if nb.Tokens > 0 {
				out.Batches = append(out.Batches, nb)
			}
		}
	}
	out.DecodeTokens = n * k
	return out, nil
}
