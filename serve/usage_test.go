package serve

import "testing"

// TestStreamIncludeUsage: with stream_options.include_usage a stream ends,
// as llama-server's and OpenAI's, with a chunk of no choices that carries
// the usage and llama-server's timings (what llama.cpp's
// test_chat_completion_with_timings_per_token reads); without it there is
// no such chunk.
func TestStreamIncludeUsage(t *testing.T) {
	h := start(t, nil)
	const body = `{"messages":[{"role":"user","content":"test"}],"max_tokens":5,"stream":true`
	evs := h.sseData("/v1/chat/completions", body+`,"stream_options":{"include_usage":true},"timings_per_token":true}`)
	last := evs[len(evs)-1]
	tm, _ := last["timings"].(map[string]any)
	if cs, ok := last["choices"].([]any); !ok || len(cs) != 0 || last["usage"] == nil || tm == nil {
		t.Fatalf("last chunk %v, want choices [] with usage and timings", last)
	}
	if tm["predicted_n"] != float64(5) || tm["prompt_per_second"] == nil || tm["predicted_per_second"] == nil {
		t.Errorf("timings %v", tm)
	}
	if u := last["usage"].(map[string]any); u["completion_tokens"] != float64(5) {
		t.Errorf("usage %v", u)
	}
	for _, ev := range evs[:len(evs)-1] {
		if ev["timings"] != nil {
			t.Errorf("timings before the usage chunk: %v", ev)
		}
	}
	for _, ev := range h.sseData("/v1/chat/completions", body+`}`) {
		if cs, _ := ev["choices"].([]any); len(cs) == 0 {
			t.Errorf("a chunk of no choices without include_usage: %v", ev)
		}
	}
}
