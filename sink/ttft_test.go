package sink

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/tools/report"
)

// TestTTFT: the first FirstToken call is the run's ttft_ms in the trailer and
// the summary event, beside the prefill read rate; later calls are ignored.
func TestTTFT(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.csv")
	var log bytes.Buffer
	s, err := New(Options{CSV: path, Warmup: -1, Log: zerolog.New(&log)})
	if err != nil {
		t.Fatal(err)
	}
	s.Prefill(10, 2*time.Second)
	s.PrefillRead(3e9)
	s.FirstToken(2345600 * time.Microsecond)
	s.FirstToken(time.Millisecond) // a later prompt: not the run's TTFT
	for i := 1; i <= 6; i++ {
		if err := s.Token(tok(i, 6)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	run, err := report.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"ttft_ms": "2345.6", "prefill_read_MiB": "2861.0", "prefill_read_GB_s": "1.500"} {
		if got, ok := run.TrailerValue(k); !ok || got != want {
			t.Errorf("trailer %s = %q (present %v), want %q", k, got, ok, want)
		}
	}
	var events int
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch ev["event"] {
		case "first_token":
			events++
			if ev["ttft_ms"] != 2345.6 {
				t.Errorf("first_token event ttft_ms = %v", ev["ttft_ms"])
			}
		case "summary":
			if ev["ttft_ms"] != 2345.6 || ev["prefill_read_GB_s"] != 1.5 || ev["warmup_tokens"] != 1.0 {
				t.Errorf("summary event %v: want ttft_ms 2345.6, prefill_read_GB_s 1.5, warmup_tokens 1", ev)
			}
		}
	}
	if events != 1 {
		t.Errorf("%d first_token events, want 1", events)
	}
}

// TestNoTTFT: a run that never sampled a token has no ttft_ms key.
func TestNoTTFT(t *testing.T) {
	var b bytes.Buffer
	s, err := New(Options{CSVWriter: &b, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "ttft_ms") || strings.Contains(b.String(), "prefill_read") {
		t.Errorf("trailer without a first token or prefill read: %q", b.String())
	}
}
