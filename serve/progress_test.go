package serve

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestReturnProgress: a streamed /completion with return_progress gets
// prompt_progress events before its text, as llama-server's: the first as
// the prompt pass starts (processed = cache, timings all zero), the last
// when it is over (processed = total, prompt_ms > 0); none without it.
func TestReturnProgress(t *testing.T) {
	h := start(t, nil)
	const body = `{"prompt":"the quick brown fox jumps over the lazy dog","n_predict":3,"stream":true%s}`
	evs := h.sseData("/completion", fmt.Sprintf(body, `,"return_progress":true`))
	var progress []map[string]any
	for i, e := range evs {
		pp, ok := e["prompt_progress"].(map[string]any)
		if !ok {
			continue
		}
		if i != len(progress) {
			t.Errorf("prompt_progress event %d after a text event", i)
		}
		progress = append(progress, map[string]any{"p": pp, "t": e["timings"]})
	}
	if len(progress) != 2 {
		t.Fatalf("%d prompt_progress events, want 2: %v", len(progress), evs)
	}
	first, last := progress[0]["p"].(map[string]any), progress[1]["p"].(map[string]any)
	ft, lt := progress[0]["t"].(map[string]any), progress[1]["t"].(map[string]any)
	if first["processed"] != first["cache"] || first["total"].(float64) <= 0 || ft["prompt_n"] != 0.0 || ft["prompt_ms"] != 0.0 || ft["predicted_n"] != 0.0 {
		t.Errorf("first progress %v timings %v", first, ft)
	}
	if last["processed"] != last["total"] || last["total"] != first["total"] || lt["prompt_ms"].(float64) <= 0 ||
		lt["prompt_n"].(float64)+lt["cache_n"].(float64) != last["total"] {
		t.Errorf("last progress %v timings %v", last, lt)
	}
	for _, e := range h.sseData("/completion", fmt.Sprintf(body, "")) {
		if _, ok := e["prompt_progress"]; ok {
			t.Fatalf("prompt_progress without return_progress: %v", e)
		}
	}
}

// TestReturnProgressOpenAI: the OpenAI routes stream prompt_progress chunks
// too, as llama-server's (test_return_progress runs on the chat route):
// before the text, the first at processed = cache, the last at processed =
// total; a chat's carry the role delta, a completion's an empty text.
func TestReturnProgressOpenAI(t *testing.T) {
	h := start(t, nil)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"the quick brown fox"}],"max_tokens":3,"stream":true,"return_progress":true}`},
		{"/v1/completions", `{"prompt":"the quick brown fox","max_tokens":3,"stream":true,"return_progress":true}`},
	} {
		var progress []map[string]any
		evs := h.sseData(tc.path, tc.body)
		for i, e := range evs {
			pp, ok := e["prompt_progress"].(map[string]any)
			if !ok {
				continue
			}
			c := e["choices"].([]any)[0].(map[string]any)
			if d, _ := c["delta"].(map[string]any); tc.path == "/v1/chat/completions" && (d["role"] != "assistant" || d["content"] != nil) {
				t.Errorf("%s: progress chunk's delta %v", tc.path, c["delta"])
			}
			if tc.path == "/v1/completions" && c["text"] != "" {
				t.Errorf("%s: progress chunk's text %v", tc.path, c["text"])
			}
			if _, ok := e["timings"].(map[string]any); !ok {
				t.Errorf("%s: progress chunk without timings: %v", tc.path, e)
			}
			// the chat's role chunk may come first; a progress chunk never follows text
			if i > len(progress)+1 {
				t.Errorf("%s: prompt_progress event %d after a text event", tc.path, i)
			}
			progress = append(progress, pp)
		}
		if len(progress) != 2 {
			t.Fatalf("%s: %d prompt_progress events, want 2: %v", tc.path, len(progress), evs)
		}
		first, last := progress[0], progress[1]
		if first["processed"] != first["cache"] || first["total"].(float64) <= 0 {
			t.Errorf("%s: first progress %v", tc.path, first)
		}
		if last["processed"] != last["total"] || last["total"] != first["total"] {
			t.Errorf("%s: last progress %v", tc.path, last)
		}
	}
}

// TestReturnProgressBatches: with -b 64 (Options.Batch) the one session
// feeds a 150-token prompt in batches of 64 and reports each, as
// llama-server: the start (processed = cache = 0), then 64, 128, 150; the
// text is the same as with the default batch. A second request sharing
// the prompt reuses it: the start at processed = cache, one batch to total.
// The same with --parallel 2 -ub 16: a report at each -b boundary crossed.
func TestReturnProgressBatches(t *testing.T) {
	prompt := make([]string, 150)
	for i := range prompt {
		prompt[i] = fmt.Sprint(100 + i%50)
	}
	body := `{"prompt":[` + strings.Join(prompt, ",") + `],"n_predict":4,"stream":true,"return_progress":true}`
	run := func(h *harness) (progress []map[string]any, text string) {
		for _, e := range h.sseData("/completion", body) {
			if pp, ok := e["prompt_progress"].(map[string]any); ok {
				progress = append(progress, pp)
				continue
			}
			text += e["content"].(string)
		}
		return progress, text
	}
	_, want := run(start(t, nil))
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprint("parallel", par), func(t *testing.T) {
			batches(t, run, start(t, func(o *Options) {
				o.Batch, o.Parallel, o.Ubatch, o.KVUnified, o.SlotSimilarity = 64, par, 16, par > 1, 0.1
			}), want)
		})
	}
}

func batches(t *testing.T, run func(*harness) ([]map[string]any, string), h *harness, want string) {
	progress, text := run(h)
	var got []float64
	for _, p := range progress {
		if p["total"] != 150.0 || p["cache"] != 0.0 {
			t.Errorf("progress %v: want total 150, cache 0", p)
		}
		got = append(got, p["processed"].(float64))
	}
	if !slices.Equal(got, []float64{0, 64, 128, 150}) {
		t.Errorf("processed %v, want [0 64 128 150]", got)
	}
	if text != want {
		t.Errorf("text %q with -b 64, %q with the default", text, want)
	}
	progress, _ = run(h)
	if len(progress) != 2 || progress[0]["cache"] != progress[0]["processed"] || progress[0]["cache"].(float64) <= 0 ||
		progress[1]["processed"] != 150.0 || progress[1]["cache"] != progress[0]["cache"] {
		t.Errorf("cached prompt's progress %v: want the start at processed = cache > 0, then total", progress)
	}
}
