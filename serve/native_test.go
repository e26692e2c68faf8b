package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// readNative reads a /completion stream: every data payload (llama-server
// sends no [DONE]).
func readNative(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			t.Fatalf("SSE line %q", sc.Text())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("SSE data is not JSON: %q", data)
		}
		out = append(out, m)
	}
	return out
}

func ints(v any) []int32 {
	var out []int32
	for _, x := range v.([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

func (h *harness) get(path string) any {
	h.t.Helper()
	resp, err := http.Get(h.url + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
		h.t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return v
}

// TestNativeCompletion: llama-server's /completion gives llama.cpp's greedy
// continuation with n_predict, its ids with return_tokens, a prompt given as
// token ids, stop_type limit/word, cache_prompt false prefilling it all,
// and a stream of content+tokens chunks ending in stop: true.
func TestNativeCompletion(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "p2_capital")
	want := h.expected(g.GeneratedTokens[:8])
	r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"return_tokens":true}`, js(g.UserText)), 200)
	if r["content"] != want || !slices.Equal(ints(r["tokens"]), g.GeneratedTokens[:8]) || r["stop"] != true ||
		r["stop_type"] != "limit" || r["tokens_predicted"] != 8.0 || r["tokens_evaluated"] != float64(len(g.PromptTokens)) ||
		r["model"] != "tiny" || r["id_slot"] != 0.0 || r["prompt"] != g.UserText {
		t.Fatalf("/completion: %v\nwant %q %v", r, want, g.GeneratedTokens[:8])
	}
	tm := r["timings"].(map[string]any)
	if tm["predicted_n"] != 8.0 || tm["prompt_n"] != float64(len(g.PromptTokens)) || tm["predicted_per_second"].(float64) <= 0 {
		t.Fatalf("timings %v", tm)
	}
	if gs := r["generation_settings"].(map[string]any); gs["n_predict"] != 8.0 || gs["temperature"] != 0.0 {
		t.Fatalf("generation_settings %v", gs)
	}
	// the prompt as token ids, the same text; the KV of all but one reused
	ids, _ := json.Marshal(g.PromptTokens)
	r = h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8}`, ids), 200)
	if r["content"] != want || len(r["tokens"].([]any)) != 0 || r["timings"].(map[string]any)["cache_n"] != float64(len(g.PromptTokens)-1) {
		t.Fatalf("/completion with ids: %v", r)
	}
	r = h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"cache_prompt":false}`, ids), 200)
	if r["content"] != want || r["timings"].(map[string]any)["cache_n"] != 0.0 {
		t.Fatalf("cache_prompt false: %v", r)
	}
	stop := want[len(want)/2:][:3]
	r = h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"stop":[%s]}`, js(g.UserText), js(stop)), 200)
	if r["stop_type"] != "word" || r["stopping_word"] != stop || !strings.HasPrefix(want, r["content"].(string)+stop) {
		t.Fatalf("stop %q: %v", stop, r)
	}

	resp, err := h.post(context.Background(), "/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"stream":true}`, js(g.UserText)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := readNative(t, resp.Body)
	var text strings.Builder
	var got []int32
	for _, e := range events[:len(events)-1] {
		if e["stop"] != false || e["pipe"] == nil {
			t.Fatalf("chunk %v", e)
		}
		text.WriteString(e["content"].(string))
		got = append(got, ints(e["tokens"])...)
	}
	last := events[len(events)-1]
	if text.String() != want || !slices.Equal(got, g.GeneratedTokens[:8]) || last["stop"] != true || last["stop_type"] != "limit" || last["tokens_predicted"] != 8.0 {
		t.Fatalf("stream %q %v, last %v; want %q %v", text.String(), got, last, want, g.GeneratedTokens[:8])
	}
}

