package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// send makes a request with the given Host (empty: the URL's) and headers
// and returns its status, headers and body.
func (h *harness) send(method, path, host, body string, hdr ...string) (int, http.Header, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const jsonCT = "application/json"

// TestHostOriginAndBodies: a server answers only Host names that cannot be
// rebound to it (IP literals, localhost, --host, --allowed-hosts), refuses
// cross-site browser requests (an Origin that is neither the server itself
// nor allowed), takes only JSON bodies, and answers CORS preflights (before
// authentication, which a preflight never carries) with 200, naming only an
// allowed origin in Access-Control-Allow-Origin (llama-server's answer).
func TestHostOriginAndBodies(t *testing.T) {
	h := start(t, func(o *Options) {
		o.APIKey = "sekrit"
		o.AllowedHosts = []string{"pipe.lan"}
		o.CORSOrigins = []string{"http://app.example:3000"}
	})
	port := h.url[strings.LastIndex(h.url, ":"):]
	auth := []string{"Authorization", "Bearer sekrit"}
	body := `{"prompt":"hi","max_tokens":1}`
	for _, c := range []struct {
		host string
		want int
	}{
		{"", 200}, {"localhost" + port, 200}, {"127.0.0.1" + port, 200}, {"[::1]" + port, 200}, {"pipe.lan" + port, 200},
		{"evil.example" + port, 403}, {"evil.example", 403}, {"localhost.evil.example" + port, 403},
	} {
		if got, _, b := h.send(http.MethodPost, "/v1/completions", c.host, body, append(auth, "Content-Type", jsonCT)...); got != c.want {
			t.Errorf("Host %q: status %d, want %d: %s", c.host, got, c.want, b)
		}
	}
	for _, c := range []struct {
		origin string
		want   int
	}{
		{h.url, 200}, {"http://app.example:3000", 200}, {"http://evil.example", 403}, {"null", 403}, {"http://app.example:3001", 403},
	} {
		got, hdr, b := h.send(http.MethodPost, "/v1/completions", "", body, append(auth, "Content-Type", jsonCT, "Origin", c.origin)...)
		if got != c.want {
			t.Errorf("Origin %q: status %d, want %d: %s", c.origin, got, c.want, b)
		}
		if c.origin == "http://app.example:3000" && hdr.Get("Access-Control-Allow-Origin") != c.origin {
			t.Errorf("allowed origin: Access-Control-Allow-Origin %q", hdr.Get("Access-Control-Allow-Origin"))
		}
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		if got, _, b := h.send(http.MethodPost, "/v1/completions", "", body, append(auth, "Content-Type", ct)...); got != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: status %d, want 415: %s", ct, got, b)
		}
	}
	if got, _, b := h.send(http.MethodPost, "/v1/completions", "", body, append(auth, "Content-Type", "application/json; charset=utf-8")...); got != 200 {
		t.Errorf("application/json; charset=utf-8: status %d: %s", got, b)
	}
	pre := func(origin string) (int, http.Header) {
		got, hdr, _ := h.send(http.MethodOptions, "/v1/chat/completions", "", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
		return got, hdr
	}
	got, hdr := pre("http://app.example:3000")
	if got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "http://app.example:3000" ||
		!strings.Contains(hdr.Get("Access-Control-Allow-Methods"), "POST") || hdr.Get("Access-Control-Allow-Headers") != "*" {
		t.Errorf("preflight of an allowed origin: %d %v", got, hdr)
	}
	if got, hdr := pre("http://evil.example"); got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", got, hdr)
	}
}

// TestHostDefaults: without a configured list, a server still refuses a DNS
// name it does not know (a rebinding attack's), keyless or not.
func TestHostDefaults(t *testing.T) {
	h := start(t, nil)
	if got, _, b := h.send(http.MethodGet, "/v1/models", "attacker.example", ""); got != 403 {
		t.Fatalf("Host attacker.example: %d %s", got, b)
	}
	if got, _, b := h.send(http.MethodGet, "/v1/models", "localhost", ""); got != 200 {
		t.Fatalf("Host localhost: %d %s", got, b)
	}
}

// TestBearerCaseInsensitive: the Authorization scheme is case-insensitive
// (RFC 9110 §11.1).
func TestBearerCaseInsensitive(t *testing.T) {
	h := start(t, func(o *Options) { o.APIKey = "sekrit" })
	for _, v := range []string{"Bearer sekrit", "bearer sekrit", "BEARER sekrit", "Bearer  sekrit"} {
		if got, _, b := h.send(http.MethodGet, "/v1/models", "", "", "Authorization", v); got != 200 {
			t.Errorf("Authorization %q: %d %s", v, got, b)
		}
	}
	for _, v := range []string{"Basic sekrit", "sekrit", "Bearersekrit", "bearer sekri"} {
		if got, _, _ := h.send(http.MethodGet, "/v1/models", "", "", "Authorization", v); got != 401 {
			t.Errorf("Authorization %q: %d, want 401", v, got)
		}
	}
}

// cachedOf posts a completion and returns its cached_tokens.
func (h *harness) cachedOf(prompt string, hdr ...string) int {
	h.t.Helper()
	got, _, b := h.send(http.MethodPost, "/v1/completions", "", fmt.Sprintf(`{"prompt":%s,"max_tokens":1%s}`, js(prompt), cacheKeyField(hdr)),
		"Content-Type", jsonCT)
	if got != 200 {
		h.t.Fatalf("%q: %d %s", prompt, got, b)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		h.t.Fatal(err)
	}
	_, _, cached := usageOf(h.t, m)
	return cached
}

