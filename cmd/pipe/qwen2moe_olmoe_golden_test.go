package main

import "testing"

// The qwen2moe and olmoe golden runs (testdata/golden/README.md, section
// 11): a tiny model per family in F32 and Q4_K_M, weights drawn by `pipe
// gen` with seeds no other test uses, every token id and logit llama.cpp's
// (testdata/golden/tools). Compared with the qwen3moe bounds
// (goldenTolerance) and no router-tie allowance.
var (
	qwen2olmoeF32   = []string{"tiny-qwen2moe-F32", "tiny-olmoe-F32"}
	qwen2olmoeQuant = []string{"tiny-qwen2moe-Q4_K_M", "tiny-olmoe-Q4_K_M"}
	// streamed or mapped experts, one or two threads
	qwen2olmoeVariants = [][]string{{"--moe-stream=false", "-t", "1"}, {"--moe-stream=false", "-t", "2"},
		{"--moe-stream=true", "--cache-mb", "0", "-t", "1"}, {"--moe-stream=true", "-t", "2"}}
)

// TestQwen2OLMoEGoldenTeacherForced feeds llama.cpp's tokens through `pipe
// run` and compares the logits of every step, for every model and prompt.
func TestQwen2OLMoEGoldenTeacherForced(t *testing.T) {
	teacherForced(t, append(append([]string(nil), qwen2olmoeF32...), qwen2olmoeQuant...), 0)
}

// TestQwen2OLMoEGoldenFreeRunning: greedy continuations equal llama.cpp's
// with the experts streamed or mapped, on one or two threads: every token
// on F32, up to the first near-tie on Q4_K_M.
func TestQwen2OLMoEGoldenFreeRunning(t *testing.T) {
	freeRunningAll(t, qwen2olmoeF32, qwen2olmoeVariants...)
	freeRunning(t, qwen2olmoeQuant, qwen2olmoeVariants...)
}
