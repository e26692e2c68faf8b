package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// tokensOf is /tokenize's answer for text.
func (h *harness) tokensOf(text string) []int32 {
	h.t.Helper()
	var r struct{ Tokens []int32 }
	b, _ := json.Marshal(h.do("/tokenize", fmt.Sprintf(`{"content":%s}`, js(text)), 200))
	if err := json.Unmarshal(b, &r); err != nil || len(r.Tokens) == 0 {
		h.t.Fatalf("/tokenize %q: %s %v", text, b, err)
	}
	return r.Tokens
}

// severalOf posts a /completion of several prompts and returns the answers.
func (h *harness) severalOf(prompt string) []map[string]any {
	h.t.Helper()
	got, _, b := h.send(http.MethodPost, "/completion", "", `{"n_predict":4,"prompt":`+prompt+`}`, "Content-Type", jsonCT)
	var out []map[string]any
	if err := json.Unmarshal([]byte(b), &out); got != 200 || err != nil {
		h.t.Fatalf("prompt %s: %d %v %s", prompt, got, err, b)
	}
	return out
}

// TestNativePromptShapes: /completion takes every prompt shape
// llama-server's tokenize_input_prompts does: {"prompt_string"}, a mixed
// array of text and ids (one prompt), and an array of prompts (one answer
// each, in order, with its index); greedy, the same prompt in any shape
// gives the same text.
func TestNativePromptShapes(t *testing.T) {
	h := start(t, nil)
	const text = "I believe the meaning of life is"
	ids := h.tokensOf(text)
	idsJSON, _ := json.Marshal(ids)
	want := h.do("/completion", fmt.Sprintf(`{"n_predict":4,"prompt":%s}`, js(text)), 200)["content"]
	if r := h.do("/completion", fmt.Sprintf(`{"n_predict":4,"prompt":{"prompt_string":%s}}`, js(text)), 200); r["content"] != want {
		t.Errorf("prompt_string: %q, want %q", r["content"], want)
	}
	// mixed: the text's first half as text, the rest as ids
	half := h.tokensOf("I believe the")
	rest, _ := json.Marshal(h.tokensOf(" meaning of life is"))
	if ok := len(half)+len(h.tokensOf(" meaning of life is")) == len(ids); ok {
		mixed := fmt.Sprintf(`{"n_predict":4,"prompt":[%s,%s]}`, js("I believe the"), string(rest[1:len(rest)-1]))
		if r := h.do("/completion", mixed, 200); r["content"] != want || r["tokens_evaluated"] != float64(len(ids)) {
			t.Errorf("mixed %s: %v, want %q of %d prompt tokens", mixed, r, want, len(ids))
		}
	} else {
		t.Fatalf("the halves do not tokenize apart: %v %s vs %v", half, rest, ids)
	}
	for _, p := range []string{"[" + string(idsJSON) + "," + string(idsJSON) + "]", "[" + string(idsJSON) + "," + js(text) + "]"} {
		rs := h.severalOf(p)
		if len(rs) != 2 {
			t.Fatalf("prompt %s: %d answers, want 2", p, len(rs))
		}
		for i, r := range rs {
			if r["content"] != want || r["index"] != float64(i) {
				t.Errorf("prompt %s: answer %d: index %v content %q, want %q", p, i, r["index"], r["content"], want)
			}
		}
	}
	for _, bad := range []string{`{"prompt_string":"x","multimodal_data":["AA=="]}`, `[[["x"]]]`, `[]`, `{"text":"x"}`, `[1,"a",[2]]`} {
		if got, _, b := h.send(http.MethodPost, "/completion", "", `{"prompt":`+bad+`}`, "Content-Type", jsonCT); got != http.StatusBadRequest {
			t.Errorf("prompt %s: %d, want 400: %s", bad, got, b)
		}
	}
}

// TestNativeSeveralPromptsStreamed: a stream of several prompts carries
// each prompt's events in turn, tagged with its index, each ending in a
// stop event.
func TestNativeSeveralPromptsStreamed(t *testing.T) {
	h := start(t, nil)
	evs := h.sseData("/completion", `{"n_predict":3,"stream":true,"prompt":["Hello there","Once upon"]}`)
	var stops []float64
	for _, e := range evs {
		if e["stop"] == true {
			stops = append(stops, e["index"].(float64))
		} else if len(stops) != int(e["index"].(float64)) {
			t.Errorf("event of prompt %v after %d stops", e["index"], len(stops))
		}
	}
	if len(stops) != 2 || stops[0] != 0 || stops[1] != 1 {
		t.Errorf("stop events of indexes %v, want [0 1]", stops)
	}
}

// TestGenerationSettingsSamplersOff: generation_settings names llama-server's
// samplers pipe does not have at the values that turn them off.
func TestGenerationSettingsSamplersOff(t *testing.T) {
	r := start(t, nil).do("/completion", `{"prompt":"hi","n_predict":1}`, 200)
	gs := r["generation_settings"].(map[string]any)
	if gs["adaptive_target"] != -1.0 || gs["adaptive_decay"] != 0.9 || gs["mirostat"] != 0.0 {
		t.Errorf("generation_settings: %v", gs)
	}
}
