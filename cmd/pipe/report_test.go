package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const reportData = "../../tools/report/testdata/"

func TestReportCommand(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"report", reportData + "qwen_k8.csv"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"mean tok/s          4.92", "I/O-bound warm-up", "     1      742         521    841         4.5   1.35"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	plot := filepath.Join(t.TempDir(), "cmp.png")
	code = run(context.Background(), []string{"report", "--format", "json", "--warmup", "2", "--plot", plot,
		reportData + "gptoss_k2.csv", reportData + "gptoss_k4.csv"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct {
		Runs []struct {
			WarmupTokens int  `json:"warmup_tokens"`
			WarmupForced bool `json:"warmup_forced"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Runs) != 2 || doc.Runs[1].WarmupTokens != 2 || !doc.Runs[1].WarmupForced {
		t.Errorf("json %v: %s", err, out.String())
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}

	for _, args := range [][]string{
		{"report", reportData + "missing.csv"},
		{"report", "--plot", filepath.Join(t.TempDir(), "x.jpg"), reportData + "qwen_k8.csv"},
		{"report", "--warmup=-3", reportData + "qwen_k8.csv"},
	} {
		errb.Reset()
		if code := run(context.Background(), args, &out, &errb); code != 1 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	if code := run(context.Background(), []string{"report", "--format", "xml", reportData + "qwen_k8.csv"}, &out, &errb); code != 2 {
		t.Errorf("bad --format: exit %d", code)
	}
}