// cacheKeyField is the prompt_cache_key field of a request, if hdr names one.
func cacheKeyField(hdr []string) string {
	if len(hdr) == 0 {
		return ""
	}
	return fmt.Sprintf(`,"prompt_cache_key":%s`, js(hdr[0]))
}

// TestPrefixCacheIsolation: another client's prompt is never reused, nor
// its cached tokens reported, unless the request shares the whole of it (a
// conversation that goes on) or the same prompt_cache_key.
func TestPrefixCacheIsolation(t *testing.T) {
	h := start(t, nil)
	secret := "The launch code is 7419 and the door opens at noon."
	h.cachedOf(secret)
	for _, probe := range []string{"The launch code is 7", "The launch code is 74", "The launch code is 7419 and the door"} {
		if c := h.cachedOf(probe); c != 0 {
			t.Fatalf("probe %q read %d cached tokens of another prompt", probe, c)
		}
		h.cachedOf(secret)
	}
	if c := h.cachedOf(secret + " More."); c == 0 {
		t.Fatal("a prompt that extends the previous one reused nothing")
	}
	// With a cache key, any shared prefix of that key's prompts is reused,
	// and none of another key's.
	h.cachedOf(secret, "alice")
	if c := h.cachedOf("The launch code is 7", "bob"); c != 0 {
		t.Fatalf("bob read %d of alice's cached tokens", c)
	}
	h.cachedOf(secret, "alice")
	if c := h.cachedOf("The launch code is 9", "alice"); c == 0 {
		t.Fatal("alice's own prefix was not reused")
	}
}

// TestRejectBeforeQueue: a request whose prompt cannot fit the context is
// refused while another request holds the decode slot (it is read, sized
// and tokenized outside the slot), and the body limit follows the context.
// The slot holder waits at a gate until the test ends, so a request that
// waited for the slot would never be answered (the hang guard fails it).
func TestRejectBeforeQueue(t *testing.T) {
	h := start(t, nil)
	gt := gate(t, h, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := h.post(ctx, "/v1/completions", `{"prompt":"a long one","max_tokens":200,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitFor(t, gt.parked, "the slot holder's generation")
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"prompt":"` + strings.Repeat("word ", 300) + `"}`, 400},   // over 256 tokens
		{`{"prompt":"` + strings.Repeat("word ", 200e3) + `"}`, 413}, // 1 MB: over any body a 256-token context needs
		{`{"messages":[{"role":"user","content":"` + strings.Repeat("word ", 300) + `"}]}`, 400},
		{`{"prompt":"hi","max_tokens":9223372036854775808}`, 400}, // past int64 (max_tokens up to it is clamped to the context: TestLimits)
	} {
		path := "/v1/completions"
		if strings.Contains(c.body, "messages") {
			path = "/v1/chat/completions"
		}
		type answer struct {
			code int
			body []byte
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			resp, err := http.Post(h.url+path, jsonCT, strings.NewReader(c.body))
			if err != nil {
				got <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			got <- answer{resp.StatusCode, b, err}
		}()
		select {
		case a := <-got:
			if a.err != nil {
				t.Fatalf("%.40s…: %v", c.body, a.err)
			}
			if a.code != c.want {
				t.Errorf("%.40s…: status %d, want %d: %.200s", c.body, a.code, c.want, a.body)
			}
		case <-time.After(hangGuard):
			gt.open()
			t.Fatalf("%.40s…: no answer in %v while the slot was held: it waited for the slot", c.body, hangGuard)
		}
	}
}

// TestHostileTemplateFailsOneRequest: with a chat template that reacts to
// a message by building a huge value, recursing or repeating a string a
// negative number of times, that request is a 400 naming the template and
// the limit (or renders as Python would), and the server keeps answering
// (issue 35: one chat message could kill pipe serve for every client).
func TestHostileTemplateFailsOneRequest(t *testing.T) {
	const tmpl = `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}` +
		`{% for m in messages %}{% if m.content == 'boom' %}{{ range(10**12)|length }}` +
		`{% elif m.content == 'deep' %}{{ f(0) }}{% elif m.content == 'neg' %}[{{ 'x' * -1 }}]` +
		`{% elif m.content == 'big' %}{{ 'x' * 1000000000 }}{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n`
	h := start(t, func(o *Options) {
		if err := o.Model.Tokenizer().UseJinja(tmpl, "evil.jinja"); err != nil {
			t.Fatal(err)
		}
	})
	chat := func(content string) (int, string) {
		resp, err := h.post(context.Background(), "/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":"`+content+`"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for content, limit := range map[string]string{"boom": "items limit", "deep": "call depth limit", "big": "value size limit"} {
		code, body := chat(content)
		if code != http.StatusBadRequest || !strings.Contains(body, "evil.jinja") || !strings.Contains(body, limit) {
			t.Errorf("%s: %d %s, want a 400 naming evil.jinja and the %s", content, code, body, limit)
		}
	}
	for _, content := range []string{"neg", "hi"} {
		if code, body := chat(content); code != http.StatusOK {
			t.Errorf("%s: %d %s", content, code, body)
		}
	}
}
