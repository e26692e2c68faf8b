package main

import "testing"

// qwen35moeModels are the qwen35moe golden models: qwen35moe-tiny generated
// by `pipe gen` (seed 90417, not used by any other test), run through
// llama.cpp by testdata/golden/tools (section 11 of its README).
var qwen35moeModels = []string{"tiny-qwen35moe-F32", "tiny-qwen35moe-Q8_0", "tiny-qwen35moe-Q4_K_M"}

// TestQwen35MoEGoldenTeacherForced compares every step's logits with
// llama.cpp's under the qwen3moe bounds (goldenTolerance), for both models
// and every prompt (prompt passes and single-token steps both run the
// delta-net recurrence and the gated attention).
func TestQwen35MoEGoldenTeacherForced(t *testing.T) {
	teacherForced(t, qwen35moeModels, goldenTolerance("-Q4_K_M")) // no router-tie allowance
}

// TestQwen35MoEGoldenFreeRunning: greedy continuations equal llama.cpp's
// (F32: every token; Q4_K_M: up to the first near-tie), streaming and not,
// on one thread and two (model/qwen35moe's TestPassesAgree shows a prompt
// fed in chunks gives the same bits).
func TestQwen35MoEGoldenFreeRunning(t *testing.T) {
	freeRunning(t, qwen35moeModels, []string{"-t", "2"}, []string{"--moe-stream=false", "-t", "1"})
}
