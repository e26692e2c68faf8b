// Package router turns a layer's router logits into the top-k experts and
// their weights — the first stage of every MoE layer in the decode pipeline.
//
// The gating rule (softmax, sigmoid or a family's own score before top-k,
// softmax after it, renormalisation, scale, a selection bias, expert groups,
// k) comes from the architecture as a model.RouterSpec; this package knows no
// architecture by name. A score only one family uses (model.ScoredTopK) is
// the family's function in RouterSpec.Score, kept in the family's folder;
// the gatings here are the ones several families share. Selection is a pure
// function of the logits: ties are broken by the lower expert id, so routing
// — and therefore every stage after it — is deterministic. Route writes into caller-owned slices and is safe for
// concurrent use on distinct outputs.
package router

import (
	"errors"
	"fmt"
	"math"

	"github.com/pipe-engine/pipe/model"
)

// ErrNoScore: Route was given a ScoredTopK spec without its family's Score (a
// static value, so the error path allocates nothing either).
var ErrNoScore = errors.New("router: ScoredTopK gating without a Score")

// ScratchLen is the length of the probs scratch Route needs for spec: one
// float per expert, two when the choice is biased or group-limited.
func ScratchLen(spec model.RouterSpec) int {
	if spec.Bias != nil || spec.Groups > 1 {
		return 2 * spec.NExpert
	}
	return spec.NExpert
}

// Route selects spec.K experts from logits. ids and weights receive K entries
// in rank order (highest first). probs is scratch of ScratchLen(spec) floats
// (for len(logits) experts).
func Route(spec model.RouterSpec, logits []float32, ids []int, weights []float32, probs []float32) error {
	n, k := len(logits), spec.K
	spec.NExpert = n
	if k <= 0 || k > n || len(ids) < k || len(weights) < k || len(probs) < ScratchLen(spec) {
		return fmt.Errorf("router: k=%d of %d experts (ids %d, weights %d, scratch %d)", k, n, len(ids), len(weights), len(probs))
	}
	if spec.Gating == model.TopKSoftmax {
		topK(logits[:n], ids[:k])
	} else {
		p := probs[:n]
		if err := score(spec, logits[:n], p); err != nil {
			return err
		}
		if err := choose(spec, p, probs[n:], ids[:k]); err != nil {
			return err
		}
	}
	weigh(spec, logits[:n], probs[:n], ids[:k], weights[:k])
	return nil
}

// score writes the gate probabilities of logits into p (len(logits)) as
// spec's gating computes them before the choice: softmax, sigmoid or the
// family's Score. TopKSoftmax has none (its softmax follows the choice).
func score(spec model.RouterSpec, logits, p []float32) error {
	switch spec.Gating {
	case model.SoftmaxTopK:
		copy(p, logits)
		model.Softmax(p)
	case model.SigmoidTopK:
		copy(p, logits)
		sigmoid(p)
	case model.ScoredTopK:
		if spec.Score == nil {
			return ErrNoScore
		}
		copy(p, logits)
		spec.Score(p)
	default:
		return fmt.Errorf("router: unknown gating %d", spec.Gating)
	}
	return nil
}

// weigh writes the chosen experts' weights: for TopKSoftmax the softmax of
// their logits, else their gate probabilities p (score's), renormalised when
// spec says; then scaled by spec.Scale.
func weigh(spec model.RouterSpec, logits, p []float32, ids []int, weights []float32) {
	k := len(ids)
	if spec.Gating == model.TopKSoftmax {
		for r := 0; r < k; r++ {
			weights[r] = logits[ids[r]]
		}
		model.Softmax(weights[:k])
	} else {
		var sum float64
		for r := 0; r < k; r++ {
			weights[r] = p[ids[r]]
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
	}
	if spec.Scale != 0 && spec.Scale != 1 {
		for r := 0; r < k; r++ {
			weights[r] *= spec.Scale
		}
	}
}

// sigmoid replaces each x with 1/(1+e^-x) as ggml's op_sigmoid computes it.
func sigmoid(x []float32) {
	for i, v := range x {
		x[i] = 1 / (1 + float32(math.Exp(float64(-v))))
	}
}

// maxGroups bounds Groups (the group scores live on the stack).
const maxGroups = 256

// choose writes the top-k experts by p into ids: by p itself, or — with a
// selection bias or expert groups — by p plus the bias over the experts of
// the best groups, as llama.cpp's build_moe_ffn selects (sel is scratch of
// len(p) floats).
func choose(spec model.RouterSpec, p, sel []float32, ids []int) error {
	if spec.Bias == nil && spec.Groups <= 1 {
		topK(p, ids)
		return nil
	}
	n := len(p)
	sel = sel[:n]
	copy(sel, p)
	if spec.Bias != nil {
		if len(spec.Bias) != n {
			return fmt.Errorf("router: selection bias of %d for %d experts", len(spec.Bias), n)
		}
		for i, b := range spec.Bias {
			sel[i] += b
		}
	}
	if spec.Groups > 1 {
		g, used := spec.Groups, spec.GroupsUsed
		if g > maxGroups || n%g != 0 || n/g < 2 || used <= 0 || used > g {
			return fmt.Errorf("router: %d experts in %d groups, %d used", n, g, used)
		}
		per := n / g
		var scores [maxGroups]float32
		var top2 [2]int
		for gi := 0; gi < g; gi++ {
			grp := sel[gi*per : (gi+1)*per]
			topK(grp, top2[:])
			scores[gi] = grp[top2[0]] + grp[top2[1]]
		}
		var best [maxGroups]int
		topK(scores[:g], best[:used])
		var keep [maxGroups]bool
		for _, gi := range best[:used] {
			keep[gi] = true
		}
		for gi := 0; gi < g; gi++ {
			if !keep[gi] {
				for i := gi * per; i < (gi+1)*per; i++ {
					sel[i] = float32(math.Inf(-1))
				}
			}
		}
	}
	topK(sel, ids)
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
