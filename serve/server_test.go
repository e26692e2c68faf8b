package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tinyQ8 = "../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf"

// golden is the part of a llama.cpp golden run the tests use.
type golden struct {
	Chat            bool    `json:"chat"`
	UserText        string  `json:"user_text"`
	PromptTokens    []int32 `json:"prompt_tokens"`
	GeneratedTokens []int32 `json:"generated_tokens"`
}

func loadGolden(t *testing.T, name string) golden {
	t.Helper()
	b, err := os.ReadFile("../testdata/golden/runs/tiny-qwen3moe-Q8_0/" + name + "__ref.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// syncBuf is a log sink the server writes and the test reads; wrote holds
// a token after each write (capacity one: a write never blocks on it, and
// a reader that looks after taking the token misses no event).
type syncBuf struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func newSyncBuf() *syncBuf { return &syncBuf{wrote: make(chan struct{}, 1)} }

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// events returns the logged events with the given "event" field.
func (s *syncBuf) events(t *testing.T, name string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["event"] == name {
			out = append(out, m)
		}
	}
	return out
}

// request returns the `request` event of the response with id rid.
func (s *syncBuf) request(t *testing.T, rid string) map[string]any {
	t.Helper()
	guard := time.After(hangGuard) // the event comes when the handler ends
	for {
		for _, e := range s.events(t, "request") {
			if strings.HasSuffix(rid, "-"+e["id"].(string)) || e["id"] == rid {
				return e
			}
		}
		select {
		case <-s.wrote:
		case <-guard:
			t.Fatalf("no request event for %q in %v", rid, hangGuard)
		}
	}
}

type harness struct {
	t    *testing.T
	url  string
	m    *decode.Model
	logs *syncBuf
	stop func() error
	opts decode.Options // m's
	ref  *decode.Model  // a second model of opts (embeddings_test.go), nil until used
}

var greedy = sample.Params{Temp: 0, TopP: 1, RepeatPenalty: 1}

// start loads the tiny model and serves it on a loopback port.
func start(t *testing.T, tune func(*Options)) *harness {
	t.Helper()
	return startModel(t, nil, tune)
}

// startModel is start with the model's options changed by load (nil: none).
func startModel(t *testing.T, load func(*decode.Options), tune func(*Options)) *harness {
	t.Helper()
	return startOn(t, load, tune, nil)
}

// startOn is startModel serving on wrap(the loopback listener) (nil: the
// listener itself).
func startOn(t *testing.T, load func(*decode.Options), tune func(*Options), wrap func(net.Listener) net.Listener) *harness {
	t.Helper()
	logs := newSyncBuf()
	log := zerolog.New(logs).With().Timestamp().Logger()
	do := decode.Options{
		Engine: stages.Config{Path: tinyQ8, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"},
			Threads: 2, Log: zerolog.Nop()},
		KV: model.KVF32, Ctx: 256,
	}
	if load != nil {
		load(&do)
	}
	m, err := decode.Open(context.Background(), do)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Model: m, ModelID: "tiny", Ctx: 256, Sampling: greedy, Log: log}
	if tune != nil {
		tune(&o)
	}
	srv, err := New(o)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serr error
	h := &harness{t: t, url: url, m: m, logs: logs, opts: do}
	h.stop = func() error {
		once.Do(func() {
			cancel()
			serr = <-done
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		})
		return serr
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		if err := h.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return h
}

// expected is the text of tokens as the tokenizer streams it.
func (h *harness) expected(ids []int32) string {
	st := h.m.Tokenizer().NewStream(false)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(st.Add(id))
	}
	b.WriteString(st.Flush())
	return b.String()
}

func (h *harness) post(ctx context.Context, path, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return http.DefaultClient.Do(req)
}

// do posts body and decodes a JSON answer, checking the status.
func (h *harness) do(path, body string, status int) map[string]any {
	h.t.Helper()
	resp, err := h.post(context.Background(), path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		h.t.Fatalf("POST %q %q: status %d, want %d: %q", path, body, resp.StatusCode, status, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		h.t.Fatalf("POST %q: body is not JSON: %q", path, b)
	}
	return m
}

// chunk is one streamed event's fields the tests look at.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Text         *string `json:"text"`
		Delta        *struct{ Role, Content string }
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// readSSE reads a stream to its end: the data payloads before [DONE] and
// whether [DONE] came.
func readSSE(t *testing.T, r io.Reader) (chunks []chunk, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line without data: %q", line)
		}
		if data == "[DONE]" {
			if sc.Scan() && sc.Text() != "" {
				t.Fatalf("data after [DONE]: %q", sc.Text())
			}
			return chunks, true
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("SSE data is not JSON: %q", data)
		}
		chunks = append(chunks, c)
	}
	return chunks, false
}

