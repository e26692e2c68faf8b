package bailingmoe3

// clamp.go: the SwiGLU limits of swiglu_clamp_exp and swiglu_clamp_shexp
// (llama.cpp's build_moe_ffn and build_ffn for a layer whose limit is
// above 1e-6): up clamped to [−L, L], silu(gate) clamped to at most L,
// then their product (ggml_clamp, ggml_silu, ggml_mul instead of the fused
// ggml_swiglu_split). The routed experts take the limit of their layer:
// the model keeps one model.Experts per distinct limit and hands each
// layer's experts to the one of its limit.

import (
	"github.com/pipe-engine/pipe/model"
)

// clampEps is llama.cpp's threshold: a limit at most this is no limit.
const clampEps = 1e-6

// swiGLU is the SwiGLU of a layer with limit (none when ≤ clampEps).
func swiGLU(limit float32) model.Activation {
	if limit <= clampEps {
		return model.SwiGLU
	}
	return func(out, gate, up []float32) {
		for i, g := range gate {
			s := min(model.SiLU(g), limit)
			u := min(max(up[i], -limit), limit)
			out[i] = s * u
		}
	}
}

// limit is layer l's entry of a per-layer limit list (0 when absent).
func (h HParams) limit(list []float32, l int) float32 {
	if l < 0 || l >= len(list) {
		return 0
	}
	return list[l]
}

// clampExperts gives every layer with a routed-expert limit its clamped
// model.Experts (one per distinct limit, sharing the layers' description).
func (m *Model) clampExperts(own HParams) {
	byLimit := map[float32]*model.Experts{}
	m.clamped = make([]*model.Experts, len(m.ByLayer))
	for l := range m.clamped {
		L := own.limit(own.ClampExp, l)
		if L <= clampEps || !m.ByLayer[l].HasExperts {
			continue
		}
		x, ok := byLimit[L]
		if !ok {
			c := *m.Experts
			c.Act = swiGLU(L)
			x = &c
			byLimit[L] = x
		}
		m.clamped[l] = x
	}
}

// experts are layer l's routed experts.
func (m *Model) experts(l int) *model.Experts {
	if l >= 0 && l < len(m.clamped) && m.clamped[l] != nil {
		return m.clamped[l]
	}
	return m.Experts
}

// ComputeExpert implements model.ExpertFFN with layer l's SwiGLU limit.
func (m *Model) ComputeExpert(l, e int, parts [][]byte, n int, in, out []float32, s *model.Scratch) error {
	return m.experts(l).ComputeExpert(l, e, parts, n, in, out, s)
}

// ComputeExperts implements model.BatchExpertFFN with layer l's SwiGLU
// limit.
func (m *Model) ComputeExperts(l int, work []model.ExpertWork, s *model.Scratch) error {
	return m.experts(l).ComputeExperts(l, work, s)
}
