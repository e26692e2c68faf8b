package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
)

// Who may talk to the server, beyond the API key:
//
//   - Host: a web page can point a DNS name it controls at 127.0.0.1 (DNS
//     rebinding) and then call a loopback server as its own origin, so a
//     request must name the server by an IP literal, "localhost", the
//     listening host or one of Options.AllowedHosts; any other Host is 403.
//   - Origin: a browser names the page that makes a request; only the
//     server's own origin and the CORS policy's (cors.go, llama-server's
//     --cors-origins) are answered (others 403), and every OPTIONS request
//     is a CORS preflight answered before authentication, which a
//     preflight never carries (Access-Control-Allow-Origin only for an
//     allowed origin).
//   - Bodies are JSON (Content-Type: application/json; else 415), which a
//     cross-site form or a "simple" fetch cannot send without a preflight;
//     a POST with no body may omit the type.

// guard holds those rules' settings: the names allowed beside the server's
// own, the CORS policy and the API key's hash.
type guard struct {
	hosts   []string // Options.AllowedHosts
	cors    corsPolicy
	keyed   bool // an API key is required (Options.APIKey)
	keyHash [sha256.Size]byte
}

// newGuard is the guard of o.
func newGuard(o Options) guard {
	g := guard{hosts: o.AllowedHosts, cors: newCORS(o), keyed: o.APIKey != ""}
	if g.keyed {
		g.keyHash = sha256.Sum256([]byte(o.APIKey))
	}
	return g
}

// hostAllowed reports whether a Host header names this server in a way DNS
// rebinding cannot produce.
func (g *guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" {
		return true
	}
	for _, a := range g.hosts {
		if a == "*" || strings.EqualFold(strings.TrimSuffix(a, "."), host) {
			return true
		}
	}
	return false
}

// originAllowed reports whether a browser page of origin may call the API:
// the server's own origin (as the request's Host names it) or one the CORS
// policy allows.
func (g *guard) originAllowed(origin, host string) bool {
	if origin == "http://"+host || origin == "https://"+host {
		return true
	}
	return g.cors.allowed(origin)
}

// errForbidden: a request from a host or origin the server does not answer.
var errForbidden = errors.New("forbidden")

// admit applies the Host, Origin and preflight rules; it reports whether
// the request goes on (else it has been answered).
func (s *requests) admit(x *exchange) bool {
	r := x.r
	if !s.guard.hostAllowed(r.Host) {
		s.fail(x, http.StatusForbidden, "invalid_request_error",
			fmt.Errorf("%w: Host %q is not a name of this server (an IP address, localhost, --host or --allowed-hosts)", errForbidden, r.Host))
		return false
	}
	origin := r.Header.Get("Origin")
	ok := origin != "" && s.guard.originAllowed(origin, r.Host)
	if r.Method == http.MethodOptions {
		s.guard.cors.preflight(x.w, origin, ok)
		return false
	}
	if origin == "" {
		return true
	}
	if !ok {
		s.fail(x, http.StatusForbidden, "invalid_request_error",
			fmt.Errorf("%w: Origin %q may not call this server (--cors-origins)", errForbidden, origin))
		return false
	}
	h := x.w.Header()
	h.Set("Access-Control-Allow-Origin", s.guard.cors.allowOrigin(origin))
	if s.guard.cors.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Add("Vary", "Origin")
	return true
}

// jsonBody reports whether a POST's body is declared JSON, answering 415
// when it is not. A POST without a body and without a Content-Type has
// nothing to declare (llama.cpp's test_slot_erase posts
// /slots/{id}?action=erase so; a browser's cross-site form always sends a
// type, and the Origin rule answers no other site's page).
func (s *requests) jsonBody(x *exchange) bool {
	if x.r.Method != http.MethodPost {
		return true
	}
	ct := x.r.Header.Get("Content-Type")
	if ct == "" && x.r.ContentLength == 0 {
		return true
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return true
	}
	s.fail(x, http.StatusUnsupportedMediaType, "invalid_request_error",
		fmt.Errorf("Content-Type %q: the body must be JSON (Content-Type: application/json)", ct))
	return false
}

// bearer returns the token of an `Authorization: Bearer TOKEN` header (the
// scheme is case-insensitive, RFC 9110 §11.1) and whether there was one.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// authorized compares the bearer token (or, without one, an x-api-key
// header, Anthropic's) with the key in constant time (both hashed first, so
// neither length leaks).
func (g *guard) authorized(r *http.Request) bool {
	if !g.keyed {
		return true
	}
	tok, ok := bearer(r)
	if !ok { // Anthropic's header
		tok = strings.TrimSpace(r.Header.Get("X-Api-Key"))
		ok = tok != ""
	}
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], g.keyHash[:]) == 1 && ok
}