// TestTokenizeRoutes: /tokenize and /detokenize round-trip as
// llama-server's (add_special, with_pieces).
func TestTokenizeRoutes(t *testing.T) {
	h := start(t, nil)
	tok := h.m.Tokenizer()
	r := h.do("/tokenize", `{"content":"The capital of France"}`, 200)
	ids := ints(r["tokens"])
	if !slices.Equal(ids, tok.Encode("The capital of France", false, true)) || len(ids) == 0 {
		t.Fatalf("/tokenize %v", ids)
	}
	if r := h.do("/tokenize", `{"content":"The capital of France","add_special":true}`, 200); !slices.Equal(ints(r["tokens"]), tok.Encode("The capital of France", true, true)) {
		t.Fatalf("add_special: %v", r)
	}
	r = h.do("/tokenize", `{"content":"The capital","with_pieces":true}`, 200)
	var pieces strings.Builder
	for _, p := range r["tokens"].([]any) {
		pieces.WriteString(p.(map[string]any)["piece"].(string))
	}
	if pieces.String() != "The capital" {
		t.Fatalf("with_pieces: %v", r)
	}
	b, _ := json.Marshal(ids)
	if r := h.do("/detokenize", `{"tokens":`+string(b)+`}`, 200); r["content"] != "The capital of France" {
		t.Fatalf("/detokenize %v", r)
	}
	if r := h.do("/tokenize", `{}`, 200); len(r["tokens"].([]any)) != 0 {
		t.Fatalf("/tokenize without content: %v", r)
	}
}

// TestPropsSlotsHealth: GET /props, /slots and /health in llama-server's
// shapes.
func TestPropsSlotsHealth(t *testing.T) {
	h := start(t, func(o *Options) { o.MaxTokens = 7; o.ModelPath = "/models/tiny.gguf" })
	p := h.get("/props").(map[string]any)
	dgs := p["default_generation_settings"].(map[string]any)
	if dgs["n_ctx"] != 256.0 || dgs["params"].(map[string]any)["n_predict"] != 7.0 || p["total_slots"] != 1.0 ||
		p["model_path"] != "/models/tiny.gguf" || p["model_alias"] != "tiny" || !strings.Contains(p["chat_template"].(string), "<|im_start|>") {
		t.Fatalf("/props %v", p)
	}
	s := h.get("/slots").([]any)
	if len(s) != 1 || s[0].(map[string]any)["n_ctx"] != 256.0 || s[0].(map[string]any)["is_processing"] != false {
		t.Fatalf("/slots %v", s)
	}
	if v := h.get("/health").(map[string]any); v["status"] != "ok" {
		t.Fatalf("/health %v", v)
	}
}

// TestLimits: n_predict is honoured on the OpenAI routes (over max_tokens,
// as llama-server reads it), -n is the default of a request that sets no
// limit, not a cap over one that does (llama-server's n_predict_max), and
// max_tokens past the context is clamped to what fits with finish_reason
// "length".
func TestLimits(t *testing.T) {
	h := start(t, func(o *Options) { o.MaxTokens = 5 })
	comp := func(body string) (int, string) {
		r := h.do("/v1/completions", body, 200)
		_, c, _ := usageOf(t, r)
		return c, r["choices"].([]any)[0].(map[string]any)["finish_reason"].(string)
	}
	for _, c := range []struct {
		body string
		n    int
	}{
		{`{"prompt":"Paris is","n_predict":3}`, 3},
		{`{"prompt":"Paris is","max_tokens":4,"n_predict":2}`, 2},
		{`{"prompt":"Paris is","max_tokens":9}`, 9},
		{`{"prompt":"Paris is","n_predict":8}`, 8},
		{`{"prompt":"Paris is","n_predict":-1}`, 5},
		{`{"prompt":"Paris is","ignore":"me"}`, 5},
	} {
		if n, fin := comp(c.body); n != c.n || fin != "length" {
			t.Errorf("%s: %d tokens (%s), want %d (length)", c.body, n, fin, c.n)
		}
	}
	h2 := start(t, nil)
	r := h2.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":100000}`, 200)
	p, c, _ := usageOf(t, r)
	if p+c != 256 || r["choices"].([]any)[0].(map[string]any)["finish_reason"] != "length" {
		t.Fatalf("max_tokens past the context: %d+%d tokens, %v", p, c, r["choices"])
	}
}

