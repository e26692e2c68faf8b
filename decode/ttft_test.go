package decode

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sink"
	"github.com/pipe-engine/pipe/stages"
)

// TestTTFT: Generate's time to first token starts at GenOptions.Given, covers
// the prefill, and is the run's ttft_ms in the CSV trailer beside the
// prefill's expert read.
func TestTTFT(t *testing.T) {
	var csv, logs bytes.Buffer
	m, err := Open(context.Background(), Options{
		Engine: stages.Config{Path: tinyQ8, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"},
			Threads: 2, Log: zerolog.New(&logs).Level(zerolog.DebugLevel)},
		KV: model.KVF32, Sink: sink.Options{CSVWriter: &csv, Warmup: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := m.Encode(Prompt{Text: "Once upon a time"})
	if err != nil {
		t.Fatal(err)
	}
	given := time.Now().Add(-time.Second) // the prompt came a second ago
	res, err := s.Generate(context.Background(), ids, GenOptions{MaxTokens: 3, Given: given}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if res.TTFT < time.Second+res.Prefill || res.TTFT > time.Since(given) {
		t.Errorf("TTFT %v: want at least 1s + prefill %v and at most %v", res.TTFT, res.Prefill, time.Since(given))
	}
	trailer := csv.String()[strings.LastIndex(csv.String(), "# summary"):]
	// ttft_ms is TTFT in ms: at least 1000 (not a prefix "1": a prefill
	// slower than a second on a loaded machine is still right).
	var ms float64
	if i := strings.Index(trailer, " ttft_ms="); i < 0 {
		t.Errorf("trailer %q lacks ttft_ms", trailer)
	} else if _, err := fmt.Sscan(strings.Fields(trailer[i+len(" ttft_ms="):])[0], &ms); err != nil || ms < 1000 || ms > float64(res.TTFT.Milliseconds()+1) {
		t.Errorf("trailer %q: ttft_ms %v (%v), want TTFT %v in ms", trailer, ms, err, res.TTFT)
	}
	for _, k := range []string{" prefill_read_MiB=", " prefill_read_GB_s=", " warmup_tokens=", " prefill_stall_ms=", " prefill_compute_ms=", " prefill_io_busy_ms=",
		" prefill_slot_wait_ms=", " prefill_lanes_busy_pct="} {
		if !strings.Contains(trailer, k) {
			t.Errorf("trailer %q lacks %q", trailer, k)
		}
	}
	// the prompt pass layer by layer: one prefill_layer event per MoE layer
	layers := m.Engine().Desc().HParams.NLayer
	if n := strings.Count(logs.String(), `"event":"prefill_layer"`); n != layers {
		t.Errorf("%d prefill_layer events for a one-pass prompt of a %d-layer model", n, layers)
	}
}
