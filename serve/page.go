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

//go:embed page/index.html page/app.js page/app.css
var pageFiles embed.FS

// pageTypes are the Content-Types of the page's files.
var pageTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// page answers GET / and /page/FILE with the embedded files (no API key: the
// page asks for one when the API does).
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
