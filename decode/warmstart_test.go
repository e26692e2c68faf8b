package decode

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sink"
	"github.com/pipe-engine/pipe/stages"
	"github.com/pipe-engine/pipe/warmstart"
)

// hotRun opens the tiny model with a hot set at path, generates 6 tokens and
// closes it; it returns every step's logits, the CSV trailer and the log.
func hotRun(t *testing.T, path string, warm bool) ([][]float32, string, string, *Model) {
	t.Helper()
	var csv, log bytes.Buffer
	m, err := Open(context.Background(), Options{
		Engine: stages.Config{Path: tinyQ8, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 8 << 20, Policy: "layer"},
			Threads: 2, Log: zerolog.New(zerolog.SyncWriter(&log))}, // the warm start logs from its goroutine
		KV: model.KVF32, Sink: sink.Options{CSVWriter: &csv, Warmup: -1},
		HotSet: warmstart.Options{Path: path, Warm: warm},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := m.Encode(Prompt{Text: "The village by the river had a mill"})
	if err != nil {
		t.Fatal(err)
	}
	var logits [][]float32
	_, err = s.Generate(context.Background(), ids, GenOptions{MaxTokens: 6, IgnoreEOS: true, OnLogits: func(l []float32) error {
		logits = append(logits, slices.Clone(l))
		return nil
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	out := csv.String()
	return logits, out[strings.LastIndex(out, "# summary"):], log.String(), m
}

// TestWarmStartBitIdentical: the first run saves the hot set; the second
// reads it and warm-starts; the logits are bit-identical with and without
// warm start; a corrupt or stale hot set is ignored with a warning.
func TestWarmStartBitIdentical(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache", "tiny.hot")
	cold, tr, log, _ := hotRun(t, path, true)
	if !strings.Contains(log, `"event":"hot_set"`) || !strings.Contains(tr, " warm_start=0") {
		t.Fatalf("first run: want a cold start; trailer %q", tr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("hot set not saved: %v", err)
	}
	warm, tr, log, m := hotRun(t, path, true)
	if !strings.Contains(log, `"event":"warm_start"`) || !strings.Contains(tr, " warm_start=1") || strings.Contains(tr, " warm_reads=0 ") {
		t.Fatalf("second run: want a warm start with reads; trailer %q", tr)
	}
	t.Logf("warm trailer: %s", tr)
	if h := m.HotSet(); h == nil || h.Empty() {
		t.Error("HotSet after a run is empty")
	}
	off, tr, _, _ := hotRun(t, path, false)
	if !strings.Contains(tr, " warm_start=0") {
		t.Fatalf("--warm-start=false: trailer %q", tr)
	}
	for i := range cold {
		for j := range cold[i] {
			if cold[i][j] != warm[i][j] || cold[i][j] != off[i][j] {
				t.Fatalf("step %d logit %d: cold %v warm %v off %v", i, j, cold[i][j], warm[i][j], off[i][j])
			}
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"corrupt": strings.Replace(string(b), "L 0 ", "L 0 x", 1),
		"stale":   strings.Replace(string(b), "header_sha256=", "header_sha256=00", 1),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		again, tr, log, _ := hotRun(t, path, true)
		if !strings.Contains(log, `"event":"hot_set_ignored"`) || !strings.Contains(tr, " warm_start=0") {
			t.Errorf("%s hot set: want it ignored with a warning; trailer %q", name, tr)
		}
		if !slices.EqualFunc(again, cold, slices.Equal) {
			t.Errorf("%s hot set: logits differ", name)
		}
	}
	if b2, _ := os.ReadFile(path); !bytes.Contains(b2, []byte("pipe hot set v1")) || bytes.Contains(b2, []byte("header_sha256=00")) {
		t.Error("the ignored hot set was not replaced by a good one")
	}
}
