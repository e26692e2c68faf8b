// Package router turns a layer's router logits into the top-k experts and
// their weights — the first stage of every MoE layer in the decode pipeline.
//
// The gating rule (softmax before or after top-k, renormalisation, k) comes
// from the architecture as a model.RouterSpec; this package knows no
// architecture by name. Selection is a pure function of the logits: ties are
// broken by the lower expert id, so routing — and therefore every stage after
// it — is deterministic. Route writes into caller-owned slices and is safe for
// concurrent use on distinct outputs.
package router

import (
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// Route selects spec.K experts from logits. ids and weights receive K entries
// in rank order (highest first). probs is scratch of len(logits) floats.
func Route(spec model.RouterSpec, logits []float32, ids []int, weights []float32, probs []float32) error {
	n, k := len(logits), spec.K
	if k <= 0 || k > n || len(ids) < k || len(weights) < k || len(probs) < n {
		return fmt.Errorf("router: k=%d of %d experts (ids %d, weights %d, scratch %d)", k, n, len(ids), len(weights), len(probs))
	}
	switch spec.Gating {
	case model.SoftmaxTopK:
		copy(probs, logits[:n])
		model.Softmax(probs[:n])
		topK(probs[:n], ids[:k])
		var sum float64
		for r := 0; r < k; r++ {
			weights[r] = probs[ids[r]]
			sum += float64(weights[r])
		}
		if spec.Normalize {
			s := float32(sum)
			if s < 6.103515625e-5 { // ggml clamps the sum to this minimum
				s = 6.103515625e-5
			}
			for r := 0; r < k; r++ {
				weights[r] /= s
			}
		}
	case model.TopKSoftmax:
		topK(logits[:n], ids[:k])
		for r := 0; r < k; r++ {
			weights[r] = logits[ids[r]]
		}
		model.Softmax(weights[:k])
	default:
		return fmt.Errorf("router: unknown gating %d", spec.Gating)
	}
	return nil
}

// topK writes the indices of the k largest values of v into ids, largest
// first; equal values rank by lower index. NaN ranks last.
func topK(v []float32, ids []int) {
	k := len(ids)
	cnt := 0
	for i, x := range v {
		if math.IsNaN(float64(x)) {
			x = float32(math.Inf(-1))
		}
		// insertion into the sorted prefix ids[:cnt]
		pos := cnt
		for pos > 0 {
			y := v[ids[pos-1]]
			if math.IsNaN(float64(y)) {
				y = float32(math.Inf(-1))
			}
			if y >= x {
				break
			}
			pos--
		}
		if pos >= k {
			continue
		}
		end := cnt
		if end == k {
			end = k - 1
		}
		copy(ids[pos+1:end+1], ids[pos:end])
		ids[pos] = i
		if cnt < k {
			cnt++
		}
	}
}