func streamText(chunks []chunk) (string, string, *usage) {
	var b strings.Builder
	finish := ""
	var u *usage
	for _, c := range chunks {
		for _, ch := range c.Choices {
			if ch.Text != nil {
				b.WriteString(*ch.Text)
			}
			if ch.Delta != nil {
				b.WriteString(ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			u = c.Usage
		}
	}
	return b.String(), finish, u
}

// js is s as a JSON string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func usageOf(t *testing.T, m map[string]any) (prompt, completion, cached int) {
	t.Helper()
	u, ok := m["usage"].(map[string]any)
	if !ok {
		t.Fatalf("no usage in %v", m)
	}
	d := u["prompt_tokens_details"].(map[string]any)
	return int(u["prompt_tokens"].(float64)), int(u["completion_tokens"].(float64)), int(d["cached_tokens"].(float64))
}

// TestCompletion: /v1/completions reproduces llama.cpp's greedy
// continuation, non-streaming and streaming, and a repeated prompt reuses all
// of its KV but the last token and still gives the same text.
func TestCompletion(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "p2_capital")
	want := h.expected(g.GeneratedTokens[:12])
	body := fmt.Sprintf(`{"model":"tiny","prompt":%s,"max_tokens":12,"temperature":0}`, js(g.UserText))
	r := h.do("/v1/completions", body, 200)
	ch := r["choices"].([]any)[0].(map[string]any)
	if ch["text"] != want || ch["finish_reason"] != "length" || r["object"] != "text_completion" {
		t.Fatalf("got %q (%v, %v), want %q (length)", ch["text"], ch["finish_reason"], r["object"], want)
	}
	p, c, cached := usageOf(t, r)
	if p != len(g.PromptTokens) || c != 12 || cached != 0 {
		t.Fatalf("usage prompt %d completion %d cached %d, want %d 12 0", p, c, cached, len(g.PromptTokens))
	}
	ev := h.logs.request(t, r["id"].(string))
	if ev["status"] != 200.0 || ev["completion_tokens"] != 12.0 || ev["ttft_ms"] == nil || ev["tok_s"] == nil || ev["cache_hit_pct"] == nil {
		t.Fatalf("request event %v", ev)
	}

	resp, err := h.post(context.Background(), "/v1/completions", strings.Replace(body, `"temperature"`, `"stream":true,"temperature"`, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	chunks, done := readSSE(t, resp.Body)
	text, finish, u := streamText(chunks)
	if !done || text != want || finish != "length" || u == nil {
		t.Fatalf("stream: done %v, text %q, finish %q, usage %v; want %q", done, text, finish, u, want)
	}
	if u.PromptTokens != len(g.PromptTokens) || u.CompletionTokens != 12 || u.PromptTokensDetails.CachedTokens != len(g.PromptTokens)-1 {
		t.Fatalf("stream usage %+v: want the whole prompt but its last token reused", *u)
	}
	for _, c := range chunks {
		if c.Object != "text_completion" || c.ID != chunks[0].ID {
			t.Fatalf("chunk %+v", c)
		}
	}
}

// TestChatStream: a streamed chat completion is llama.cpp's greedy chat
// reply, opened by a role delta and closed by finish_reason, usage and
// [DONE]; a stop sequence ends the reply before it.
func TestChatStream(t *testing.T) {
	h := start(t, nil)
	g := loadGolden(t, "chat0_weather")
	want := h.expected(g.GeneratedTokens[:10])
	msgs := fmt.Sprintf(`[{"role":"user","content":%s}]`, js(g.UserText))
	resp, err := h.post(context.Background(), "/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":10,"temperature":0,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	chunks, done := readSSE(t, resp.Body)
	text, finish, u := streamText(chunks)
	if !done || text != want || finish != "length" {
		t.Fatalf("done %v text %q finish %q, want %q", done, text, finish, want)
	}
	if d := chunks[0].Choices[0].Delta; d == nil || d.Role != "assistant" || chunks[0].Object != "chat.completion.chunk" {
		t.Fatalf("first chunk %+v", chunks[0])
	}
	if u == nil || u.PromptTokens != len(g.PromptTokens) || u.CompletionTokens != 10 {
		t.Fatalf("usage %+v", u)
	}

	// want is "7France…": stop at the first "France", as an array of stops.
	r := h.do("/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":10,"temperature":0,"stop":["Fra","zzz"]}`, 200)
	ch := r["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	if cut := want[:strings.Index(want, "Fra")]; msg["content"] != cut || ch["finish_reason"] != "stop" || msg["role"] != "assistant" {
		t.Fatalf("with stop: %q (%v), want %q (stop)", msg["content"], ch["finish_reason"], cut)
	}
}

// TestPrefixReuse: a chat that grows by one turn prefills only what the turn
// adds.
func TestPrefixReuse(t *testing.T) {
	h := start(t, nil)
	r1 := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"hello there"}],"max_tokens":6}`, 200)
	p1, _, _ := usageOf(t, r1)
	reply := r1["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":"hello there"},{"role":"assistant","content":%s},{"role":"user","content":"and the weather?"}],"max_tokens":4}`, js(reply))
	r2 := h.do("/v1/chat/completions", body, 200)
	p2, _, cached := usageOf(t, r2)
	if cached < p1 || cached >= p2 {
		t.Fatalf("second turn reused %d of %d prompt tokens; the first turn's prompt alone had %d", cached, p2, p1)
	}
	ev := h.logs.request(t, r2["id"].(string))
	if ev["cached_tokens"] != float64(cached) {
		t.Fatalf("log %v", ev)
	}
	// A different conversation shares at most the template's opening.
	r3 := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"zebra"}],"max_tokens":2}`, 200)
	if _, _, c3 := usageOf(t, r3); c3 >= p1-2 {
		t.Fatalf("unrelated prompt reused %d tokens", c3)
	}
}

