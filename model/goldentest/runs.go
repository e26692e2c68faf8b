package goldentest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Run is what the tests read of a golden run file
// (testdata/golden/README.md, section 4): llama.cpp's prompt, its greedy
// continuation, each step's top-1/top-2 margin and its logits.
type Run struct {
	ModelFile       string  `json:"model_file"`
	PromptID        string  `json:"prompt_id"`
	Chat            bool    `json:"chat"`
	UserText        string  `json:"user_text"`
	PromptTokens    []int32 `json:"prompt_tokens"`
	GeneratedTokens []int32 `json:"generated_tokens"`
	NVocab          int     `json:"n_vocab"`
	Steps           []struct {
		Margin float64 `json:"margin_top1_top2"`
	} `json:"steps"`
	// Logits holds one row of NVocab floats per generated token (the
	// logits that chose it); PromptLogits one per prompt position, where
	// the run recorded them.
	Logits       struct{ Data string } `json:"logits"`
	PromptLogits struct{ Data string } `json:"prompt_logits"`
}

// Runs reads every run of the golden model name (goldenDir/runs/name),
// failing on a directory without runs or a run without n_vocab or with a
// margin missing for a generated token.
func Runs(t *testing.T, goldenDir, name string) []*Run {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "runs", name, "*__ref.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden runs of %s: %v", name, err)
	}
	var runs []*Run
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r Run
		if err := json.Unmarshal(b, &r); err != nil || r.NVocab == 0 || len(r.Steps) != len(r.GeneratedTokens) {
			t.Fatalf("%s: %v (n_vocab %d, %d steps, %d tokens)", f, err, r.NVocab, len(r.Steps), len(r.GeneratedTokens))
		}
		runs = append(runs, &r)
	}
	return runs
}

// Rows decodes base64 little-endian float32 rows of n floats.
func Rows(t *testing.T, b64 string, n int) [][]float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw)%(4*n) != 0 {
		t.Fatalf("logits: %v (%d bytes for rows of %d)", err, len(raw), n)
	}
	var out [][]float32
	for r := 0; r < len(raw)/(4*n); r++ {
		row := make([]float32, n)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(r*n+i):]))
		}
		out = append(out, row)
	}
	return out
}

// RowErr is max|got−want| / max|want| and max|want|.
func RowErr(got, want []float32) (rel, maxAbs float64) {
	var maxDiff float64
	for i := range want {
		maxAbs = math.Max(maxAbs, math.Abs(float64(want[i])))
		maxDiff = math.Max(maxDiff, math.Abs(float64(got[i]-want[i])))
	}
	return maxDiff / maxAbs, maxAbs
}

// Argmax is the greedy token: the highest logit, lowest id on ties.
func Argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}
