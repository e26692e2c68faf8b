package serve

import (
	"fmt"
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
