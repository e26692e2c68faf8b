package serve

import (
	"strings"
	"testing"
)

// TestServerVerbose: a server started verbose (llama-server's --verbose)
// puts __verbose, with the prompt as rendered, in every chat and text
// completion that is not streamed, without the request asking; a streamed
// one is still answered (not the 400 a request's own verbose gets).
func TestServerVerbose(t *testing.T) {
	h := start(t, func(o *Options) { o.Verbose = true })
	chat := h.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1}`, 200)
	if v, _ := chat["__verbose"].(map[string]any); v == nil || !strings.Contains(v["prompt"].(string), "Hi") {
		t.Errorf("chat: __verbose %v", chat["__verbose"])
	}
	cmpl := h.do("/v1/completions", `{"prompt":"Hi","max_tokens":1}`, 200)
	if v, _ := cmpl["__verbose"].(map[string]any); v == nil {
		t.Errorf("completion: no __verbose: %v", cmpl)
	}
	if evs := h.sseData("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1,"stream":true}`); len(evs) == 0 {
		t.Error("stream: no events")
	}
	plain := start(t, nil)
	if r := plain.do("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1}`, 200); r["__verbose"] != nil {
		t.Errorf("a server not verbose: __verbose %v", r["__verbose"])
	}
}
