package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ttftCSV = `step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac
1,6,400,10,100,1,10,1,0,0,100,1
2,6,300,10,100,1,20,1,0,0,100,1
3,6,100,10,100,1,30,1,0,0,100,1
4,6,100,10,100,1,40,1,0,0,100,1
5,6,100,10,100,1,50,1,0,0,100,1
6,6,100,10,100,1,60,1,0,0,100,1
# summary tokens=6 prefill_tokens=22 prefill_s=6.200 ttft_ms=6321.5 prefill_read_GBs=1.234 warm_start=1 warm_reads=578
`

// TestTTFT: ttft_ms of the trailer is in the text, markdown and JSON reports,
// the comparison (lower is better) and the plot's legend.
func TestTTFT(t *testing.T) {
	a := runOf(t, "cold", ttftCSV)
	b := runOf(t, "warm", strings.Replace(ttftCSV, "ttft_ms=6321.5", "ttft_ms=2107.2", 1))
	var buf bytes.Buffer
	if err := Write(&buf, []*Analysis{a, b}, FormatText); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"TTFT                6322 ms  (prompt to first token; prefill 6200 ms for 22 tokens, expert reads at 1.23 GB/s)",
		"TTFT                6322 → 2107 ms (3.00×)",
		"warm-up tokens      2 = 2",
		"trailer             prefill_s=6.200 warm_start=1 warm_reads=578",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
	// The key's current name (an older pipe wrote prefill_read_GBs).
	buf.Reset()
	c := runOf(t, "new", strings.Replace(ttftCSV, "prefill_read_GBs=", "prefill_read_GB_s=", 1))
	if err := Write(&buf, []*Analysis{c}, FormatText); err != nil {
		t.Fatal(err)
	}
	if want := "expert reads at 1.23 GB/s"; !strings.Contains(buf.String(), want) {
		t.Errorf("prefill_read_GB_s: text lacks %q:\n%s", want, buf.String())
	}
	buf.Reset()
	if err := Write(&buf, []*Analysis{a}, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| TTFT | 6322 ms ") {
		t.Errorf("markdown lacks the TTFT:\n%s", buf.String())
	}
	buf.Reset()
	if err := Write(&buf, []*Analysis{a}, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			TTFT         *float64 `json:"ttft_ms"`
			WarmupTokens int      `json:"warmup_tokens"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 1 || doc.Runs[0].TTFT == nil || *doc.Runs[0].TTFT != 6321.5 || doc.Runs[0].WarmupTokens != 2 {
		t.Errorf("json runs %+v", doc.Runs)
	}
	svg := filepath.Join(t.TempDir(), "p.svg")
	if err := PlotFile([]*Analysis{a}, svg); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("warm-up end (step 2), TTFT 6322 ms")) {
		t.Errorf("plot legend lacks the warm-up end and TTFT (%v)", err)
	}
	noTTFT := runOf(t, "old", strings.Replace(ttftCSV, " ttft_ms=6321.5", "", 1))
	buf.Reset()
	if err := Write(&buf, []*Analysis{noTTFT}, FormatText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "TTFT                — (no ttft_ms in the trailer)") {
		t.Errorf("text without ttft_ms:\n%s", buf.String())
	}
}

// TestJSONNames: the JSON report uses the summary's names (units last, one
// style) and null, never -1, for a hit rate without a cache.
func TestJSONNames(t *testing.T) {
	noCache := strings.ReplaceAll(ttftCSV, ",1,10,1,", ",1,-1,1,")
	for _, h := range []string{"20", "30", "40", "50", "60"} {
		noCache = strings.Replace(noCache, ",1,"+h+",1,", ",1,-1,1,", 1)
	}
	var buf bytes.Buffer
	if err := Write(&buf, []*Analysis{runOf(t, "mmap", noCache)}, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	r := doc.Runs[0]
	for _, k := range []string{"tok_s", "steady_tok_s", "read_MiB", "MiB_per_token", "ttft_ms", "first5_wall_ms"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON run lacks %s: %v", k, r)
		}
	}
	for _, k := range []string{"cache_hit_pct", "first_cache_hit_pct"} {
		if v, ok := r[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null without a cache", k, v, ok)
		}
	}
	for _, st := range r["steps"].([]any) {
		if v := st.(map[string]any)["cache_hit_pct"]; v != nil {
			t.Errorf("step %v: cache_hit_pct %v, want null", st, v)
		}
	}
	if strings.Contains(buf.String(), ": -1") {
		t.Errorf("JSON has -1:\n%s", buf.String())
	}
}
