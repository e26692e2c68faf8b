package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// tokenEntry is one entry of logprobs.content / completion_probabilities.
type tokenEntry struct {
	ID          int32        `json:"id"`
	Token       string       `json:"token"`
	Bytes       []int        `json:"bytes"`
	Logprob     *float64     `json:"logprob"`
	Prob        *float64     `json:"prob"`
	TopLogprobs []tokenEntry `json:"top_logprobs"`
	TopProbs    []tokenEntry `json:"top_probs"`
}

// entriesOf decodes a JSON array of token entries.
func entriesOf(t *testing.T, v any) []tokenEntry {
	t.Helper()
	b, _ := json.Marshal(v)
	var out []tokenEntry
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("token entries %s: %v", b, err)
	}
	return out
}

// checkLogprobs checks greedy entries against the generated ids: each is
// the chosen token with logprob <= 0, top tokens most likely first with the
// chosen (greedy: the most likely) first, top of length n, bytes that spell
// the token; it returns the entries' text.
func checkLogprobs(t *testing.T, es []tokenEntry, ids []int32, n int) string {
	t.Helper()
	if len(es) != len(ids) {
		t.Fatalf("%d entries for %d tokens", len(es), len(ids))
	}
	var text strings.Builder
	for i, e := range es {
		if e.ID != ids[i] || e.Logprob == nil || *e.Logprob > 0 || len(e.TopLogprobs) != n || string(bytesOf(e.Bytes)) != e.Token {
			t.Fatalf("entry %d (token %d): %+v", i, ids[i], e)
		}
		if n > 0 && (e.TopLogprobs[0].ID != e.ID || *e.TopLogprobs[0].Logprob != *e.Logprob) {
			t.Fatalf("entry %d: greedy's token is not the top one: %+v", i, e)
		}
		for k := 1; k < n; k++ {
			if *e.TopLogprobs[k].Logprob > *e.TopLogprobs[k-1].Logprob {
				t.Fatalf("entry %d: top_logprobs out of order: %+v", i, e.TopLogprobs)
			}
		}
		text.WriteString(e.Token)
	}
	return text.String()
}

func bytesOf(b []int) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = byte(c)
	}
	return out
}

