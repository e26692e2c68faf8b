package serve

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPageAppFiles: the page's web-app files answer without the API key, as
// llama-server's UI files (test_access_static_assets_without_api_key):
// the manifest as JSON of the registered type, the service worker as
// JavaScript, /_app/version.json the server's version; the API still wants
// the key.
func TestPageAppFiles(t *testing.T) {
	h := start(t, func(o *Options) { o.APIKey = "sekret"; o.Fingerprint = "b42-pipe" })
	get := func(path string) (int, string, []byte) {
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	for path, ctype := range map[string]string{
		"/":                     "text/html",
		"/sw.js":                "text/javascript",
		"/manifest.webmanifest": "application/manifest+json",
		"/_app/version.json":    "application/json",
	} {
		code, ct, b := get(path)
		if code != http.StatusOK || !strings.HasPrefix(ct, ctype) {
			t.Errorf("%s: %d %q, want 200 %s", path, code, ct, ctype)
		}
		if strings.HasSuffix(path, "json") || strings.HasSuffix(path, "manifest") {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("%s: not JSON: %q", path, b)
			}
			if path == "/_app/version.json" && m["version"] != "b42-pipe" {
				t.Errorf("%s: %q, want the server's version", path, b)
			}
			if path == "/manifest.webmanifest" && m["start_url"] != "/" {
				t.Errorf("%s: start_url %v", path, m["start_url"])
			}
		}
	}
	if code, _, _ := get("/props"); code != http.StatusUnauthorized {
		t.Errorf("/props without the key: %d, want 401", code)
	}
}