// TestTelemetry: a streamed chat's chunks carry the engine's telemetry in
// "pipe": tokens so far, the first chunk marked as the prompt pass's, a rate
// and hit rate after it, the hit rate, stall and
// bytes, and a strip of hits and misses per layer that adds up to k
// experts per layer per token.
func TestTelemetry(t *testing.T) {
	h := start(t, nil)
	resp, err := h.post(context.Background(), "/v1/chat/completions", `{"messages":[{"role":"user","content":"Tell me about Paris"}],"max_tokens":10,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	hp := h.m.Engine().Desc().HParams
	sc := bufio.NewScanner(resp.Body)
	tokens, seen := 0, 0
	for sc.Scan() {
		data, _ := strings.CutPrefix(sc.Text(), "data: ")
		if data == "" || data == "[DONE]" {
			continue
		}
		var c struct{ Pipe *telemetry }
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if c.Pipe == nil {
			continue
		}
		p := c.Pipe
		n := p.Tokens - tokens
		if n < 1 || len(p.Layers) != hp.NLayer || p.Prompt != (seen == 0) || (seen > 0 && (p.TokS == nil || p.HitPct == nil)) || p.ReadMiB < 0 || p.StallMs < 0 {
			t.Fatalf("telemetry %+v after %d tokens", p, tokens)
		}
		steps := n // decode steps: the first token comes from the prompt pass
		if p.Prompt {
			steps--
		}
		for l, hm := range p.Layers {
			if hm[0]+hm[1] != steps*hp.NExpertUsed {
				t.Fatalf("layer %d: %d hits + %d misses for %d tokens, want %d experts each", l, hm[0], hm[1], n, hp.NExpertUsed)
			}
		}
		tokens, seen = p.Tokens, seen+1
	}
	if tokens < 9 || seen < 2 {
		t.Fatalf("telemetry of %d tokens in %d chunks", tokens, seen)
	}
}

// TestServerStops: the server's stop strings (-r) end every request's text,
// besides its own.
func TestServerStops(t *testing.T) {
	g := loadGolden(t, "p2_capital")
	h0 := start(t, nil)
	want := h0.expected(g.GeneratedTokens[:8])
	stop := want[len(want)/2:][:3]
	h := start(t, func(o *Options) { o.Stops = []string{stop} })
	r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8}`, js(g.UserText)), 200)
	if r["stop_type"] != "word" || r["stopping_word"] != stop || !strings.HasPrefix(want, r["content"].(string)+stop) {
		t.Fatalf("server stop %q: %v (want %q)", stop, r, want)
	}
}

// TestNativePromptDepth: /completion's prompt takes llama-server's shapes
// (one wrapping array at most) and refuses deeper nesting instead of
// unwrapping it, which cost quadratic CPU (issue 35, defect 7).
func TestNativePromptDepth(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"prompt":"hi"}`: true, `{"prompt":[1,2]}`: true, `{"prompt":["hi"]}`: true, `{"prompt":[[1,2]]}`: true,
		`{"prompt":[[[1]]]}`: false, `{"prompt":[["hi"]]}`: false,
		`{"prompt":` + strings.Repeat("[", 9999) + "1" + strings.Repeat("]", 9999) + `}`: false,
	} {
		_, _, err := parseNative([]byte(body), greedy)
		if (err == nil) != ok {
			t.Errorf("%.40s: err %v, want ok=%v", body, err, ok)
		}
		if !ok && err != nil && !strings.Contains(err.Error(), errNativePrompt.Error()) {
			t.Errorf("%.40s: %v, want %v", body, err, errNativePrompt)
		}
	}
}
