package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The SDK check (scripts/sdk-check.sh runs scripts/sdk-check/check.mjs, the
// official OpenAI and Anthropic Node SDKs, against pipe serve; CI runs it)
// must fail when a server answers a forced tool call without one. This test
// points the check at such a server: well-formed answers of both APIs, plain
// and streamed, whose model "declined" the call.

// sdkCheckDir finds node and the check's installed packages; without them
// the test skips, except under CI=true, where .ci/run installs them.
func sdkCheckDir(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("../scripts/sdk-check")
	if err != nil {
		t.Fatal(err)
	}
	node, _ = exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "openai"))
	if node == "" || modErr != nil {
		msg := fmt.Sprintf("the SDK check needs node (found %q) and `npm ci` in scripts/sdk-check (%v)", node, modErr)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, dir
}

// declining answers every OpenAI chat completion and Anthropic message with
// text and no tool call, in the stream's shape when asked to stream.
func declining(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	anth := strings.HasSuffix(r.URL.Path, "/messages")
	switch {
	case anth && req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":0}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"no"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`,
			`{"type":"message_stop"}`,
		} {
			var typ struct{ Type string }
			_ = json.Unmarshal([]byte(ev), &typ)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, ev)
		}
	case anth:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"no"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}`)
	case req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"no"},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"no"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	}
}

func TestSDKCheckFailsOnAServerThatDeclinesTheCall(t *testing.T) {
	node, dir := sdkCheckDir(t)
	srv := httptest.NewServer(http.HandlerFunc(declining))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "check.mjs"), srv.URL)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the check hung: %s", out)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("the check's exit: %v, want status 1; output:\n%s", err, out)
	}
	for _, want := range []string{
		"FAIL openai chat.completions tools: openai chat: finish_reason stop, want tool_calls",
		"FAIL openai chat.completions tools, streamed: openai stream: finish_reason stop, want tool_calls",
		"FAIL anthropic messages tools: anthropic: stop_reason end_turn, want tool_use",
		"FAIL anthropic messages tools, streamed: anthropic stream: stop_reason end_turn, want tool_use",
		"sdk-check: 0 passed, 4 failed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the check's output lacks %q:\n%s", want, out)
		}
	}
}
