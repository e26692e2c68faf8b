package serve

import (
	"net/http"
	"testing"
)

// preflight sends llama-server's test preflight (OPTIONS /completions with
// Origin, Access-Control-Request-Method and -Headers) and returns the status
// and headers.
func (h *harness) preflight(origin string) (int, http.Header) {
	h.t.Helper()
	got, hdr, _ := h.send(http.MethodOptions, "/completions", "", "", "Origin", origin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "Authorization")
	return got, hdr
}

// TestCORSDefaultWithKeyIsAny: with an API key and no --cors-origins, every
// origin's preflight is answered 200 before authentication with the origin
// echoed, credentials allowed, and llama-server's default methods and
// headers (its test_cors_options).
func TestCORSDefaultWithKeyIsAny(t *testing.T) {
	h := start(t, func(o *Options) { o.APIKey = "sekrit" })
	for _, origin := range []string{"localhost", "web.mydomain.fr", "origin", "http://evil.example"} {
		got, hdr := h.preflight(origin)
		if got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != origin ||
			hdr.Get("Access-Control-Allow-Credentials") != "true" ||
			hdr.Get("Access-Control-Allow-Methods") != "GET, POST, DELETE, OPTIONS" || hdr.Get("Access-Control-Allow-Headers") != "*" {
			t.Errorf("preflight from %q: %d %v", origin, got, hdr)
		}
	}
	// the key still guards the real request
	if got, _, b := h.send(http.MethodPost, "/completions", "", `{"prompt":"hi","n_predict":1}`, "Content-Type", jsonCT, "Origin", "http://evil.example"); got != http.StatusUnauthorized {
		t.Errorf("keyless request from any origin: %d %s", got, b)
	}
}

// localhostOrigins are llama-server's test_cors_origins_localhost_* cases.
var (
	localOrigins    = []string{"http://localhost", "http://localhost:8080", "http://127.0.0.1", "http://127.0.0.1:3000", "http://[::1]", "http://[::1]:3000"}
	nonLocalOrigins = []string{"http://web.mydomain.fr", "http://evil.com", "http://notlocalhost", "http://localhost.evil.com", "localhost", "null"}
)

// checkLocalhostPolicy: localhost origins are echoed, others answered 200
// without Access-Control-Allow-Origin, and their real requests refused.
func checkLocalhostPolicy(t *testing.T, h *harness, auth ...string) {
	t.Helper()
	for _, origin := range localOrigins {
		if got, hdr := h.preflight(origin); got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("preflight from %q: %d %v", origin, got, hdr)
		}
		if got, hdr, b := h.send(http.MethodGet, "/v1/models", "", "", append([]string{"Origin", origin}, auth...)...); got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("GET from %q: %d %v %s", origin, got, hdr, b)
		}
	}
	for _, origin := range nonLocalOrigins {
		if got, hdr := h.preflight(origin); got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %q: %d %v", origin, got, hdr)
		}
		if got, _, b := h.send(http.MethodGet, "/v1/models", "", "", append([]string{"Origin", origin}, auth...)...); got != http.StatusForbidden {
			t.Errorf("GET from %q: %d, want 403: %s", origin, got, b)
		}
	}
}

// TestCORSOriginsLocalhost: --cors-origins localhost reflects only an
// Origin whose host is localhost, 127.0.0.1 or ::1 (llama-server's
// test_cors_origins_localhost_reflects and _rejects).
func TestCORSOriginsLocalhost(t *testing.T) {
	h := start(t, func(o *Options) { o.CORSOrigins = []string{"localhost"}; o.APIKey = "k" })
	checkLocalhostPolicy(t, h, "Authorization", "Bearer k")
}

// TestCORSDefaultWithoutKeyIsLocalhost: a keyless server's default is
// "localhost", not llama-server's "*" (which llama-server itself warns
// against without a key).
func TestCORSDefaultWithoutKeyIsLocalhost(t *testing.T) {
	checkLocalhostPolicy(t, start(t, nil))
}

// TestCORSSettings: --cors-methods, --cors-headers and
// --no-cors-credentials change the preflight's answer; "*" without
// credentials is answered with "*" itself.
func TestCORSSettings(t *testing.T) {
	h := start(t, func(o *Options) {
		o.CORSOrigins = []string{"*"}
		o.CORSMethods, o.CORSHeaders, o.CORSNoCredentials = "POST", "Authorization, Content-Type", true
	})
	got, hdr := h.preflight("http://app.example")
	if got != http.StatusOK || hdr.Get("Access-Control-Allow-Origin") != "*" || hdr.Get("Access-Control-Allow-Credentials") != "false" ||
		hdr.Get("Access-Control-Allow-Methods") != "POST" || hdr.Get("Access-Control-Allow-Headers") != "Authorization, Content-Type" {
		t.Errorf("preflight: %d %v", got, hdr)
	}
}
