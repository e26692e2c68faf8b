package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const replayTrace = "../../tools/replay/testdata/gemma.route.csv"

func TestReplayCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"replay", replayTrace, "--budgets", "500,1000", "--policy", "lru,layer"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"gemma.route.csv", "T = 676.4 MiB", "500 (<T)", "layer", "MiB read / token"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}

	out.Reset()
	code = run(context.Background(), []string{"replay", replayTrace, "--budgets", "500", "--policy", "lru", "--streams", "4"}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "gemma.route.csv ×4 streams") {
		t.Fatalf("--streams 4: exit %d: %s%s", code, errb.String(), out.String())
	}

	out.Reset()
	code = run(context.Background(), []string{"replay", replayTrace, replayTrace, "--budgets", "500", "--policy", "lru", "--format", "json", "--phase", "all"}, &out, &errb)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errb.String())
	}
	var reps []struct {
		Phase   string `json:"phase"`
		Results [][]struct {
			HitPct  float64 `json:"hit_pct"`
			Lookups int64   `json:"lookups"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &reps); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	// All phases: 29 prefill layers' distinct experts plus 128×30×6 decode lookups.
	if len(reps) != 2 || reps[0].Phase != "all" || reps[0].Results[0][0].Lookups <= 128*30*6 {
		t.Errorf("json reports = %+v", reps)
	}
}

func TestReplayErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", replayTrace, "--policy", "fifo"}, "valid: belady, layer, layer+admit, layer-lrfu, layer-lru, lfu, lru, random"},
		{[]string{"replay", replayTrace, "--budgets", "big"}, "--budgets"},
		{[]string{"replay", "../../go.mod"}, "line 1"},
		{[]string{"replay", "no-such.csv"}, "no-such.csv"},
		{[]string{"replay", replayTrace, "--streams", "0"}, "--streams 0"},
		{[]string{"replay", replayTrace, "--streams", "65"}, "--streams 65"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want non-zero and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// shortWriter records its writes and fails only the one numbered fail
// (from 0; -1: none), so a failure that is ignored goes unnoticed.
type shortWriter struct {
	fail   int
	calls  int
	writes []string
}

func (w *shortWriter) Write(p []byte) (int, error) {
	w.calls++
	if w.calls-1 == w.fail {
		return 0, errors.New("disk full")
	}
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// TestReplayWriteErrors: a stdout that fails at any separator — between two
// reports, or the JSON array's brackets — fails the command.
func TestReplayWriteErrors(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		args := []string{"replay", replayTrace, replayTrace, "--budgets", "500", "--policy", "lru", "--format", format}
		rec := &shortWriter{fail: -1}
		var errb bytes.Buffer
		if code := run(context.Background(), args, rec, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errb.String())
		}
		seps := 0
		for i, w := range rec.writes {
			if w != "[" && w != "," && w != "\n" && w != "]\n" {
				continue
			}
			seps++
			errb.Reset()
			if code := run(context.Background(), args, &shortWriter{fail: i}, &errb); code == 0 || !strings.Contains(errb.String(), "disk full") {
				t.Errorf("%s, write %d (%q) failing: exit %d, stderr %q", format, i, w, code, errb.String())
			}
		}
		if want := map[string]int{"text": 1, "json": 3}[format]; seps < want {
			t.Errorf("%s: %d separator writes seen, want %d", format, seps, want)
		}
	}
}

// TestReplayWarmStart: --warm-start compares cold, warm and continued starts
// of the trace's second half (text and JSON); belady is refused there.
func TestReplayWarmStart(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"replay", replayTrace, "--warm-start", "--budgets", "4000"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"warm start on gemma.route.csv", "first 20: cold", "continued", "layer"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), []string{"replay", replayTrace, "--warm-start", "--budgets", "4000", "--policy", "layer", "--format", "json"}, &out, &errb); code != 0 {
		t.Fatalf("json: exit %d: %s", code, errb.String())
	}
	var rep struct {
		Rows []struct {
			ColdHead float64 `json:"cold_head_hit_pct"`
			WarmHead float64 `json:"warm_head_hit_pct"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Rows) != 1 || rep.Rows[0].WarmHead <= rep.Rows[0].ColdHead {
		t.Errorf("json (%v): %s", err, out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"replay", replayTrace, "--warm-start", "--policy", "belady"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "online policies") {
		t.Errorf("belady: exit %d, stderr %q", code, errb.String())
	}
}
