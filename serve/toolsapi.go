package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/pipe-engine/pipe/serve/hosttools"
)

// GET and POST /tools: llama-server's built-in tools (serve/hosttools),
// answered only when the operator enabled some (Options.Tools, --tools);
// else both are llama-server's 403 "this feature is disabled". GET lists
// the enabled tools; POST {"tool", "params", "stream"} runs one with the
// x-tool-cwd header as its working directory and x-resp-type: base64 for
// read_file, answering the tool's JSON (a failure of the tool is an "error"
// field in a 200, as llama-server's), or with "stream": true (a tool that
// streams: exec_shell_command) events `data: {"chunk": …}` and a last
// `data: {"done": true}`. The call ends with the request: a client that
// goes kills the command's process group. x-tool-runtime (llama-server's
// docker/podman/ssh isolates) is refused: pipe runs the tools on the host
// only, and never where an isolate was asked for.

// CheckTools checks --tools' names ("all" or llama-server's tool names).
func CheckTools(names []string) error {
	_, err := hosttools.New(names)
	return err
}

// toolsAPI serves /tools.
type toolsAPI struct {
	parts
	set *hosttools.Set
}

// featureDisabled is llama-server's answer on a route of a feature it was
// started without (its res_403).
func (s *requests) featureDisabled(x *exchange) {
	s.fail(x, http.StatusForbidden, "feature_disabled", errors.New("this feature is disabled"))
}

// serve answers GET (the list) and POST (a call).
func (t *toolsAPI) serve(x *exchange) {
	switch x.r.Method {
	case http.MethodGet:
		t.list(x)
	case http.MethodPost:
		t.call(x)
	default:
		x.w.Header().Set("Allow", "GET, POST")
		t.rq.fail(x, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Errorf("%s /tools: use GET or POST", x.r.Method))
	}
}

func (t *toolsAPI) list(x *exchange) {
	out := []map[string]any{}
	for _, tool := range t.set.Tools() {
		out = append(out, tool.Entry())
	}
	_ = writeJSON(x.w, t.o.WriteTimeout, http.StatusOK, out)
}

// toolsRequest is POST /tools' body.
type toolsRequest struct {
	Tool   *string         `json:"tool"`
	Params json.RawMessage `json:"params"`
	Stream bool            `json:"stream"`
}

func (t *toolsAPI) call(x *exchange) {
	body, ok := t.rq.readBody(x)
	if !ok {
		return
	}
	var r toolsRequest
	if err := json.Unmarshal(body, &r); err != nil {
		t.rq.fail(x, http.StatusBadRequest, "invalid_request_error", jsonError(err))
		return
	}
	if r.Tool == nil {
		t.rq.fail(x, http.StatusBadRequest, "invalid_request_error", fieldErr("tool", "tool: the tool's name is required"))
		return
	}
	if rt := x.r.Header.Get("X-Tool-Runtime"); rt != "" {
		t.rq.fail(x, http.StatusBadRequest, "invalid_request_error",
			fmt.Errorf("x-tool-runtime %q: pipe serve runs --tools on the host only (no docker, podman or ssh isolate)", rt))
		return
	}
	c := hosttools.Call{Tool: *r.Tool, Params: r.Params, Cwd: x.r.Header.Get("X-Tool-Cwd"),
		Base64: strings.EqualFold(x.r.Header.Get("X-Resp-Type"), "base64")}
	if r.Stream {
		t.stream(x, c)
		return
	}
	res, err := t.set.Run(x.r.Context(), c)
	if err != nil {
		t.toolFailed(x, err)
		return
	}
	_ = writeJSON(x.w, t.o.WriteTimeout, http.StatusOK, res)
}

// toolFailed answers a call that could not run: an unknown tool or one
// that cannot stream 404 (llama-server's), a bad parameter 400.
func (t *toolsAPI) toolFailed(x *exchange, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, hosttools.ErrUnknownTool) || errors.Is(err, hosttools.ErrNoStream) {
		status = http.StatusNotFound
	}
	t.rq.fail(x, status, "invalid_request_error", err)
}

// stream runs a streaming call, sending each chunk as an event.
func (t *toolsAPI) stream(x *exchange, c hosttools.Call) {
	if _, err := t.set.Find(c.Tool, true); err != nil {
		t.toolFailed(x, err)
		return
	}
	rc := http.NewResponseController(x.w)
	x.w.Header().Set("Content-Type", "text/event-stream")
	x.w.Header().Set("Cache-Control", "no-cache")
	x.w.WriteHeader(http.StatusOK)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if writeBy(x.w, t.o.WriteTimeout) != nil {
			return false
		}
		if _, err := fmt.Fprintf(x.w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	c.Emit = func(chunk string) bool { return send(map[string]string{"chunk": chunk}) }
	done := map[string]any{"done": true}
	if _, err := t.set.Run(x.r.Context(), c); err != nil {
		done["error"] = err.Error()
		x.err = err
	}
	send(done)
}
