package serve

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// completeIDs posts /completion with prompt ids and returns the answer's
// tokens, truncated and predicted_n.
func completeIDs(h *harness, prompt []int32, extra string) ([]int32, bool, int) {
	h.t.Helper()
	p, _ := json.Marshal(prompt)
	m := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"temperature":0,"ignore_eos":true,"return_tokens":true%s}`, p, extra), 200)
	var ids []int32
	for _, v := range m["tokens"].([]any) {
		ids = append(ids, int32(v.(float64)))
	}
	return ids, m["truncated"].(bool), int(m["timings"].(map[string]any)["predicted_n"].(float64))
}

// TestContextShift: with ContextShift a generation longer than the context
// goes on, as llama-server's --context-shift: when the context (32) is full,
// the first n_keep (3) tokens stay, half of the rest goes, and the answer is
// truncated. The tokens are exactly those of fresh prompts of each shifted
// sequence (cache_prompt false), round after round — the KV is recomputed,
// not re-roped — on one slot and on a batch of two.
func TestContextShift(t *testing.T) {
	prompt := []int32{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	const nCtx, keep, want = 32, 3, 40
	for _, parallel := range []int{1, 2} {
		h := start(t, func(o *Options) { o.Ctx, o.Parallel, o.ContextShift = nCtx*parallel, parallel, true })
		got, truncated, n := completeIDs(h, prompt, fmt.Sprintf(`,"n_predict":%d,"n_keep":%d`, want, keep))
		if n != want || len(got) != want || !truncated {
			t.Fatalf("parallel %d: %d tokens (predicted_n %d), truncated %v; want %d, true", parallel, len(got), n, truncated, want)
		}
		// the reference: each round a fresh prompt of the shifted sequence
		seq, ref := slices.Clone(prompt), []int32(nil)
		for len(ref) < want {
			k := min(nCtx-len(seq), want-len(ref))
			ids, _, _ := completeIDs(h, seq, fmt.Sprintf(`,"n_predict":%d,"cache_prompt":false`, k))
			ref, seq = append(ref, ids...), append(seq, ids...)
			if len(seq) == nCtx {
				left := nCtx - keep
				seq = slices.Concat(seq[:keep], seq[keep+left/2:])
			}
		}
		if !slices.Equal(got, ref) {
			t.Errorf("parallel %d: shifted generation\n%v\nwant (fresh prompts)\n%v", parallel, got, ref)
		}
	}
}

// TestContextFullTruncated: without ContextShift a generation that the
// context ends (n_predict -1: up to the context) is truncated, one that
// ends at its own limit is not, as llama-server's (test_ctx_shift.py).
func TestContextFullTruncated(t *testing.T) {
	h := start(t, func(o *Options) { o.Ctx = 32 })
	prompt := []int32{10, 11, 12, 13, 14, 15, 16, 17}
	if _, truncated, n := completeIDs(h, prompt, `,"n_predict":-1`); n != 24 || !truncated {
		t.Errorf("n_predict -1: predicted_n %d, truncated %v; want 24, true", n, truncated)
	}
	if _, truncated, n := completeIDs(h, prompt, `,"n_predict":5`); n != 5 || truncated {
		t.Errorf("n_predict 5: predicted_n %d, truncated %v; want 5, false", n, truncated)
	}
}
