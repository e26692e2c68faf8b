package deepseek2

import (
	"errors"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

// TestRouterSpec: the gating llama.cpp picks from the metadata: softmax for
// a file without expert_gating_func, except GLM-4.7-Flash's shape (47 or 48
// layers, 154880 tokens), which is sigmoid; 1 and 2 as stored; the other
// gating functions refused.
func TestRouterSpec(t *testing.T) {
	for _, c := range []struct {
		gating, layers, vocab int
		want                  model.Gating
		err                   error
	}{
		{0, 27, 102400, model.SoftmaxTopK, nil},
		{0, 47, 154880, model.SigmoidTopK, nil},
		{0, 48, 154880, model.SigmoidTopK, nil},
		{0, 48, 102400, model.SoftmaxTopK, nil},
		{1, 47, 154880, model.SoftmaxTopK, nil},
		{2, 27, 102400, model.SigmoidTopK, nil},
		{3, 27, 102400, 0, model.ErrUnsupportedArch},
	} {
		hp := model.HParams{NLayer: c.layers, NVocab: c.vocab, NExpert: 64}
		hp.MoE.GatingFunc = c.gating
		s, err := routerSpec(hp, 6)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%+v: %v, want %v", c, err, c.err)
			}
			continue
		}
		if err != nil || s.Gating != c.want || s.K != 6 || s.NExpert != 64 {
			t.Errorf("%+v: %+v, %v", c, s, err)
		}
	}
}
