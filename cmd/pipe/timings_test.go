package main

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/metrics"
)

func TestTimingsLine(t *testing.T) {
	var tm timings
	tm.add(decode.Result{PromptTokens: 128, Tokens: make([]int32, 64), Prefill: 1500 * time.Millisecond,
		Decode: 12800 * time.Millisecond, TTFT: 1520 * time.Millisecond, PrefillReadBytes: 612 << 20,
		DecodeReadBytes: 218 << 20, Lookups: metrics.Lookups{Hits: 612, Joins: 88, Misses: 300}})
	want := "[prompt 128 tok 85.3 tok/s | 64 tok 5.00 tok/s (steady 5.40) | TTFT 1.52 s | hit 61.2% | read 830 MiB (prompt 612)]"
	if got := tm.line(5.4); got != want {
		t.Errorf("one call:\n got %s\nwant %s", got, want)
	}
	tm.add(decode.Result{PromptTokens: 10, Tokens: make([]int32, 6), Prefill: 100 * time.Millisecond,
		Decode: time.Second, TTFT: 120 * time.Millisecond, Lookups: metrics.Lookups{Hits: 1000}})
	want = "[2 turns | prompt 138 tok 86.2 tok/s | 70 tok 5.07 tok/s | TTFT 1.52 s | hit 80.6% | read 830 MiB (prompt 612)]"
	if got := tm.line(math.NaN()); got != want {
		t.Errorf("two calls:\n got %s\nwant %s", got, want)
	}
	var mmap timings // no streaming: no hit rate, nothing read
	mmap.add(decode.Result{PromptTokens: 5, Tokens: make([]int32, 3), Prefill: 10 * time.Millisecond,
		Decode: 30 * time.Millisecond, TTFT: 12 * time.Millisecond})
	if got, want := mmap.line(math.NaN()), "[prompt 5 tok 500.0 tok/s | 3 tok 100.00 tok/s | TTFT 12 ms]"; got != want {
		t.Errorf("mmap:\n got %s\nwant %s", got, want)
	}
}

var timingsRE = regexp.MustCompile(`\[prompt \d+ tok [0-9.]+ tok/s \| \d+ tok [0-9.]+ tok/s( \(steady [0-9.]+\))? \| TTFT [0-9.]+ m?s( \| hit [0-9.]+%)? \| read \d+ MiB \(prompt \d+\)\]`)

// TestTimingsOnConsole: a run with a log for a person ends with the timings
// line; with a JSON log there is none (every line stays JSON, the summary
// event unchanged).
func TestTimingsOnConsole(t *testing.T) {
	args := []string{"run", "-m", chatModel, "-n", "40", "--ignore-eos", "--temp", "0", "--moe-stream=true", "--cache-mb", "4"}
	var out, errb bytes.Buffer
	if code := run(t.Context(), append([]string{"--log-format", "console"}, args...), &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	if last := lines[len(lines)-1]; !timingsRE.MatchString(last) || !strings.Contains(last, "| 40 tok") {
		t.Errorf("the console log's last line is not the timings line:\n%s", last)
	}
	out.Reset()
	errb.Reset()
	if code := run(t.Context(), append([]string{"--log-format", "json"}, args...), &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	objs := allJSON(t, "pipe run with a JSON log", errb.Bytes())
	if !hasEvent(objs, "summary") || strings.Contains(errb.String(), "[prompt") {
		t.Errorf("JSON log: want the summary event and no timings line:\n%s", errb.String())
	}
}
