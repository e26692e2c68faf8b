package serve

import (
	"embed"
	"net/http"
	"path"
)

// The chat page at / (page/): static HTML, CSS and JavaScript embedded in
// the binary, no build step and nothing fetched from elsewhere. It streams a
// chat from /v1/chat/completions and draws the chunks' telemetry (tok/s,
// hit %, stall, MiB read, the per-layer strip of expert hits and misses).
// As llama-server's web UI, it is an installable web app: /manifest.webmanifest,
// the service worker /sw.js (which names its cache by /_app/version.json,
// the server's version) — public paths, as llama-server's UI files are.

//go:embed page/index.html page/app.js page/app.css page/sw.js page/manifest.webmanifest
var pageFiles embed.FS

// pageTypes are the Content-Types of the page's files.
var pageTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	// the Content-Type the Web App Manifest spec registers
	".webmanifest": "application/manifest+json",
}

// page answers GET /, /page/FILE, /sw.js and /manifest.webmanifest with the
// embedded files (no API key: the page asks for one when the API does).
func (s *infoAPI) page(x *exchange) {
	name := "page/index.html"
	if x.r.URL.Path != "/" {
		name = "page/" + path.Base(x.r.URL.Path)
	}
	b, err := pageFiles.ReadFile(name)
	if err != nil {
		s.rq.notFound(x)
		return
	}
	h := x.w.Header()
	h.Set("Content-Type", pageTypes[path.Ext(name)])
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
	x.w.WriteHeader(http.StatusOK)
	_, x.err = x.w.Write(b)
}

// version answers GET /_app/version.json (the path llama-server's Svelte UI
// has it at): the server's version, which names the service worker's cache.
func (s *infoAPI) version(x *exchange) {
	x.w.Header().Set("Cache-Control", "no-cache")
	x.err = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]string{"version": s.o.Fingerprint})
}
