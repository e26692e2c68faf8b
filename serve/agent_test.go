package serve

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentRoutesOffByDefault: without --tools and --ui-mcp-proxy, /tools
// and /cors-proxy are llama-server's 403 "this feature is disabled" (for
// every method), not a tool run or a fetch.
func TestAgentRoutesOffByDefault(t *testing.T) {
	h := start(t, nil)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/tools", ""},
		{http.MethodPost, "/tools", `{"tool":"get_info"}`},
		{http.MethodGet, "/cors-proxy?url=http://127.0.0.1:1/", ""},
		{http.MethodPost, "/cors-proxy?url=http://127.0.0.1:1/", `{}`},
	} {
		got, _, b := h.send(c.method, c.path, "", c.body, "Content-Type", jsonCT)
		if got != http.StatusForbidden || !strings.Contains(b, "this feature is disabled") || !strings.Contains(b, "feature_disabled") {
			t.Errorf("%s %s: %d %s", c.method, c.path, got, b)
		}
	}
	if ev := h.logs.events(t, "agent_features"); len(ev) != 0 {
		t.Errorf("agent_features warning without the features: %v", ev)
	}
}

// TestCORSDefaultWithToolsIsLocalhost: with --tools and no --cors-origins
// the origins are "localhost" even with an API key (whose default is
// otherwise "*"), as llama-server's
// test_cors_origins_defaults_to_localhost_with_tools_enabled; an explicit
// --cors-origins still wins.
func TestCORSDefaultWithToolsIsLocalhost(t *testing.T) {
	h := start(t, func(o *Options) { o.APIKey = "k"; o.Tools = []string{"all"} })
	checkLocalhostPolicy(t, h, "Authorization", "Bearer k")
	h = start(t, func(o *Options) { o.Tools = []string{"get_info"}; o.CORSOrigins = []string{"*"} })
	if got, hdr := h.preflight("http://evil.com"); got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "http://evil.com" {
		t.Errorf("explicit --cors-origins '*' with tools: %d %v", got, hdr)
	}
}

// TestToolsBadNames: an unknown --tools name stops New with the list of
// the known ones.
func TestToolsBadNames(t *testing.T) {
	err := CheckTools([]string{"read_file", "web_search"})
	if err == nil || !strings.Contains(err.Error(), `"web_search"`) || !strings.Contains(err.Error(), "exec_shell_command") {
		t.Fatalf("CheckTools: %v", err)
	}
	if err := CheckTools([]string{"all"}); err != nil {
		t.Fatal(err)
	}
}

// toolsPost posts a /tools call with headers.
func (h *harness) toolsPost(body string, hdr ...string) (int, string) {
	h.t.Helper()
	got, _, b := h.send(http.MethodPost, "/tools", "", body, append([]string{"Content-Type", jsonCT}, hdr...)...)
	return got, b
}

// TestToolsRoute: the server warns that its tools are on; GET /tools lists the enabled tools as llama-server's
// to_json; POST runs one with x-tool-cwd as its directory; a tool's own
// failure is a 200 with "error"; an unknown or disabled tool and a stream
// of a tool that cannot stream are 404; a bad body or parameter and an
// x-tool-runtime (an isolate pipe does not have) are 400.
func TestToolsRoute(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(o *Options) { o.Tools = []string{"read_file", "exec_shell_command"} })
	got, _, b := h.send(http.MethodGet, "/tools", "", "")
	var list []struct {
		Tool        string          `json:"tool"`
		Type        string          `json:"type"`
		Permissions map[string]bool `json:"permissions"`
		Definition  struct {
			Function struct{ Name string } `json:"function"`
		} `json:"definition"`
	}
	if err := json.Unmarshal([]byte(b), &list); got != 200 || err != nil || len(list) != 2 ||
		list[0].Tool != "read_file" || list[0].Permissions["write"] || list[1].Tool != "exec_shell_command" ||
		!list[1].Permissions["write"] || list[0].Type != "server" || list[0].Definition.Function.Name != "read_file" {
		t.Fatalf("GET /tools: %d %s", got, b)
	}
	// the server warned, as llama-server does, before it answered
	if ev := h.logs.events(t, "agent_features"); len(ev) != 1 || ev[0]["level"] != "warn" || len(ev[0]["features"].([]any)) != 1 {
		t.Errorf("agent_features warning: %v", ev)
	}
	cwd := []string{"X-Tool-Cwd", dir}
	for _, c := range []struct {
		body   string
		hdr    []string
		status int
		want   string
	}{
		{`{"tool":"read_file","params":{"path":"a.txt","start_line":2,"append_loc":true}}`, cwd, 200, `"plain_text_response":"2→two\n3→three\n"`},
		{`{"tool":"read_file","params":{"path":"missing.txt"}}`, cwd, 200, `"error":"cannot stat file: missing.txt"`},
		{`{"tool":"exec_shell_command","params":{"command":"pwd"}}`, cwd, 200, dir + `\n\n[exit code: 0]`},
		{`{"tool":"get_info"}`, nil, 404, `unknown tool \"get_info\"`},
		{`{"tool":"read_file","stream":true,"params":{"path":"a.txt"}}`, cwd, 404, "does not support stream = true"},
		{`{"params":{}}`, nil, 400, "tool: the tool's name is required"},
		{`{"tool":"read_file","params":{"path":7}}`, nil, 400, "params.path: want a string"},
		{`{"tool":"read_file","params":{}}`, nil, 400, "params.path is required"},
		{`{"tool":"read_file","params":{"path":"a.txt"}}`, []string{"X-Tool-Runtime", "docker-container:abc"}, 400, "runs --tools on the host only"},
	} {
		got, b := h.toolsPost(c.body, c.hdr...)
		if got != c.status || !strings.Contains(b, c.want) {
			t.Errorf("POST /tools %s: %d %s, want %d with %q", c.body, got, b, c.status, c.want)
		}
	}
}

