// Package hosttools is llama-server's built-in tool set (llama.cpp
// 3f545becc, tools/server/server-tools.cpp), which `pipe serve --tools`
// answers at GET and POST /tools: read_file, file_glob_search, grep_search,
// exec_shell_command, write_file, edit_file and get_info, with llama-server's
// names, JSON schemas, results and limits. They act on the server's host
// with the server's rights — they read and write any file it can and run
// shell commands — which is why they exist only when the operator names
// them (New) and why a server with them must never be reachable by others.
//
// Every tool is bounded: a file read stops at its size limit (16 KiB of
// text, 32 MiB as base64, 16 MiB per file searched), a listing at 15 s and
// 8 MiB of git output, a search at 100 results, a command at its timeout
// (default 10 s, at most 60 s) and 16 KiB of output; a command runs in its
// own process group, which is killed (SIGKILL) when it times out, when the
// caller's context ends (the client went) and after it exits, so no child
// it started outlives the call. Paths are the caller's: relative ones
// resolve against the call's working directory (llama-server's x-tool-cwd)
// or the server's, "~" against $HOME; as in llama-server they are not
// confined (exec_shell_command could reach anything anyway).
//
// Differences from llama-server: grep_search's regular expressions are Go's
// (RE2: no backreferences or look-around; such a pattern is "invalid
// regex"), not ECMAScript; a parameter of the wrong type is an error naming
// it (ErrParam) where llama-server falls back to the default; read_file
// reads line by line up to what it returns instead of the whole file, and
// grep_search skips files over 16 MiB (counted in its output); there is no
// --tools-runtime (docker, podman, ssh isolates) and no MCP tool.
package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors a Call answers with; the HTTP layer maps them to statuses.
var (
	// ErrUnknownTool: no enabled tool of that name (llama-server: 404).
	ErrUnknownTool = errors.New("unknown tool")
	// ErrNoStream: the tool cannot stream its output (llama-server: 404).
	ErrNoStream = errors.New("tool does not support stream = true")
	// ErrParam: a missing or mistyped parameter (400).
	ErrParam = errors.New("bad tool parameter")
)

// Tool is one built-in tool.
type Tool struct {
	Name    string
	Display string // llama-server's display_name
	Write   bool   // permissions.write: it changes the host
	Stream  bool   // its output can stream (exec_shell_command)
	desc    string
	props   []prop
	req     []string
	run     func(ctx context.Context, c *call) (map[string]any, error)
}

// prop is a parameter of a tool's schema.
type prop struct{ name, typ, desc string }

// Definition is the tool's OpenAI function definition, as llama-server's
// get_definition.
func (t *Tool) Definition() map[string]any {
	props := map[string]any{}
	for _, p := range t.props {
		props[p.name] = propSchema(p)
	}
	params := map[string]any{"type": "object", "properties": props}
	if t.req != nil {
		params["required"] = t.req
	}
	return map[string]any{"type": "function", "function": map[string]any{
		"name": t.Name, "description": t.desc, "parameters": params}}
}

// propSchema is a parameter's schema; edit_file's edits is an array of
// objects.
func propSchema(p prop) map[string]any {
	s := map[string]any{"type": p.typ, "description": p.desc}
	if p.typ == "array" {
		s["items"] = map[string]any{"type": "object",
			"properties": map[string]any{
				"old_text": map[string]any{"type": "string", "description": "Exact text to find; must be unique in the file and must not overlap with other edits"},
				"new_text": map[string]any{"type": "string", "description": "Text to replace old_text with"},
			},
			"required": []string{"old_text", "new_text"}}
	}
	return s
}

// Entry is the tool as GET /tools lists it (llama-server's to_json).
func (t *Tool) Entry() map[string]any {
	return map[string]any{"display_name": t.Display, "tool": t.Name, "type": "server",
		"permissions": map[string]any{"write": t.Write}, "uses_cwd": true, "definition": t.Definition()}
}

// all is every tool, in llama-server's order (build_tools).
func all() []*Tool {
	return []*Tool{readFileTool(), globSearchTool(), grepSearchTool(), shellTool(), writeFileTool(), editFileTool(), getInfoTool()}
}

// Names are the tools' names, in llama-server's order.
func Names() []string {
	var out []string
	for _, t := range all() {
		out = append(out, t.Name)
	}
	return out
}

// Set is the enabled tools.
type Set struct{ tools []*Tool }

// New enables the named tools ("all": every one); an unknown name is an
// error listing the known ones, as llama-server's.
func New(names []string) (*Set, error) {
	known := Names()
	for _, n := range names {
		if n != "all" && !slices.Contains(known, n) {
			return nil, fmt.Errorf("%w %q. available tools: %s", ErrUnknownTool, n, strings.Join(known, ", "))
		}
	}
	s := &Set{}
	for _, t := range all() {
		if slices.Contains(names, "all") || slices.Contains(names, t.Name) {
			s.tools = append(s.tools, t)
		}
	}
	return s, nil
}

// Tools are the enabled tools.
func (s *Set) Tools() []*Tool { return s.tools }

// Call is one invocation: the tool, its parameters, and what the HTTP layer
// adds from headers (x-tool-cwd, x-resp-type).
type Call struct {
	Tool   string
	Params json.RawMessage // a JSON object, or empty
	Cwd    string          // relative paths resolve here ("": the server's)
	Base64 bool            // read_file answers the file as base64 (x-resp-type: base64)
	// Emit, if set, streams the output (a tool with Stream); it returns
	// false when the receiver is gone, which stops the tool.
	Emit func(chunk string) bool
}

// Find is the enabled tool named name; stream asks for one that streams.
func (s *Set) Find(name string, stream bool) (*Tool, error) {
	for _, t := range s.tools {
		if t.Name == name {
			if stream && !t.Stream {
				return nil, fmt.Errorf("%w: tool %q", ErrNoStream, name)
			}
			return t, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
}

// Run runs c. The result is the tool's JSON answer; a failure of the tool
// itself (a missing file, a text not found) is an "error" field in it, as
// llama-server answers; the error is for a call that cannot run (unknown
// tool, bad parameters). A streamed call's result is nil: its output went
// to Emit.
func (s *Set) Run(ctx context.Context, c Call) (map[string]any, error) {
	t, err := s.Find(c.Tool, c.Emit != nil)
	if err != nil {
		return nil, err
	}
	p := params{}
	if len(c.Params) > 0 && string(c.Params) != "null" {
		if err := json.Unmarshal(c.Params, &p); err != nil || p == nil {
			return nil, fmt.Errorf("%w: params: want a JSON object", ErrParam)
		}
	}
	for _, k := range []string{"cwd", "runtime", "resp_type"} { // headers only, as llama-server
		delete(p, k)
	}
	return t.run(ctx, &call{p: p, cwd: c.Cwd, base64: c.Base64, emit: c.Emit})
}

// call is a Run's input as a tool reads it.
type call struct {
	p      params
	cwd    string
	base64 bool
	emit   func(string) bool
}

// fail is a tool's own failure: llama-server's {"error": msg}.
func fail(format string, a ...any) map[string]any {
	return map[string]any{"error": fmt.Sprintf(format, a...)}
}
