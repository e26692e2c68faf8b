package deepseek4

import (
	"math"

	"github.com/pipe-engine/pipe/model"
)

// gating.go: DeepSeek-V4's router score, llama.cpp's sqrt-softplus gating
// (LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS). No other family uses it, so
// it is this family's model.Scorer in its RouterSpec (model.ScoredTopK):
// package router applies it and knows nothing of DeepSeek-V4.

// routerSpec is layer l's gating rule: √softplus scores, top-k by them plus
// bias (nil on a hash-routed layer), renormalised and scaled as the file
// says.
func routerSpec(hp *model.HParams, k int, bias []float32) model.RouterSpec {
	return model.RouterSpec{Gating: model.ScoredTopK, Score: sqrtSoftplus, NExpert: hp.NExpert, K: k,
		Normalize: hp.MoE.WeightsNorm, Scale: hp.MoE.WeightsScale, Bias: bias}
}

// sqrtSoftplus replaces each x with √softplus(x) as ggml's op_softplus
// (x above 20 kept, else logf(1+expf(x))) and sqrtf compute it.
func sqrtSoftplus(x []float32) {
	for i, v := range x {
		sp := v
		if v <= 20 {
			sp = float32(math.Log(float64(1 + float32(math.Exp(float64(v))))))
		}
		x[i] = float32(math.Sqrt(float64(sp)))
	}
}
