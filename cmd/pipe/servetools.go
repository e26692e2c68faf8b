package main

import (
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/serve"
)

// AgentFlags are llama-server's opt-in agent features of pipe serve, off by
// default as there: --tools (built-in tools that read, write and run
// commands on the server's host, serve/hosttools), --ui-mcp-proxy (a
// /cors-proxy that forwards a web page's requests to an MCP server) and
// --media-path (the directory a chat's file:// media URLs name files in).
type AgentFlags struct {
	Tools     []string `name:"tools" help:"Built-in tools at GET/POST /tools, as llama-server's (experimental; they read, write and run shell commands on this host with the server's rights: never on a server others can reach): 'all' or some of read_file, file_glob_search, grep_search, exec_shell_command, write_file, edit_file, get_info. With them the CORS origins default to 'localhost'." placeholder:"TOOL,…" group:"Server"`
	MCPProxy  bool     `name:"ui-mcp-proxy" aliases:"webui-mcp-proxy" help:"Answer GET/POST /cors-proxy?url=…: forward the request to an http(s) URL with only the x-llama-server-proxy-header-* headers, as llama-server's (experimental; it lets a web page that may call the server reach any address the server can: not on a server others can reach)." negatable:"" group:"Server"`
	MediaPath string   `name:"media-path" help:"Directory a chat's file:// image/audio URLs name files in (relative paths, confined to it), as llama-server's; pipe runs text models, so such a part is still refused, after the file is checked." type:"existingdir" group:"Server"`
}

// check checks --tools' names before the model is opened.
func (f *AgentFlags) check() error {
	if err := serve.CheckTools(cleanList(f.Tools)); err != nil {
		return fmt.Errorf("%w: --tools: %w", errFlag, err)
	}
	return nil
}

// options are the serve.Options fields of the flags.
func (f *AgentFlags) options(o *serve.Options) error {
	if err := f.check(); err != nil {
		return err
	}
	o.Tools, o.MCPProxy, o.MediaPath = cleanList(f.Tools), f.MCPProxy, strings.TrimSpace(f.MediaPath)
	return nil
}
