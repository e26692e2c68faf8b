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

// TestGoldenRunsHashRouted holds the golden runs of tiny-deepseek4-hash
// (section 20): the same model with layer 0 routed by token id (an I32
// ffn_gate_tid2eid table in place of its selection bias, as
// DeepSeek-V4-Flash's first three layers), against llama.cpp's runs as
// TestGoldenRuns.
func TestGoldenRunsHashRouted(t *testing.T) {
	goldenruns.Check(t, golden+"/deepseek4-hash", "tiny-deepseek4-hash-F32", "tiny-deepseek4-hash-Q4_K_M")
}