// TestChatLogprobs: logprobs with top_logprobs on a greedy chat gives, per
// generated token, its log-probability and the top tokens' (the chosen one
// first), whose text is the reply's; the reply is llama.cpp's greedy one,
// unchanged; streamed, every content chunk carries its tokens' entries and
// the first delta's content is null.
func TestChatLogprobs(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "chat0_weather")
	ids := g.GeneratedTokens[:8]
	want := h.expected(ids)
	msgs := fmt.Sprintf(`[{"role":"user","content":%s}]`, js(g.UserText))
	body := `{"messages":` + msgs + `,"max_tokens":8,"temperature":0,"logprobs":true,"top_logprobs":3}`
	r := h.do("/v1/chat/completions", body, 200)
	ch := r["choices"].([]any)[0].(map[string]any)
	if got := ch["message"].(map[string]any)["content"]; got != want {
		t.Fatalf("reply %q, want the greedy %q", got, want)
	}
	lp, ok := ch["logprobs"].(map[string]any)
	if !ok {
		t.Fatalf("logprobs %v", ch["logprobs"])
	}
	if text := checkLogprobs(t, entriesOf(t, lp["content"]), ids, 3); text != want {
		t.Fatalf("tokens spell %q, the reply is %q", text, want)
	}
	// a stop sequence: the tokens that spelled it are not shown (want is
	// "7France…"; the reply stops before "Fra")
	r = h.do("/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":8,"temperature":0,"logprobs":true,"stop":"Fra"}`, 200)
	ch = r["choices"].([]any)[0].(map[string]any)
	var spelled strings.Builder
	for _, e := range entriesOf(t, ch["logprobs"].(map[string]any)["content"]) {
		spelled.WriteString(e.Token)
	}
	if reply := ch["message"].(map[string]any)["content"]; spelled.String() != reply || reply != want[:strings.Index(want, "Fra")] {
		t.Fatalf("with a stop: tokens spell %q, the reply is %q", spelled.String(), reply)
	}
	// llama-server's n_probs on the chat route
	r = h.do("/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":2,"temperature":0,"n_probs":4}`, 200)
	lp = r["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	checkLogprobs(t, entriesOf(t, lp["content"]), ids[:2], 4)
	// top_logprobs defaults to llama-server's 20
	r = h.do("/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":2,"temperature":0,"logprobs":true}`, 200)
	lp = r["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	checkLogprobs(t, entriesOf(t, lp["content"]), ids[:2], defaultTopLogprobs)

	resp, err := h.post(context.Background(), "/v1/chat/completions", strings.Replace(body, `"logprobs"`, `"stream":true,"logprobs"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []tokenEntry
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for n := 0; sc.Scan(); {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta        map[string]any
				Logprobs     *struct{ Content []tokenEntry }
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		d := c.Choices[0]
		if n++; n == 1 {
			if v, ok := d.Delta["content"]; !ok || v != nil || d.Delta["role"] != "assistant" {
				t.Fatalf("first chunk %s: want role assistant and content null", data)
			}
			continue
		}
		if d.FinishReason != nil {
			continue
		}
		if d.Logprobs == nil || len(d.Logprobs.Content) == 0 {
			t.Fatalf("content chunk without logprobs: %s", data)
		}
		got = append(got, d.Logprobs.Content...)
		text.WriteString(d.Delta["content"].(string))
	}
	if s := checkLogprobs(t, got, ids, 3); s != want || text.String() != want {
		t.Fatalf("stream: tokens spell %q, text %q, want %q", s, text.String(), want)
	}
}