// TestDisconnect: a client that goes away mid-stream cancels its generation
// within a token or two; the next request decodes as if nothing happened
// (no pinned cache slot, no stale KV), several times over. The generation
// waits at a gate (its third token streamed) until the server has seen the
// client's connection end, so the tokens it makes after that are counted
// against the cancellation alone, not against how fast the client was.
func TestDisconnect(t *testing.T) {
	var el *eventListener
	h := startOn(t, nil, nil, func(ln net.Listener) net.Listener { el = newEventListener(ln); return el })
	g := loadGolden(t, "p2_capital")
	want := h.expected(g.GeneratedTokens[:12])
	body := fmt.Sprintf(`{"prompt":%s,"max_tokens":12,"temperature":0}`, js(g.UserText))
	for i := 0; i < 4; i++ {
		gt := gate(t, h, 3)
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := h.post(ctx, "/v1/completions", `{"prompt":"tell me a long story","max_tokens":200,"stream":true}`)
		if err != nil {
			t.Fatal(err)
		}
		id := readChunks(t, bufio.NewReader(resp.Body), 3)
		waitFor(t, gt.parked, "the stream's third token")
		for len(el.gone) > 0 { // connections that ended before this round
			<-el.gone
		}
		cancel()
		resp.Body.Close()
		select {
		case <-el.gone:
		case <-time.After(hangGuard):
			t.Fatalf("round %d: the server never saw the client go (%v)", i, hangGuard)
		}
		gt.open()
		ev := h.logs.request(t, id)
		// 3 tokens when the client left, then at most the one in flight and
		// one more write that the closed socket still takes.
		if n := ev["completion_tokens"].(float64); n > 5 || ev["status"] != 200.0 || !strings.Contains(fmt.Sprint(ev["error"]), "canceled") {
			t.Fatalf("cancelled request: %v", ev)
		}
		h.m.OnRoute(nil)
		r := h.do("/v1/completions", body, 200)
		if got := r["choices"].([]any)[0].(map[string]any)["text"]; got != want {
			t.Fatalf("after a cancelled request (round %d): %q, want %q", i, got, want)
		}
	}
}

// readChunks reads n data chunks of a stream and returns their id.
func readChunks(t *testing.T, rd *bufio.Reader, n int) (id string) {
	t.Helper()
	for seen := 0; seen < n; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var c chunk
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			id = c.ID
			seen++
		}
	}
	return id
}

