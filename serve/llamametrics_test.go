package serve

import (
	"fmt"
	"strings"
	"testing"
)

// metricValue is /metrics' value of the series name (fails without it).
func metricValue(t *testing.T, met, name string) float64 {
	t.Helper()
	parts := strings.SplitN(met, "\n"+name+" ", 2)
	if len(parts) != 2 {
		t.Fatalf("/metrics lacks %s:%s", name, met)
	}
	var v float64
	if _, err := fmt.Sscan(strings.SplitN(parts[1], "\n", 2)[0], &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestMetricsDecodeCount: llama-server's n_decode_total counts the forward
// passes — with one slot the prompt pass and one per fed token (5 tokens
// generated to the length limit: 1 + 5) — and n_busy_slots_per_decode is
// their mean number of slots: 1 for one request, on one slot or on a batch
// of two; the speculative counters are there, at 0.
func TestMetricsDecodeCount(t *testing.T) {
	for _, parallel := range []int{1, 2} {
		h := start(t, func(o *Options) { o.Parallel = parallel })
		h.do("/v1/completions", `{"prompt":"hello","max_tokens":5,"temperature":0}`, 200)
		met := h.metrics(t)
		if n := metricValue(t, met, "llamacpp:tokens_predicted_total"); n != 5 {
			t.Fatalf("parallel %d: %v tokens predicted, want 5", parallel, n)
		}
		n := metricValue(t, met, "llamacpp:n_decode_total")
		if parallel == 1 && n != 6 || n < 5 {
			t.Errorf("parallel %d: n_decode_total %v, want 6 (1 prompt pass + 5 steps)", parallel, n)
		}
		if b := metricValue(t, met, "llamacpp:n_busy_slots_per_decode"); b != 1 {
			t.Errorf("parallel %d: n_busy_slots_per_decode %v, want 1", parallel, b)
		}
		for _, want := range []string{"\n# TYPE llamacpp:n_decode_total counter\n", "\n# TYPE llamacpp:n_busy_slots_per_decode gauge\n",
			"\nllamacpp:spec_decode_num_draft_tokens_total 0\n", "\nllamacpp:spec_decode_num_accepted_tokens_total 0\n",
			"\nllamacpp:spec_decode_num_drafts_total 0\n"} {
			if !strings.Contains(met, want) {
				t.Errorf("parallel %d: /metrics lacks %q", parallel, want)
			}
		}
	}
}