// TestToolsStream: exec_shell_command with "stream": true answers events
// {"chunk"} with the output, then the exit code, then {"done": true}.
func TestToolsStream(t *testing.T) {
	h := start(t, func(o *Options) { o.Tools = []string{"all"} })
	req, _ := http.NewRequest(http.MethodPost, h.url+"/tools", strings.NewReader(`{"tool":"exec_shell_command","stream":true,"params":{"command":"echo hi; exit 3"}}`))
	req.Header.Set("Content-Type", jsonCT)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var text strings.Builder
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Chunk string `json:"chunk"`
			Done  bool   `json:"done"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Error != "" {
			t.Fatalf("event %q: %v", data, err)
		}
		text.WriteString(ev.Chunk)
		done = done || ev.Done
	}
	if !done || text.String() != "hi\n\n[exit code: 3]" {
		t.Errorf("stream: %q, done %v", text.String(), done)
	}
}

// TestCORSProxy: /cors-proxy forwards a GET to the target with only the
// x-llama-server-proxy-header-* headers (llama-server's
// test_cors_proxy_only_forwards_explicit_proxy_headers: not Authorization,
// Proxy-Authorization, X-Api-Key or Cookie), a POST with its body, and
// answers the target's status and body without its Set-Cookie and CORS
// headers; a URL that is not http(s) with a host is 400, an unreachable
// target 502.
func TestCORSProxy(t *testing.T) {
	type seen struct {
		h    http.Header
		body string
	}
	got := make(chan seen, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := new(strings.Builder)
		_, _ = bufio.NewReader(r.Body).WriteTo(b)
		got <- seen{r.Header.Clone(), b.String()}
		w.Header().Set("Set-Cookie", "s=1")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Target", "yes")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("ok"))
	}))
	defer target.Close()
	h := start(t, func(o *Options) { o.MCPProxy = true; o.APIKey = "k" })
	status, hdr, b := h.send(http.MethodGet, "/cors-proxy?url="+target.URL+"/capture", "", "",
		"Authorization", "Bearer k", "Proxy-Authorization", "Basic secret", "X-Api-Key", "k", "Cookie", "session=secret",
		"x-llama-server-proxy-header-accept", "application/json", "x-llama-server-proxy-header-authorization", "Bearer explicit")
	s := <-got
	if status != http.StatusTeapot || b != "ok" || hdr.Get("X-Target") != "yes" || hdr.Get("Set-Cookie") != "" || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("answer: %d %q %v", status, b, hdr)
	}
	if s.h.Get("Accept") != "application/json" || s.h.Get("Authorization") != "Bearer explicit" ||
		s.h.Get("Proxy-Authorization") != "" || s.h.Get("X-Api-Key") != "" || s.h.Get("Cookie") != "" {
		t.Errorf("forwarded headers: %v", s.h)
	}
	if status, _, b := h.send(http.MethodPost, "/cors-proxy?url="+target.URL, "", `{"jsonrpc":"2.0"}`, "Authorization", "Bearer k", "Content-Type", jsonCT); status != http.StatusTeapot || b != "ok" {
		t.Errorf("POST: %d %q", status, b)
	} else if s := <-got; s.body != `{"jsonrpc":"2.0"}` {
		t.Errorf("POST body forwarded: %q", s.body)
	}
	for url, want := range map[string]int{"file:///etc/passwd": 400, "http://": 400, "http://u:p@127.0.0.1/": 400, "": 400, "http://127.0.0.1:1/": 502} {
		if status, _, b := h.send(http.MethodGet, "/cors-proxy?url="+url, "", "", "Authorization", "Bearer k"); status != want {
			t.Errorf("url %q: %d %s, want %d", url, status, b, want)
		}
	}
	if status, _, _ := h.send(http.MethodGet, "/cors-proxy?url="+target.URL, "", ""); status != http.StatusUnauthorized {
		t.Errorf("without the key: %d", status)
	}
}