// TestCompletionLogprobs: /v1/completions' logprobs (a number) gives
// llama-server's content entries and OpenAI's tokens / token_logprobs /
// top_logprobs beside them; logprobs 0 the chosen tokens' alone.
func TestCompletionLogprobs(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "p2_capital")
	ids := g.GeneratedTokens[:6]
	want := h.expected(ids)
	r := h.do("/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":6,"temperature":0,"logprobs":2}`, js(g.UserText)), 200)
	ch := r["choices"].([]any)[0].(map[string]any)
	lp := ch["logprobs"].(map[string]any)
	es := entriesOf(t, lp["content"])
	if ch["text"] != want || checkLogprobs(t, es, ids, 2) != want {
		t.Fatalf("text %q, want %q", ch["text"], want)
	}
	toks, lps, tops := lp["tokens"].([]any), lp["token_logprobs"].([]any), lp["top_logprobs"].([]any)
	if len(toks) != 6 || len(lps) != 6 || len(tops) != 6 {
		t.Fatalf("legacy arrays %v", lp)
	}
	for i, e := range es {
		if toks[i] != e.Token || lps[i] != *e.Logprob || len(tops[i].(map[string]any)) == 0 {
			t.Fatalf("legacy entry %d: %v %v %v, content %+v", i, toks[i], lps[i], tops[i], e)
		}
	}
	r = h.do("/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":3,"temperature":0,"logprobs":0}`, js(g.UserText)), 200)
	lp = r["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	checkLogprobs(t, entriesOf(t, lp["content"]), ids[:3], 0)
	r = h.do("/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":3,"temperature":0}`, js(g.UserText)), 200)
	if v := r["choices"].([]any)[0].(map[string]any)["logprobs"]; v != nil {
		t.Fatalf("logprobs %v without asking", v)
	}
}

// TestNativeProbs: /completion's n_probs gives completion_probabilities in
// llama-server's shape, whole (non-streamed) or per chunk; with
// post_sampling_probs the probabilities after the sampler chain (greedy:
// the chosen token with 1; at temperature 1 with top-k 4, at most 4 tokens
// whose probabilities add up to 1).
func TestNativeProbs(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "p2_capital")
	ids := g.GeneratedTokens[:5]
	body := fmt.Sprintf(`{"prompt":%s,"n_predict":5,"temperature":0,"n_probs":10}`, js(g.UserText))
	r := h.do("/completion", body, 200)
	if r["content"] != h.expected(ids) {
		t.Fatalf("content %q", r["content"])
	}
	checkLogprobs(t, entriesOf(t, r["completion_probabilities"]), ids, 10)
	if gs := r["generation_settings"].(map[string]any); gs["n_probs"] != 10.0 || gs["post_sampling_probs"] != false {
		t.Fatalf("generation_settings %v", gs)
	}

	resp, err := h.post(context.Background(), "/completion", strings.Replace(body, `"n_probs"`, `"stream":true,"n_probs"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []tokenEntry
	for _, c := range readNative(t, resp.Body) {
		if c["stop"] == true {
			if _, ok := c["completion_probabilities"]; ok {
				t.Fatal("the stream's last event repeats completion_probabilities")
			}
			continue
		}
		es := entriesOf(t, c["completion_probabilities"])
		if len(es) != len(ints(c["tokens"])) {
			t.Fatalf("chunk %v: entries for other tokens", c)
		}
		got = append(got, es...)
	}
	checkLogprobs(t, got, ids, 10)

	r = h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":3,"temperature":0,"n_probs":5,"post_sampling_probs":true}`, js(g.UserText)), 200)
	for i, e := range entriesOf(t, r["completion_probabilities"]) {
		if e.ID != ids[i] || e.Prob == nil || *e.Prob != 1 || e.Logprob != nil || len(e.TopProbs) != 1 || e.TopProbs[0].ID != e.ID {
			t.Fatalf("post-sampling greedy entry %d: %+v", i, e)
		}
	}
	r = h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":6,"temperature":1,"top_k":4,"seed":3,"n_probs":10,"post_sampling_probs":true}`, js(g.UserText)), 200)
	for i, e := range entriesOf(t, r["completion_probabilities"]) {
		sum, chosen := 0.0, false
		for _, x := range e.TopProbs {
			sum += *x.Prob
			chosen = chosen || x.ID == e.ID && *x.Prob == *e.Prob
		}
		if e.Prob == nil || *e.Prob <= 0 || *e.Prob > 1 || len(e.TopProbs) == 0 || len(e.TopProbs) > 4 || math.Abs(sum-1) > 1e-6 || !chosen {
			t.Fatalf("post-sampling entry %d: %+v (sum %v)", i, e, sum)
		}
	}
}

