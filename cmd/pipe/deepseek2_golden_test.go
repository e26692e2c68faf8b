package main

import "testing"

// The deepseek2 golden runs (testdata/golden/README.md, section 11):
// tiny-deepseek2-{F32,Q4_K_M}, `pipe gen --preset deepseek2-tiny --seed
// 2222` (latent attention with a query bottleneck and YaRN, a dense leading
// layer, sigmoid gating with a selection bias, renormalised and scaled
// weights, expert groups and a shared expert), and tiny-deepseek2-lite-Q4_K_M,
// `--preset deepseek2-lite-tiny --seed 3333` (DeepSeek-V2-Lite's paths: 27
// layers, a plain query projection, softmax gating, two shared experts,
// YaRN ×40), quantized by llama-quantize and run by llama.cpp through
// testdata/golden/tools. They are compared with the qwen3moe bounds
// (goldenTolerance); a quantized run may have one router-tie step up to
// gemma4TieBound.

var deepseek2Models = []string{"tiny-deepseek2-F32", "tiny-deepseek2-Q4_K_M", "tiny-deepseek2-lite-Q4_K_M"}

// TestDeepSeek2GoldenTeacherForced feeds llama.cpp's tokens through `pipe
// run` and compares the logits of every step.
func TestDeepSeek2GoldenTeacherForced(t *testing.T) {
	teacherForced(t, deepseek2Models, gemma4TieBound)
}

// TestDeepSeek2GoldenFreeRunning: greedy continuations equal llama.cpp's
// (up to the first near-tie) streaming and not, at one and two threads.
func TestDeepSeek2GoldenFreeRunning(t *testing.T) {
	freeRunning(t, deepseek2Models,
		[]string{"-t", "1"}, []string{"-t", "2"}, []string{"-t", "2", "--moe-stream=false"}, []string{"-t", "1", "--cache-mb", "1"})
}
