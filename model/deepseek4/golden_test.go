package deepseek4_test

import (
	"testing"

	"github.com/pipe-engine/pipe/decode/goldenruns"
)

// TestGoldenRuns holds the deepseek4 golden runs (testdata/golden/README.md,
// section 20): tiny-deepseek4-{F32,Q4_K_M}, `pipe gen --preset
// deepseek4-tiny --seed 84127` quantized by llama-quantize and run by
// llama.cpp through testdata/golden/tools, against the library decode loop
// on the engine (streaming at one and two threads, mmap'd, a 1 MiB cache),
// with the bounds every family's golden runs use (goldenruns.Check), every
// greedy token equal to llama.cpp's (on the quantized file up to the
// first near-tie).
func TestGoldenRuns(t *testing.T) {
	goldenruns.Check(t, golden, "tiny-deepseek4-F32", "tiny-deepseek4-Q4_K_M")
}
