package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestServeAgentFlags: --tools takes llama-server's names (comma-separated,
// "all"), --ui-mcp-proxy and its llama.cpp spellings (--webui-mcp-proxy,
// --no-webui-mcp-proxy) switch the proxy, --media-path wants an existing
// directory; an unknown tool or a missing directory is an error naming the
// flag before the model is opened.
func TestServeAgentFlags(t *testing.T) {
	var cli CLI
	k, err := parser(&cli, io.Discard, io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		tools []string
		proxy bool
	}{
		{nil, nil, false},
		{[]string{"--tools", "read_file,get_info"}, []string{"get_info", "read_file"}, false},
		{[]string{"--tools", "all", "--webui-mcp-proxy"}, []string{"all"}, true},
		{[]string{"--ui-mcp-proxy", "--no-webui-mcp-proxy", "--media-path", dir}, nil, false},
	} {
		args, err := translateArgs(append([]string{"serve", "-m", chatModel}, c.args...))
		if err == nil {
			_, err = k.Parse(args)
		}
		if err != nil || cli.Serve.validate() != nil || !slices.Equal(cleanList(cli.Serve.Tools), c.tools) || cli.Serve.MCPProxy != c.proxy {
			t.Errorf("%q: %v, tools %q, proxy %v", c.args, err, cli.Serve.Tools, cli.Serve.MCPProxy)
		}
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--tools", "read_file,web_search"}, "--tools"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--media-path", dir + "/nope"}, "--media-path"},
		{[]string{"serve", "-m", tinyModel, "--port", "0", "--tools-runtime", "docker:alpine"}, "--tools-runtime"},
	} {
		code, stderr := runCode(t, io.Discard, c.args...)
		if code == 0 || !strings.Contains(stderr, c.flag) || strings.Contains(stderr, `"event":"load"`) {
			t.Errorf("pipe %s: exit %d, want an error naming %s before loading; stderr:\n%.600s", strings.Join(c.args, " "), code, c.flag, stderr)
		}
	}
}
