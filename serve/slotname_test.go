package serve

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidSlotFile: slot file names are llama-server's
// fs_validate_filename without subdirectories.
func TestValidSlotFile(t *testing.T) {
	for name, want := range map[string]bool{
		"slot1.bin": true, ".hidden": true, "a b.bin": true, "ünï.bin": true, "x.y.z": true,
		"": false, ".": false, "..": false, "a..b": false, "../a.bin": false, "a/b": false, `a\b`: false,
		"x.": false, " x": false, "x ": false, "a:b": false, "a*b": false, "a?b": false, `a"b`: false,
		"a<b": false, "a>b": false, "a|b": false, "a\x00b": false, "a\x1fb": false, "a\x7fb": false,
		"a\u0085b": false, "\xc0\xaf": false, "\xed\xa0\x80": false, "a\xffb": false, "a\u2215b": false,
		"a\u2216b": false, "a\uff0eb": false, "a\ufffdb": false, "\ufeffa": false,
		strings.Repeat("a", 255): true, strings.Repeat("a", 256): false,
	} {
		if got := validSlotFile(name); got != want {
			t.Errorf("validSlotFile(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSlotFileConfined: a save never replaces a file that is not a slot
// save (its bytes stay), nor follows a symbolic link out of the directory,
// and a restore does not read through one; saving twice to one name
// replaces pipe's own save (as llama-server overwrites). A corrupt file's
// restore is 400 "Unable to restore slot" naming the file and the field
// and leaves the slot empty, as a missing file's does.
func TestSlotFileConfined(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.bin")
	for path, body := range map[string]string{filepath.Join(dir, "notes.txt"): "mine", secret: "ggsq but not for you"} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link.bin")); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(o *Options) { o.Parallel, o.SlotSavePath = 2, dir })
	h.do("/completion", `{"prompt":"Once upon a time","n_predict":2,"id_slot":1}`, 200)
	for _, name := range []string{"notes.txt", "link.bin"} {
		r := h.do("/slots/1?action=save", fmt.Sprintf(`{"filename":%q}`, name), 400)
		if msg := fmt.Sprint(r["error"]); !strings.Contains(msg, "not replaced") {
			t.Errorf("save over %s: %s", name, msg)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Errorf("notes.txt now %q", b)
	}
	if b, _ := os.ReadFile(secret); string(b) != "ggsq but not for you" {
		t.Errorf("the file outside now %q", b)
	}
	a := h.do("/slots/1?action=save", `{"filename":"s.bin"}`, 200)
	if b := h.do("/slots/1?action=save", `{"filename":"s.bin"}`, 200); a["n_saved"] == 0.0 || b["n_written"] != a["n_written"] {
		t.Errorf("the second save: %v, the first %v", b, a)
	}
	h.do("/slots/0?action=restore", `{"filename":"link.bin"}`, 400)
	h.do("/slots/0?action=restore", `{"filename":"s.bin"}`, 200)
	f, err := os.ReadFile(filepath.Join(dir, "s.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f[24] = 0xff // the first token, far outside the vocabulary
	f[25], f[26] = 0xff, 0x0f
	if err := os.WriteFile(filepath.Join(dir, "bad.bin"), f, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, field := range map[string]string{"bad.bin": "token 0", "missing.bin": "no such file"} {
		r := h.do("/slots/0?action=restore", fmt.Sprintf(`{"filename":%q}`, name), 400)
		if msg := fmt.Sprint(r["error"]); !strings.Contains(msg, "Unable to restore slot: slot file "+name) || !strings.Contains(msg, field) {
			t.Errorf("restore of %s: %s", name, msg)
		}
		if r := h.do("/slots/0?action=erase", `{}`, 200); r["n_erased"] != 0.0 {
			t.Errorf("restore of %s left the slot %v", name, r)
		}
		h.do("/slots/0?action=restore", `{"filename":"s.bin"}`, 200)
	}
	req, err := http.NewRequest(http.MethodPost, h.url+"/slots/0?action=erase", nil) // no body, no Content-Type: test_slot_erase's
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("erase without a body: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 { // notes.txt, link.bin, s.bin, bad.bin and no temporary file
		t.Errorf("the directory holds %v", ents)
	}
}
