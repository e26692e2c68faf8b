package nemotronh_test

import (
	"testing"

	"github.com/pipe-engine/pipe/decode/goldenruns"
)

// TestGoldenRuns holds the nemotron_h_moe golden runs
// (testdata/golden/README.md, section 19): tiny-nemotron-h-moe-{F32,Q4_K_M},
// `pipe gen --preset nemotron-h-moe-tiny --seed 7319` quantized by
// llama-quantize and run by llama.cpp through testdata/golden/tools,
// against the library decode loop on the engine (streaming at one and two
// threads, mmap'd, a 1 MiB cache), with the bounds every family's golden
// runs use (goldenruns.Check).
func TestGoldenRuns(t *testing.T) {
	goldenruns.Check(t, golden, "tiny-nemotron-h-moe-F32", "tiny-nemotron-h-moe-Q4_K_M")
}
