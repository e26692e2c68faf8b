package serve

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/pipe-engine/pipe/decode"
)

var hitGauge = regexp.MustCompile(`\npipe_expert_cache_hit_percent (\S+)\n`)

// TestHitRateAgrees: the per-token CSV's cache_hit_pct and /metrics' hit rate
// are one definition (metrics.Counters): after two requests on a server
// that writes the CSV (so prompt passes come between decode steps), with
// speculative reads a lookup may join, the CSV's last row shows the rate
// /metrics shows, to the CSV's two decimals.
func TestHitRateAgrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.csv")
	h := startModel(t, func(o *decode.Options) {
		o.Sink.CSV = path
		o.Engine.Prefetch.N, o.Engine.Prefetch.Policy = 2, "temporal"
	}, nil)
	for _, prompt := range []string{"hello", "the capital of France is"} {
		h.do("/v1/completions", `{"prompt":`+js(prompt)+`,"max_tokens":12,"temperature":0}`, 200)
	}
	m := hitGauge.FindStringSubmatch(h.metrics(t))
	if m == nil {
		t.Fatal("/metrics has no pipe_expert_cache_hit_percent")
	}
	gauge, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.stop(); err != nil { // flushes and closes the CSV
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+2*12 { // the header and a row per generated token (each is fed)
		t.Fatalf("%d CSV rows, want 25", len(rows))
	}
	col := -1
	for i, name := range rows[0] {
		if name == "cache_hit_pct" {
			col = i
		}
	}
	last, err := strconv.ParseFloat(rows[len(rows)-1][col], 64)
	if err != nil {
		t.Fatal(err)
	}
	if gauge <= 0 || gauge >= 100 {
		t.Errorf("/metrics hit rate %g %%: want a run with hits and misses", gauge)
	}
	if d := last - gauge; d > 0.005 || d < -0.005 {
		t.Errorf("CSV cache_hit_pct %v, /metrics %v", last, gauge)
	}
}