// TestLogitBias: a logit bias of false or -100 on the tokens greedy would
// pick bans them, given as ids or strings, as pairs or an object, on
// /completion and the chat route; ignore_eos bans every end-of-generation
// token (generation_settings lists them).
func TestLogitBias(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "p2_capital")
	tok := h.m.Tokenizer()
	banned := map[int32]bool{}
	for _, id := range g.GeneratedTokens[:8] {
		banned[id] = true
	}
	var idList, strList []string
	for id := range banned {
		idList = append(idList, fmt.Sprint(id))
		s := tok.Decode([]int32{id}, false)
		if slices.Equal(tok.Encode(s, false, false), []int32{id}) {
			strList = append(strList, js(s))
		}
	}
	if len(strList) == 0 {
		t.Fatal("no greedy token is its own text's tokenization")
	}
	forms := map[string]string{
		"id pairs":       "[[" + strings.Join(idList, ",false],[") + ",false]]",
		"id object":      `{"` + strings.Join(idList, `":-100,"`) + `":-100}`,
		"string pairs":   "[[" + strings.Join(strList, ",false],[") + ",false]]",
		"string object":  "{" + strings.Join(strList, ":false,") + ":false}",
		"chat id object": `{"` + strings.Join(idList, `":false,"`) + `":false}`,
	}
	for name, bias := range forms {
		ban := banned
		if strings.HasPrefix(name, "string") {
			ban = map[int32]bool{}
			for _, s := range strList {
				var txt string
				json.Unmarshal([]byte(s), &txt)
				ban[tok.Encode(txt, false, false)[0]] = true
			}
		}
		var out []int32
		if strings.HasPrefix(name, "chat") {
			r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"temperature":0,"return_tokens":true,"logit_bias":%s}`, js(g.UserText), bias), 200)
			out = ints(r["tokens"])
			c := h.do("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%s}],"max_tokens":8,"temperature":0,"logprobs":true,"top_logprobs":0,"logit_bias":%s}`, js(g.UserText), bias), 200)
			for _, e := range entriesOf(t, c["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)["content"]) {
				out = append(out, e.ID)
			}
		} else {
			r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"temperature":0,"return_tokens":true,"logit_bias":%s}`, js(g.UserText), bias), 200)
			out = ints(r["tokens"])
		}
		if len(out) == 0 {
			t.Fatalf("%s: no tokens", name)
		}
		for _, id := range out {
			if ban[id] {
				t.Fatalf("%s %s: generated the banned token %d: %v", name, bias, id, out)
			}
		}
	}
	r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":2,"ignore_eos":true}`, js(g.UserText)), 200)
	lb := r["generation_settings"].(map[string]any)["logit_bias"].([]any)
	if len(lb) != len(tok.EOGs()) || lb[0].(map[string]any)["bias"] != nil {
		t.Fatalf("ignore_eos: logit_bias %v, want the %d end-of-generation tokens banned", lb, len(tok.EOGs()))
	}
}