// TestQueue: concurrent requests wait for the decode slot (/metrics counts
// them) and each gets the answer it would get alone.
func TestQueue(t *testing.T) {
	h := start(t, nil)
	gt := gate(t, h, 1) // the first request holds the slot until two queue behind it
	g := loadGolden(t, "p2_capital")
	want := h.expected(g.GeneratedTokens[:8])
	body := fmt.Sprintf(`{"prompt":%s,"max_tokens":8,"temperature":0}`, js(g.UserText))
	const n = 3
	texts := make([]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := h.post(context.Background(), "/v1/completions", body)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var r response
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 || r.Choices[0].Text == nil {
				errs <- fmt.Errorf("status %d: %v %+v", resp.StatusCode, err, r)
				return
			}
			texts[i] = *r.Choices[0].Text
		})
	}
	waitFor(t, gt.parked, "the first request's generation")
	for deadline := time.Now().Add(hangGuard); !strings.Contains(h.metrics(t), "\npipe_requests_queued 2\n"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			gt.open()
			t.Fatalf("/metrics did not show the two requests queued behind the slot in %v:%s", hangGuard, h.metrics(t))
		}
	}
	gt.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, s := range texts {
		if s != want {
			t.Errorf("request %d: %q, want %q", i, s, want)
		}
	}
}

func (h *harness) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %q", resp.StatusCode, b)
	}
	return "\n" + string(b)
}

// TestMetricsModelsHealth: the read-only routes.
func TestMetricsModelsHealth(t *testing.T) {
	h := start(t, nil)
	h.do("/v1/completions", `{"prompt":"hello","max_tokens":5,"temperature":0}`, 200)
	met := h.metrics(t)
	for _, want := range []string{"\npipe_generated_tokens_total 5\n", "\npipe_requests_total{status=\"200\"} 1\n",
		"\n# TYPE pipe_expert_cache_hit_percent gauge\n", "\n# TYPE pipe_expert_read_bytes_total counter\n",
		"\npipe_requests_running 0\n", "\n# TYPE pipe_expert_stall_seconds_total counter\n",
		"\nllamacpp:tokens_predicted_total 5\n", "\n# TYPE llamacpp:prompt_tokens_total counter\n", "\nllamacpp:requests_processing 0\n",
		"\n# TYPE llamacpp:predicted_tokens_seconds gauge\n", "\nllamacpp:requests_deferred 0\n"} {
		if !strings.Contains(met, want) {
			t.Errorf("/metrics lacks %q:%q", want, met)
		}
	}
	// llama-server's prompt tokens exclude cached ones: none on a first request
	var pipeN, llamaN float64
	if _, err := fmt.Sscan(strings.SplitN(strings.SplitN(met, "\npipe_prompt_tokens_total ", 2)[1], "\n", 2)[0], &pipeN); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscan(strings.SplitN(strings.SplitN(met, "\nllamacpp:prompt_tokens_total ", 2)[1], "\n", 2)[0], &llamaN); err != nil {
		t.Fatal(err)
	}
	if pipeN <= 0 || llamaN != pipeN {
		t.Errorf("llamacpp:prompt_tokens_total %v, pipe_prompt_tokens_total %v", llamaN, pipeN)
	}
	for _, path := range []string{"/v1/models", "/models", "/health"} {
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !json.Valid(b) {
			t.Fatalf("GET %q: %d %q", path, resp.StatusCode, b)
		}
		if path != "/health" && !strings.Contains(string(b), `"id":"tiny"`) {
			t.Fatalf("GET %q: %q", path, b)
		}
	}
}

// TestBadInputs: every malformed request gets a JSON error with the right
// status, and the server keeps answering.
func TestBadInputs(t *testing.T) {
	h := start(t, func(o *Options) { o.MaxBodyBytes = 4096 })
	for _, c := range []struct {
		path, body string
		status     int
		in         string
	}{
		{"/v1/chat/completions", `{"messages":[`, 400, "invalid JSON"},
		{"/v1/chat/completions", `{"messages":[]}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "role"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "image_url"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":17}`, 400, "n=17"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, 400, "max_tokens"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n_predict":-2}`, 400, "n_predict"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":"ten"}`, 400, "max_tokens: want an integer, got a string"},
		{"/v1/chat/completions", `{"messages":{"role":"user"}}`, 400, "messages: want an array, got an object"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":"yes"}`, 400, "stream: want true or false, got a string"},
		{"/v1/completions", `{"prompt":"x","seed":1.5}`, 400, "seed: want an integer, got a number 1.5"},
		{"/completion", `{"prompt":[1,99999]}`, 400, "token 99999"},
		{"/completion", `{"prompt":{}}`, 400, "prompt"},
		{"/detokenize", `{"tokens":[-1]}`, 400, "token -1"},
		{"/tokenize", `{"content":5}`, 400, "content: want a string, got a number"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"temperature":-1}`, 400, "temperature"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"top_p":"high"}`, 400, "top_p"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stop":[1]}`, 400, "stop"},
		{"/v1/completions", `{"prompt":""}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":"` + strings.Repeat("word ", 300) + `","stream":true}`, 400, "context"},
		{"/v1/completions", `{"prompt":"` + strings.Repeat("x", 5000) + `"}`, 413, "body"},
		{"/v1/nothing", `{}`, 404, "no route"},
	} {
		r := h.do(c.path, c.body, c.status)
		e, ok := r["error"].(map[string]any)
		if !ok || !strings.Contains(e["message"].(string), c.in) {
			t.Errorf("%q %.60s: error %v, want one mentioning %q", c.path, c.body, r, c.in)
			continue
		}
		if msg := e["message"].(string); strings.Contains(msg, "Go ") || strings.Contains(msg, "struct") || strings.Contains(msg, "float32") || strings.Contains(msg, "int32") {
			t.Errorf("%q %.60s: %q names Go's types", c.path, c.body, msg)
		}
	}
	resp, err := http.Get(h.url + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET /v1/completions: %d", resp.StatusCode)
	}
	h.do("/v1/completions", `{"prompt":"still alive","max_tokens":2}`, 200)
}

