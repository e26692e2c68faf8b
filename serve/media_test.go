package serve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mediaChat is llama-server's test_local_media_file request: a text part
// and an image_url part with url.
func mediaChat(url string) string {
	return `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"test"},` +
		`{"type":"image_url","image_url":{"url":` + js(url) + `}}]}]}`
}

// TestMediaPath: a chat's file:// image names a file under --media-path,
// checked as llama-server's handle_media checks it (test_local_media_file's
// cases: no --media-path, a file that exists, the same with doubled
// slashes, a missing file, ".."), and confined to the directory (an
// absolute path, a symbolic link out of it); a file that passes gets the
// text model's error. Every answer is a 400 naming the part and the reason.
func TestMediaPath(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "mtmd"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(dir, "mtmd", "test-1.jpeg"), filepath.Join(outside, "secret.jpeg")} {
		if err := os.WriteFile(f, []byte("\xff\xd8\xff"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	const notSupported = "image input is not supported"
	cases := []struct {
		media, url, want string
	}{
		{"", "file://mtmd/test-1.jpeg", "file:// URLs are not allowed unless --media-path is specified"},
		{dir, "file://mtmd/test-1.jpeg", notSupported},
		{dir, "file:////mtmd//test-1.jpeg", notSupported},
		{dir, "file://mtmd/notfound.jpeg", "file does not exist or cannot be opened: mtmd/notfound.jpeg"},
		{dir, "file://../mtmd/test-1.jpeg", "file path is not allowed: ../mtmd/test-1.jpeg"},
		{dir, "file://mtmd/../../x.jpeg", "file path is not allowed"},
		{dir, "file://" + filepath.Join(outside, "secret.jpeg"), "file does not exist or cannot be opened"},
		{dir, "file://escape/secret.jpeg", "file path is not allowed or cannot be opened: escape/secret.jpeg"},
		{dir, "file://mtmd", "file does not exist or cannot be opened: mtmd"},
		{dir, "file://a:b.jpeg", "file path is not allowed: a:b.jpeg"},
		{dir, "http://127.0.0.1:1/x.png", notSupported},
		{dir, "data:image/png;base64,AAAA", notSupported},
	}
	for _, c := range cases {
		h := start(t, func(o *Options) { o.MediaPath = c.media })
		m := h.do("/v1/chat/completions", mediaChat(c.url), 400)
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, "messages[0].content[1] (image_url)") {
			t.Errorf("media %q, url %q: %q, want it to name messages[0].content[1] (image_url) and say %q", c.media, c.url, msg, c.want)
		}
	}
}

// TestOpenMediaErrors: openMedia's errors are ErrMediaPath, and a file over
// maxMediaBytes is refused by its size without being read.
func TestOpenMediaErrors(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxMediaBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = openMedia(dir, "big.png")
	if !errors.Is(err, ErrMediaPath) || !strings.Contains(err.Error(), "over the") {
		t.Errorf("big file: %v", err)
	}
	if err := openMedia(dir, "/"); !errors.Is(err, ErrMediaPath) {
		t.Errorf("the directory itself: %v", err)
	}
}