// TestUnsupportedFields: a field pipe cannot honour is a 400 that names it
// (in the message and in param); its neutral values are accepted.
func TestUnsupportedFields(t *testing.T) {
	h := start(t, nil)
	chat := func(extra string) string {
		return `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,` + extra + `}`
	}
	for _, c := range []struct{ path, body, field string }{
		{"/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"f"}}]`), "tools"},
		{"/v1/chat/completions", chat(`"tool_choice":"required"`), "tool_choice"},
		{"/v1/chat/completions", chat(`"mirostat":2`), "mirostat"},
		{"/v1/chat/completions", chat(`"typical_p":0.5`), "typical_p"},
		{"/v1/chat/completions", chat(`"continue_final_message":"reasoning_content"`), "continue_final_message"},
		{"/v1/chat/completions", chat(`"top_logprobs":2`), "top_logprobs"},
		{"/v1/chat/completions", chat(`"logprobs":true,"top_logprobs":-1`), "top_logprobs"},
		{"/v1/chat/completions", chat(`"logit_bias":{"5":"high"}`), "logit_bias"},
		{"/v1/chat/completions", chat(`"logit_bias":[[5]]`), "logit_bias"},
		{"/v1/chat/completions", chat(`"logit_bias":[[999999,1]]`), "logit_bias"},
		{"/v1/chat/completions", chat(`"logit_bias":7`), "logit_bias"},
		{"/v1/completions", `{"prompt":"x","echo":true}`, "echo"},
		{"/v1/completions", `{"prompt":"x","logprobs":-1}`, "logprobs"},
		{"/completion", `{"prompt":"x","n_probs":-2}`, "n_probs"},
		{"/completion", `{"prompt":"x","dry_multiplier":0.8}`, "dry_multiplier"},
		{"/completion", `{"prompt":"x","samplers":["top_k","temperature"]}`, "samplers"},
		{"/completion", `{"prompt":"x","samplers":"ektpm"}`, "samplers"},
		{"/completion", `{"prompt":"x","samplers":"edkypmixt"}`, "samplers"},
		{"/completion", `{"prompt":"x","samplers":"edkypmxt","n_predict":1}`, ""},
		{"/completion", `{"prompt":"x","samplers":["penalties","dry","top_k","typ_p","top_p","min_p","xtc","temperature"],"n_predict":1}`, ""},
	} {
		if c.field == "" { // a neutral value: accepted
			h.do(c.path, c.body, 200)
			continue
		}
		r := h.do(c.path, c.body, 400)
		e := r["error"].(map[string]any)
		if !strings.Contains(e["message"].(string), c.field) || e["param"] != c.field {
			t.Errorf("%s: error %v, want one naming %q", c.body, e, c.field)
		}
	}
	for _, extra := range []string{`"response_format":{"type":"text"}`, `"tools":[]`, `"tool_choice":"none"`, `"mirostat":0`,
		`"typical_p":1`, `"grammar":""`, `"add_generation_prompt":true`, `"user":"me"`, `"stream_options":{"include_usage":true}`} {
		h.do("/v1/chat/completions", chat(extra), 200)
	}
}

// TestServedModelAnyName: with one model served, any "model" is answered by
// it (llama-server's), the response naming the served one.
func TestServedModelAnyName(t *testing.T) {
	h := start(t, nil)
	r := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"model":"gpt-4o","max_tokens":1}`, 200)
	if r["model"] != "tiny" {
		t.Fatalf("model %v", r["model"])
	}
	h.do("/completion", `{"prompt":"x","model":"other","n_predict":1}`, 200)
}

// TestRoutesAsLlamaServer: /completions is the native endpoint (as
// /completion) and /v1/completions OpenAI's; /v1/health answers; --no-slots
// and --no-metrics turn /slots and /metrics off with 501 and /props says so.
func TestRoutesAsLlamaServer(t *testing.T) {
	h := start(t, func(o *Options) { o.NoSlots, o.NoMetrics = true, true })
	r := h.do("/completions", `{"prompt":"hello","n_predict":2}`, 200)
	if r["stop"] != true || r["timings"] == nil || r["choices"] != nil {
		t.Fatalf("/completions answered %v, want llama-server's native shape", r)
	}
	if r := h.do("/v1/completions", `{"prompt":"hello","max_tokens":2}`, 200); r["object"] != "text_completion" {
		t.Fatalf("/v1/completions %v", r)
	}
	if v := h.get("/v1/health").(map[string]any); v["status"] != "ok" {
		t.Fatalf("/v1/health %v", v)
	}
	for _, path := range []string{"/slots", "/metrics"} {
		code, _, body := h.send("GET", path, "", "")
		if code != 501 || !strings.Contains(body, "not_supported_error") {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	p := h.get("/props").(map[string]any)
	if p["endpoint_slots"] != false || p["endpoint_metrics"] != false {
		t.Fatalf("/props %v", p)
	}
}

// TestTimingsExcludeFirstToken: predicted_per_second and
// predicted_per_token_ms are over the steps after the first token (which
// the prompt pass produced), as llama-server's.
func TestTimingsExcludeFirstToken(t *testing.T) {
	tm := timingsOf(&outcome{genTokens: 5, lastTok: 400 * time.Millisecond, decode: 600 * time.Millisecond})
	if tm.PredictedN != 5 || tm.PredictedMs != 400 || tm.PredictedPerSecond != 10 || tm.PredictedPerTokenMs != 100 {
		t.Fatalf("timings %+v, want 5 tokens, 400 ms, 10/s, 100 ms per token", tm)
	}
	if tm := timingsOf(&outcome{genTokens: 1}); tm.PredictedPerSecond != 0 || tm.PredictedPerTokenMs != 0 {
		t.Fatalf("one token: %+v", tm)
	}
	// through the API: one token is the prompt pass's alone, no decode rate
	h := start(t, nil)
	for n, positive := range map[int]bool{1: false, 4: true} {
		r := h.do("/completion", fmt.Sprintf(`{"prompt":"hello","n_predict":%d}`, n), 200)
		tm := r["timings"].(map[string]any)
		if tm["predicted_n"] != float64(n) || (tm["predicted_per_second"].(float64) > 0) != positive {
			t.Fatalf("n_predict %d: timings %v", n, tm)
		}
	}
}
