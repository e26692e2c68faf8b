package serve

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CORS as llama-server (3f545becc) answers it: --cors-origins is "*" (any
// origin; with credentials, llama-server's default, the Origin is echoed),
// "localhost" (an Origin whose host is localhost, 127.0.0.1 or ::1 is
// echoed, another gets no Access-Control-Allow-Origin) or a list of
// origins (one of them is echoed). Every OPTIONS request is a preflight
// answered 200 with an empty body before authentication, which a preflight
// never carries: Access-Control-Allow-Credentials, -Methods and -Headers
// always, -Allow-Origin only for an allowed origin, so the browser sends the
// real request only from those.
//
// pipe's one difference: a non-preflight request whose Origin is neither the
// server's own nor allowed is refused (403, guard.go), where llama-server
// runs it and only leaves the header out; a browser would not show such a
// page the answer anyway, and a request it need not preflight (a GET) then
// does nothing either.

// The defaults of llama-server's --cors-methods and --cors-headers.
const (
	DefaultCORSMethods = "GET, POST, DELETE, OPTIONS"
	DefaultCORSHeaders = "*"
	corsMaxAge         = "600"
)

// corsPolicy is Options' CORS settings, resolved.
type corsPolicy struct {
	any, localhost   bool     // "*", "localhost"
	origins          []string // the listed origins, without a trailing "/"
	methods, headers string
	credentials      bool
}

// newCORS resolves o's CORS options. Without CORSOrigins the policy is
// llama-server's default "*" when an API key guards the server, and
// "localhost" without one or with Options.Tools: llama-server warns that
// "*" without a key lets any web page use the server, and uses
// "localhost" itself whenever its server tools are on.
func newCORS(o Options) corsPolicy {
	p := corsPolicy{methods: o.CORSMethods, headers: o.CORSHeaders, credentials: !o.CORSNoCredentials}
	if p.methods == "" {
		p.methods = DefaultCORSMethods
	}
	if p.headers == "" {
		p.headers = DefaultCORSHeaders
	}
	origins := o.CORSOrigins
	if len(origins) == 0 {
		origins = []string{"localhost"}
		if o.APIKey != "" && len(o.Tools) == 0 {
			origins = []string{"*"}
		}
	}
	for _, a := range origins {
		switch a = strings.TrimSpace(a); a {
		case "*":
			p.any = true
		case "localhost":
			p.localhost = true
		case "":
		default:
			p.origins = append(p.origins, strings.TrimSuffix(a, "/"))
		}
	}
	return p
}

// allowed reports whether a page of origin may read the server's answers.
func (p *corsPolicy) allowed(origin string) bool {
	switch {
	case p.any:
		return true
	case p.localhost && originIsLocalhost(origin):
		return true
	}
	return slices.ContainsFunc(p.origins, func(a string) bool { return strings.EqualFold(a, origin) })
}

// allowOrigin is the Access-Control-Allow-Origin of an allowed origin:
// "*" for any origin without credentials, else the origin itself.
func (p *corsPolicy) allowOrigin(origin string) string {
	if p.any && !p.credentials {
		return "*"
	}
	return origin
}

// preflight answers an OPTIONS request: 200, no body, the Allow headers, and
// Allow-Origin when allowed says so (ownOrigin: the page is the server's).
func (p *corsPolicy) preflight(w http.ResponseWriter, origin string, ok bool) {
	h := w.Header()
	if origin != "" && ok {
		h.Set("Access-Control-Allow-Origin", p.allowOrigin(origin))
		h.Add("Vary", "Origin")
	}
	h.Set("Access-Control-Allow-Credentials", map[bool]string{true: "true", false: "false"}[p.credentials])
	h.Set("Access-Control-Allow-Methods", p.methods)
	h.Set("Access-Control-Allow-Headers", p.headers)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	h.Set("Content-Type", "text/html")
	h.Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// originIsLocalhost reports whether an origin's host is localhost,
// 127.0.0.1 or ::1 (llama-server's origin_is_localhost).
func originIsLocalhost(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		return ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback)
	}
	return strings.EqualFold(host, "localhost")
}
