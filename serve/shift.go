package serve

import (
	"context"
	"slices"

	"github.com/pipe-engine/pipe/decode"
)

// Context shift (Options.ContextShift, llama-server's --context-shift):
// a generation that fills the slot's context before its limit goes on
// after dropping part of the context, as llama-server's pre_decode does:
// the first n_keep tokens stay (the request's n_keep, else the server's
// --keep; -1: the whole prompt; at most n_ctx - 4), of the rest the older
// n_discard go (the request's n_discard, else half of the rest; at most all
// of it but one), and the answer says truncated. A prompt that does not
// fit is still refused: only the generation shifts.
//
// llama-server shifts the cached keys in place (seq_rm, seq_add: RoPE
// applied again by the difference of positions), which leaves the kept
// tokens' keys and values as they were computed with the dropped tokens
// before them. pipe recomputes instead: the session keeps its KV up to the
// first dropped position and prefills the kept tail at its new positions,
// so the state after a shift is exactly the state of the shortened text
// read anew (bit-identical to a fresh prompt of those tokens), for every
// family alike — re-roping cannot serve recurrent states or MLA's
// compressed cache. The cost is one prompt pass of the tail per shift
// (about half the context). Two differences follow: the repeat-penalty
// window also sees the re-read tail, and a character whose bytes span the
// shift is sent as the tokens' bytes on each side.

// shiftFields are the request's context-shift fields.
type shiftFields struct {
	NKeep    *int `json:"n_keep"`
	NDiscard *int `json:"n_discard"`
}

func (f shiftFields) parse(j *job) error {
	if f.NKeep != nil && *f.NKeep < -1 {
		return badRequest("n_keep %d must be >= 0, or -1 (the whole prompt)", *f.NKeep)
	}
	if f.NDiscard != nil && *f.NDiscard < 0 {
		return badRequest("n_discard %d must be >= 0 (0: half of what is not kept)", *f.NDiscard)
	}
	j.nKeep, j.nDiscard = f.NKeep, f.NDiscard
	return nil
}

// shiftPlan is what a context shift of one job keeps and drops.
type shiftPlan struct {
	nCtx, prompt  int // the slot's context, the job's prompt tokens
	keep, discard int // n_keep (-1: the prompt), n_discard (0: half the rest)
}

func (s *generator) shiftPlan(j *job) shiftPlan {
	p := shiftPlan{nCtx: s.nCtx, prompt: len(j.ids), keep: s.o.Keep}
	if j.nKeep != nil {
		p.keep = *j.nKeep
	}
	if j.nDiscard != nil {
		p.discard = *j.nDiscard
	}
	return p
}

// shift is seq (a full context) with the plan's tokens dropped, as
// llama-server computes n_keep and n_discard.
func (p shiftPlan) shift(seq []int32) []int32 {
	keep := p.keep
	if keep < 0 {
		keep = p.prompt
	}
	keep = max(min(keep, p.nCtx-4), 0)
	left := len(seq) - keep
	discard := p.discard
	if discard == 0 {
		discard = left / 2
	}
	discard = min(max(discard, 0), max(0, left-1))
	return slices.Concat(seq[:keep], seq[keep+discard:])
}

// shifting wraps gen (called with the job's feed first, maxTokens -1 for
// no limit) to shift the context whenever it fills: each round generates
// what fits, then reset makes the generator hold a prefix of the shifted
// sequence and returns the tokens to feed after it. The rounds' results
// are merged into one (the first round's prompt figures); o.truncated
// tells that a shift happened.
func (s *generator) shifting(p shiftPlan, prompt []int32, gen genFunc, reset func(seq []int32) []int32, o *outcome) genFunc {
	return func(ctx context.Context, feed []int32, maxTokens int, onPrompt func(int) error, onToken func(decode.Token) error) (decode.Result, error) {
		seq := slices.Clone(prompt)
		var all decode.Result
		for round := 0; ; round++ {
			room := p.nCtx - len(seq)
			n := room
			if maxTokens >= 0 {
				n = min(maxTokens-len(all.Tokens), room)
			}
			cached := o.cachedTokens
			res, err := gen(ctx, feed, n, onPrompt, onToken)
			onPrompt = nil // a later round's pass is no part of the request's prompt
			if round == 0 {
				all = res
				all.Tokens = slices.Clone(res.Tokens)
			} else {
				o.cachedTokens = cached // the request's, not the round's
				all.Tokens = append(all.Tokens, res.Tokens...)
				all.Stop, all.Decode = res.Stop, all.Decode+res.Decode
				all.DecodeReadBytes += res.PrefillReadBytes + res.DecodeReadBytes
				all.Lookups, all.Stall = all.Lookups.Add(res.Lookups), all.Stall+res.Stall
			}
			if err != nil || res.Stop != decode.StopLength || n < room || n == 0 {
				return all, err
			}
			seq = p.shift(append(seq, res.Tokens...))
			o.truncated = true
			feed = reset(seq)
		}
	}
}
