package minimaxm2_test

import (
	"testing"

	"github.com/pipe-engine/pipe/decode/goldenruns"
)

// TestGoldenRuns holds the minimax-m2 golden runs
// (testdata/golden/README.md, section 17): tiny-minimax-m2-{F32,Q4_K_M},
// `pipe gen --preset minimax-m2-tiny --seed 6262` quantized by
// llama-quantize and run by llama.cpp through testdata/golden/tools,
// against the library decode loop on the engine, with the bounds every
// family's golden runs use (goldenruns.Check).
func TestGoldenRuns(t *testing.T) {
	goldenruns.Check(t, golden, "tiny-minimax-m2-F32", "tiny-minimax-m2-Q4_K_M")
}
