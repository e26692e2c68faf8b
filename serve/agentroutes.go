package serve

import (
	"fmt"
	"net"
	"net/http"

	"github.com/pipe-engine/pipe/serve/hosttools"
)

// newTools is the Options.Tools set (nil without tools).
func newTools(o *Options) (*hosttools.Set, error) {
	if len(o.Tools) == 0 {
		return nil, nil
	}
	set, err := hosttools.New(o.Tools)
	if err != nil {
		return nil, fmt.Errorf("serve: Tools: %w", err)
	}
	return set, nil
}

// agentRoutes adds llama-server's opt-in agent routes: /tools with
// Options.Tools (toolsapi.go), /cors-proxy with Options.MCPProxy
// (corsproxy.go); without them both are llama-server's 403 "this feature
// is disabled". Both want the API key, as every route but the public ones.
func (s *Server) agentRoutes(mux *http.ServeMux) {
	route, off := s.rq.route, s.rq.featureDisabled
	if s.tools != nil {
		t := &toolsAPI{parts: s.parts, set: s.tools}
		mux.Handle("/tools", route("", true, t.serve))
	} else {
		mux.Handle("/tools", route("", true, off))
	}
	if s.o.MCPProxy {
		mux.Handle("/cors-proxy", route("", true, newCORSProxy(s.parts).serve))
	} else {
		mux.Handle("/cors-proxy", route("", true, off))
	}
}

// warnAgent logs the agent features that are on, as llama-server warns
// ("do not expose the server to untrusted environments"), once more loudly
// when the server listens beyond loopback.
func (s *Server) warnAgent(addr net.Addr) {
	var on []string
	if s.tools != nil {
		on = append(on, "server tools (--tools: read, write and run commands on this host)")
	}
	if s.o.MCPProxy {
		on = append(on, "MCP CORS proxy (--ui-mcp-proxy: fetches any URL for its callers)")
	}
	if len(on) == 0 {
		return
	}
	msg := "experimental features are on: do not expose the server to untrusted environments"
	if !loopback(addr) {
		msg = "experimental features are on and the server listens beyond loopback: anyone who can reach it and has the key can use them"
	}
	s.o.Log.Warn().Str("event", "agent_features").Strs("features", on).Str("addr", addr.String()).Msg(msg)
}
