package serve

import (
	"strings"
	"testing"
)

// FuzzRequestBodies feeds arbitrary bodies to the parsers of POST
// /completion (the native API), /v1/completions and /v1/chat/completions:
// each must answer a job or an error, never panic; a body they accept has
// a prompt. Seeds: well-formed requests, issue 35's deep nesting and
// type-confused fields; they run as a normal test.
func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","n_predict":4}`, `{"prompt":[1,2,3],"return_tokens":true,"cache_prompt":false}`,
		`{"prompt":["hi"],"stream":true,"stop":["\n"]}`, `{"prompt":[[1,2]],"temperature":0.5,"top_k":4}`,
		`{"prompt":[[[1]]]}`, `{"prompt":` + strings.Repeat("[", 300) + "1" + strings.Repeat("]", 300) + `}`,
		`{"prompt":[1,"a",[2]]}`, `{"prompt":[-1,4294967296]}`, `{"prompt":""}`, `{"prompt":null}`, `[]`, `null`, `{`,
		`{"prompt":"x","n_predict":-5,"temperature":"hot","seed":1e400}`, `{"prompt":"x","logit_bias":[[1,-1e9]]}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"messages":[{"role":"tool","content":[{"type":"text","text":"x"}]}]}`, `{"messages":[]}`,
		`{"model":"tiny","prompt":["a","b"],"max_tokens":1e9}`, `{"prompt":"\u0000\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if j, _, err := parseNative(body, greedy); err == nil && j.prompt == "" && j.given == nil && len(j.morePrompts) == 0 {
			t.Fatalf("/completion accepted %q without a prompt", body)
		}
		_, _ = parseCompletion(body, greedy)
		if j, err := parseChat(body, greedy); err == nil && len(j.messages) == 0 {
			t.Fatalf("/v1/chat/completions accepted %q without messages", body)
		}
	})
}
