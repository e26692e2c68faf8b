package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GET and POST /cors-proxy?url=…: llama-server's MCP CORS proxy
// (tools/server/server-cors-proxy.h, --ui-mcp-proxy), which lets a web
// page reach an MCP server that sends no CORS headers. Only when the
// operator enabled it (Options.MCPProxy); else llama-server's 403 "this
// feature is disabled". The target must be an http or https URL with a
// host and no credentials in it; the request goes with the same method and
// body and with only the headers the page named explicitly: a header
// "x-llama-server-proxy-header-NAME: V" is sent as "NAME: V" (never
// Accept-Encoding, Transfer-Encoding or Content-Length) and nothing else of
// the page's request — not its Authorization, Cookie or API key. The answer
// comes back with its status, Content-Type and headers, less Server,
// Transfer-Encoding, Content-Length, Keep-Alive, the Access-Control-*
// headers (the server's own CORS answer stands) and, pipe's addition,
// Set-Cookie (a foreign site's cookie would land on this server's origin).
//
// Bounds: the whole exchange within proxyTimeout (llama-server's 600 s read
// and write timeouts), a connection within proxyDialTimeout, at most
// proxyMaxBytes of answer (then the stream ends), and the page's going
// (its request context) ends the upstream request. Differences: a bad URL
// is a 400 naming the url parameter and an unreachable target a 502
// "proxy error: …", where llama-server answers 500 to both.

const (
	proxyHeaderPrefix = "x-llama-server-proxy-header-"
	proxyTimeout      = 600 * time.Second
	proxyDialTimeout  = 10 * time.Second
	proxyMaxBytes     = 64 << 20
)

// corsProxy serves /cors-proxy.
type corsProxy struct {
	parts
	client *http.Client
}

func newCORSProxy(p parts) *corsProxy {
	tr := &http.Transport{
		Proxy:                 nil, // the target is dialled directly
		DialContext:           (&net.Dialer{Timeout: proxyDialTimeout}).DialContext,
		TLSHandshakeTimeout:   proxyDialTimeout,
		ResponseHeaderTimeout: proxyTimeout,
		DisableCompression:    true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &corsProxy{parts: p, client: &http.Client{Transport: tr}}
}

// errProxyURL: the url parameter is not a target the proxy forwards to.
var errProxyURL = errors.New("url")

// proxyTarget checks the url parameter as llama-server's proxy_request.
func proxyTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return nil, fmt.Errorf("%w: the url parameter is required (/cors-proxy?url=http://…)", errProxyURL)
	case err != nil:
		return nil, fmt.Errorf("%w: invalid target URL: %v", errProxyURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: unsupported URL scheme in target URL: %s", errProxyURL, u.Scheme)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%w: invalid target URL: missing host", errProxyURL)
	case u.User != nil:
		return nil, fmt.Errorf("%w: authentication in target URL is not supported", errProxyURL)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// proxyHeaders are the explicit x-llama-server-proxy-header-* headers of
// in, without their prefix.
func proxyHeaders(in http.Header) http.Header {
	out := http.Header{}
	for k, vs := range in {
		name, ok := strings.CutPrefix(strings.ToLower(k), proxyHeaderPrefix)
		switch {
		case !ok, name == "", name == "accept-encoding", name == "transfer-encoding", name == "content-length":
			continue
		}
		for _, v := range vs {
			out.Add(name, v)
		}
	}
	return out
}

// strippedAnswerHeader reports a header of the target's answer that is not
// passed on.
func strippedAnswerHeader(name string) bool {
	switch name = strings.ToLower(name); name {
	case "server", "transfer-encoding", "content-length", "keep-alive", "set-cookie", "connection":
		return true
	}
	return strings.HasPrefix(name, "access-control-")
}

func (p *corsProxy) serve(x *exchange) {
	if m := x.r.Method; m != http.MethodGet && m != http.MethodPost {
		x.w.Header().Set("Allow", "GET, POST")
		p.rq.fail(x, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Errorf("%s /cors-proxy: use GET or POST", m))
		return
	}
	target, err := proxyTarget(x.r.URL.Query().Get("url"))
	if err != nil {
		p.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
		return
	}
	var body []byte
	if x.r.Method == http.MethodPost {
		var ok bool
		if body, ok = p.rq.readBody(x); !ok {
			return
		}
	}
	ctx, cancel := context.WithTimeout(x.r.Context(), proxyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, x.r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		p.rq.fail(x, http.StatusBadRequest, "invalid_request_error", fmt.Errorf("%w: %v", errProxyURL, err))
		return
	}
	req.Header = proxyHeaders(x.r.Header)
	req.Header.Del("Host") // llama-server rewrites a forwarded Host to the target's, as req.Host is
	if x.r.Method == http.MethodGet {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	resp, err := p.client.Do(req)
	if err != nil {
		p.rq.fail(x, http.StatusBadGateway, "server_error", fmt.Errorf("proxy error: %w", err))
		return
	}
	defer resp.Body.Close()
	p.relay(x, resp)
}

// relay passes the target's answer on, flushing as it comes, at most
// proxyMaxBytes.
func (p *corsProxy) relay(x *exchange, resp *http.Response) {
	h := x.w.Header()
	for k, vs := range resp.Header {
		if !strippedAnswerHeader(k) {
			h[k] = vs
		}
	}
	x.w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(x.w)
	src := io.LimitReader(resp.Body, proxyMaxBytes)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if writeBy(x.w, p.o.WriteTimeout) != nil {
				return
			}
			if _, werr := x.w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
