package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/decode"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the chat page's screenshot to docs/chat-page.png")

// The chat page tested in a real browser: headless Chromium (Debian's
// chromium and chromium-driver packages), driven over WebDriver's HTTP
// protocol with net/http, loads the page from a running server, sends a
// message, and the test reads the streamed reply and the telemetry from the
// DOM.

// webDriver is a chromedriver process and one browser session.
type webDriver struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT/session/ID
	hc   *http.Client
}

// browserBinaries finds chromium and chromedriver; without them the test
// skips, except under CI=true, where .ci/run installs them and a missing one
// is a failure.
func browserBinaries(t *testing.T) (browser, driver string) {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	driver, _ = exec.LookPath("chromedriver")
	if browser == "" || driver == "" {
		msg := fmt.Sprintf("headless Chromium not found (chromium %q, chromedriver %q): apt-get install chromium chromium-driver", browser, driver)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return browser, driver
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startBrowser starts chromedriver and a headless Chromium session with a
// new, empty profile and no network but the loopback.
func startBrowser(t *testing.T) *webDriver {
	browser, driver := browserBinaries(t)
	port := freePort(t)
	cmd := exec.Command(driver, fmt.Sprintf("--port=%d", port), "--allowed-ips=127.0.0.1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wd := &webDriver{t: t, cmd: cmd, hc: &http.Client{Timeout: 60 * time.Second}}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		wd.hc.CloseIdleConnections()
	})
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(hangGuard) // polling an outside process for its readiness
	for {
		var st struct{ Value struct{ Ready bool } }
		if err := wd.call(http.MethodGet, root+"/status", nil, &st); err == nil && st.Value.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver did not start: %s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--window-size=1280,860", "--user-data-dir=" + t.TempDir()}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome", "goog:chromeOptions": map[string]any{"binary": browser, "args": args}}}}
	var sess struct{ Value struct{ SessionID string } }
	if err := wd.call(http.MethodPost, root+"/session", caps, &sess); err != nil || sess.Value.SessionID == "" {
		t.Fatalf("new session: %v (%s)", err, logs.String())
	}
	wd.base = root + "/session/" + sess.Value.SessionID
	t.Cleanup(func() { _ = wd.call(http.MethodDelete, wd.base, nil, nil) })
	return wd
}

// call makes one WebDriver request; a WebDriver error is returned as one.
func (wd *webDriver) call(method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := wd.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (wd *webDriver) do(method, path string, in, out any) {
	wd.t.Helper()
	if err := wd.call(method, wd.base+path, in, out); err != nil {
		wd.t.Fatal(err)
	}
}

// element finds the element a CSS selector names.
func (wd *webDriver) element(css string) string {
	var r struct{ Value map[string]string }
	wd.do(http.MethodPost, "/element", map[string]string{"using": "css selector", "value": css}, &r)
	for _, id := range r.Value {
		return id
	}
	wd.t.Fatalf("no element %q", css)
	return ""
}

// script runs JavaScript in the page and decodes what it returns into out.
func (wd *webDriver) script(js string, out any) {
	wd.t.Helper()
	var r struct{ Value json.RawMessage }
	wd.do(http.MethodPost, "/execute/sync", map[string]any{"script": js, "args": []any{}}, &r)
	if out != nil {
		if err := json.Unmarshal(r.Value, out); err != nil {
			wd.t.Fatalf("script result %s: %v", r.Value, err)
		}
	}
}

// pageState is what the test reads from the page's DOM.
type pageState struct {
	Done, Finish, Reply, Error    string
	TokS, Hit, Stall, MiB, Tokens string
	Cells                         [][2]int
}

const readPage = `const a = [...document.querySelectorAll(".msg.assistant")].pop();
const t = (id) => document.getElementById(id).textContent;
return {Done: a ? (a.dataset.done || "") : "", Finish: a ? (a.dataset.finish || "") : "", Reply: a ? a.textContent : "",
  Error: t("error"), TokS: t("tel-toks"), Hit: t("tel-hit"), Stall: t("tel-stall"), MiB: t("tel-mib"), Tokens: t("tel-tokens"),
  Cells: [...document.querySelectorAll("#strip .cell")].map(c => [Number(c.dataset.hits), Number(c.dataset.misses)])};`

// TestChatPageInBrowser: the page at / streams a chat in headless Chromium:
// the reply the DOM shows is the server's greedy answer, and the telemetry
// panel shows tok/s, hit %, stall, MiB read and one strip cell per layer
// whose hits and misses add up to the experts a token routes.
func TestChatPageInBrowser(t *testing.T) {
	wd := startBrowser(t)
	// an expert cache of a third of the experts: the strip shows misses too
	h := startModel(t, func(o *decode.Options) { o.Engine.Cache.Bytes = 2 << 20 }, nil)
	const maxTokens = 12
	want := h.do("/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"Tell me about Paris"}],"max_tokens":%d,"temperature":0}`, maxTokens), 200)
	wantText := want["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)

	wd.do(http.MethodPost, "/url", map[string]string{"url": h.url + "/"}, nil)
	var title string
	wd.script(`return document.title`, &title)
	if !strings.HasPrefix(title, "pipe") {
		t.Fatalf("page title %q", title)
	}
	wd.script(fmt.Sprintf(`document.getElementById("temperature").value = "0"; document.getElementById("max-tokens").value = "%d"; return null`, maxTokens), nil)
	wd.do(http.MethodPost, "/element/"+wd.element("#input")+"/value", map[string]string{"text": "Tell me about Paris"}, nil)
	wd.do(http.MethodPost, "/element/"+wd.element("#send")+"/click", map[string]any{}, nil)

	var st pageState
	deadline := time.Now().Add(hangGuard) // polling the page: it has no event to wait on
	for st.Done != "true" {
		if time.Now().After(deadline) {
			t.Fatalf("the reply did not finish: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
		wd.script(readPage, &st)
	}
	if st.Error != "" || st.Reply != wantText || st.Finish != "length" {
		t.Fatalf("page: reply %q (finish %q, error %q), want %q (length)", st.Reply, st.Finish, st.Error, wantText)
	}
	hp := h.m.Engine().Desc().HParams
	num := regexp.MustCompile(`^\d+(\.\d+)?`)
	for _, f := range []struct{ name, v, unit string }{{"tok/s", st.TokS, ""}, {"hit", st.Hit, " %"}, {"stall", st.Stall, " ms"}, {"read", st.MiB, " MiB"}} {
		if !num.MatchString(f.v) || !strings.HasSuffix(f.v, f.unit) {
			t.Errorf("telemetry %s: %q", f.name, f.v)
		}
	}
	if st.Tokens != fmt.Sprint(maxTokens) || len(st.Cells) != hp.NLayer {
		t.Fatalf("telemetry tokens %q, %d strip cells: want %d and %d", st.Tokens, len(st.Cells), maxTokens, hp.NLayer)
	}
	for l, c := range st.Cells {
		if c[0]+c[1] == 0 || (c[0]+c[1])%hp.NExpertUsed != 0 {
			t.Errorf("strip cell %d: %d hits + %d misses, want a multiple of k=%d", l, c[0], c[1], hp.NExpertUsed)
		}
	}
	if *updateScreenshot {
		var shot struct{ Value string }
		wd.do(http.MethodGet, "/screenshot", nil, &shot)
		png, err := base64.StdEncoding.DecodeString(shot.Value)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/chat-page.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
