package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/tools/replay"
)

// TestRouteTrace: `pipe run --route-trace` writes route_trace v1 that the
// replay reader accepts: one row per (token, layer, slot), prefill rows for
// every prompt position and decode rows for every fed token, weights of a
// token and layer summing to 1 (qwen3moe renormalises), residency only with
// a cache.
func TestRouteTrace(t *testing.T) {
	dir := t.TempDir()
	tr, to := filepath.Join(dir, "run.route.csv"), filepath.Join(dir, "tokens.txt")
	const n = 6
	runPipe(t, "--log-level", "error", "run", "-m", "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf",
		"-p", "The quick brown fox", "-n", "6", "--temp", "0", "--ignore-eos", "--moe-stream=true", "--cache-mb", "2",
		"--route-trace", tr, "--tokens-out", to)
	f, err := os.Open(tr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	trace, err := replay.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	h := trace.Header
	if h.Arch != "qwen3moe" || h.NLayer != 4 || h.NExpert != 8 || h.NExpertUsed != 2 {
		t.Fatalf("header %+v", h)
	}
	toks, _ := os.ReadFile(to)
	nPrompt := len(strings.Split(strings.Split(string(toks), "\n")[0], ","))
	var prefill, decode, resident int
	sums := map[[2]int]float64{}
	for _, r := range trace.Rows {
		if r.Phase == replay.PhasePrefill {
			prefill++
			if r.Step >= nPrompt {
				t.Fatalf("prefill row at step %d of a %d-token prompt", r.Step, nPrompt)
			}
		} else {
			decode++
			if r.Step < nPrompt || r.Step >= nPrompt+n {
				t.Fatalf("decode row at step %d", r.Step)
			}
		}
		if r.Resident {
			resident++
		}
		sums[[2]int{r.Step, r.Layer}] += float64(r.Weight)
	}
	if want := nPrompt * 4 * 2; prefill != want {
		t.Fatalf("%d prefill rows, want %d", prefill, want)
	}
	if want := n * 4 * 2; decode != want {
		t.Fatalf("%d decode rows, want %d", decode, want)
	}
	for k, s := range sums {
		if s < 0.999 || s > 1.001 {
			t.Fatalf("step %d layer %d: weights sum to %v", k[0], k[1], s)
		}
	}
	if resident == 0 {
		t.Fatal("no row was resident although a cache was on")
	}
}