// TestAPIKey: with a key, every route but /health needs it.
func TestAPIKey(t *testing.T) {
	h := start(t, func(o *Options) { o.APIKey = "sekrit" })
	get := func(path, key string) int {
		req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, key string
		want      int
	}{
		{"/health", "", 200}, {"/v1/models", "", 401}, {"/v1/models", "sekri", 401}, {"/v1/models", "sekrit", 200},
		{"/metrics", "", 401}, {"/metrics", "sekrit", 200}, {"/nope", "", 401},
	} {
		if got := get(c.path, c.key); got != c.want {
			t.Errorf("GET %q with key %q: %d, want %d", c.path, c.key, got, c.want)
		}
	}
	resp, err := h.post(context.Background(), "/v1/completions", `{"prompt":"hi","max_tokens":1}`, "Authorization", "Bearer sekrit")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("authorized completion: %d", resp.StatusCode)
	}
}

// TestShutdown: cancelling Serve's context ends a running stream within the
// token in flight (not at max_tokens) and Serve returns nil. The generation
// waits at a gate until Shutdown closes the listener, which Serve does after
// cancelling the generations; so "promptly" is counted in layers routed
// after that, not in seconds.
func TestShutdown(t *testing.T) {
	var el *eventListener
	h := startOn(t, nil, nil, func(ln net.Listener) net.Listener { el = newEventListener(ln); return el })
	g := gate(t, h, 2)
	resp, err := h.post(context.Background(), "/v1/completions", `{"prompt":"a long one","max_tokens":200,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	waitFor(t, g.parked, "the stream's second token")
	go func() {
		select {
		case <-el.closed:
		case <-time.After(hangGuard):
			t.Errorf("Serve did not close its listener %v after its context was cancelled", hangGuard)
		}
		g.open()
	}()
	if err := h.stop(); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if n, nl := g.after.Load(), h.m.Engine().Desc().HParams.NLayer; n >= int64(nl) {
		t.Errorf("%d layers routed after the cancel, want fewer than one token's %d", n, nl)
	}
	rest, _ := io.ReadAll(rd)
	if strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("a cancelled stream ended with [DONE] (%d bytes after the cancel)", len(rest))
	}
}

func TestStopper(t *testing.T) {
	for _, c := range []struct {
		stops  []string
		pieces []string
		want   string
		stop   bool
	}{
		{nil, []string{"ab", "cd"}, "abcd", false},
		{[]string{"cd"}, []string{"ab", "c", "d", "ef"}, "ab", true},
		{[]string{"cd"}, []string{"abc", "x"}, "abcx", false},
		{[]string{"xyz", "b"}, []string{"axy", "b"}, "axy", true},
		{[]string{"lo w"}, []string{"hel", "lo", " ", "w", "orld"}, "hel", true},
	} {
		s := stopper{stops: c.stops}
		var got strings.Builder
		stopped := false
		for _, p := range c.pieces {
			out, st := s.add(p)
			got.WriteString(out)
			if st {
				stopped = true
				break
			}
		}
		if !stopped {
			got.WriteString(s.flush())
		}
		if got.String() != c.want || stopped != c.stop {
			t.Errorf("stops %q pieces %q: %q %v, want %q %v", c.stops, c.pieces, got.String(), stopped, c.want, c.stop)
		}
	}
}
