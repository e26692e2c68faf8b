package quality

import (
	"math"
)

// The three per-position scores of llama-perplexity (tools/perplexity), each
// with its float32/float64 arithmetic as the C++ has it: C's float
// expressions round to float32 at every operation, sums of exponentials are
// doubles, and logf/log results are narrowed where the C++ stores them in a
// float. Matching them operation for operation keeps pipe's printed numbers
// equal to llama-perplexity's given equal logits.

// expf is C's expf: float32 in, float32 out, correctly rounded (glibc's
// expf is within half an ulp; the float64 exp rounded once differs from it
// only in the rarest ties).
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// maxOf returns the largest logit and its first index.
func maxOf(logits []float32) (float32, int) {
	m, im := logits[0], 0
	for i := 1; i < len(logits); i++ {
		if logits[i] > m {
			m, im = logits[i], i
		}
	}
	return m, im
}

// sumExp is Σ expf(logits[i] − max) in float64.
func sumExp(logits []float32, max float32) float64 {
	var s float64
	for _, v := range logits {
		s += float64(expf(v - max))
	}
	return s
}

// nll is −log p(tok) of one row as llama-perplexity's plain perplexity
// computes it (log_softmax(n_vocab, logits, tok)): the logit difference in
// float32, log of the double sum in float64.
func nll(logits []float32, tok int32) float64 {
	m, _ := maxOf(logits)
	s := sumExp(logits, m)
	return -(float64(logits[tok]-m) - math.Log(s))
}

// LogProbs is one position's log-probabilities as llama-perplexity saves them
// in a --kl-divergence-base file: Scale and Min (two float32 in the first four
// uint16 of the row), then one uint16 per token, log p ≈ Scale·q + Min, over
// the 16 nats below the top logit.
type LogProbs struct {
	Scale, Min float32
	Q          []uint16
}

// nearestInt is llama-perplexity's nearest_int: round half to even through
// the float32 magic-number trick (valid for |x| < 2^22).
func nearestInt(x float32) int32 {
	v := x + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// quantize fills lp with the row's log-probabilities (its Q must have
// len(logits) entries) and returns −log p(tok) with the C++'s float32
// arithmetic (log_softmax(n_vocab, logits, log_prob, tok)).
func quantize(logits []float32, tok int32, lp *LogProbs) float64 {
	mx, mn := logits[0], logits[0]
	for _, v := range logits[1:] {
		mx = max(mx, v)
		mn = min(mn, v)
	}
	mn = max(mn, mx-16)
	s := sumExp(logits, mx)
	logSum := float32(math.Log(s))
	lp.Min = mn - mx - logSum
	lp.Scale = (mx - mn) / 65535
	if lp.Scale != 0 {
		inv := 1 / lp.Scale
		for i, v := range logits {
			lp.Q[i] = 0
			if v > mn {
				lp.Q[i] = uint16(nearestInt(float32(inv * (v - mn))))
			}
		}
	} else {
		clear(lp.Q)
	}
	return float64(mx + logSum - logits[tok])
}

// klSums are llama-perplexity's kl_divergence_result: running sums over the
// scored positions.
type klSums struct {
	nll, nll2, nllBase, nllBase2, nllNllBase float64
	kld, kld2                                float64
	pDiff, pDiff2, pDiff4                    float64
	maxPDiff                                 float32
	nSameTop, count                          int
}

// compare scores one row against the base's log-probabilities of the same
// position (llama-perplexity's log_softmax(…, base_log_prob, tok, kld)) and
// returns the position's KL divergence and Δp.
func (k *klSums) compare(logits []float32, base *LogProbs, tok int32) (float64, float32) {
	mx, imax := maxOf(logits)
	logSum := float32(math.Log(sumExp(logits, mx)))
	nll := mx + logSum - logits[tok]
	k.nll += float64(nll)
	k.nll2 += float64(nll * nll)
	nllBase := -(float32(base.Scale*float32(base.Q[tok])) + base.Min)
	k.nllBase += float64(nllBase)
	k.nllBase2 += float64(nllBase * nllBase)
	k.nllNllBase += float64(nll * nllBase)

	mx += logSum
	var sum float64
	imaxBase := -1
	var pMax float32
	for i, q := range base.Q {
		pl := float32(base.Scale*float32(q)) + base.Min
		if i == 0 || pl > pMax {
			pMax, imaxBase = pl, i
		}
		if pl > -16 {
			sum += float64(expf(pl) * (pl - logits[i] + mx))
		}
	}
	k.kld += sum
	k.kld2 += float64(sum * sum)
	k.count++
	if imax == imaxBase {
		k.nSameTop++
	}
	pd := expf(-nll) - expf(-nllBase)
	k.pDiff += float64(pd)
	d2 := float64(pd * pd)
	k.pDiff2 += d2
	k.pDiff4 += float64(d2 * d2)
	k.maxPDiff = max(k.maxPDiff, float32(math.Abs(float64(pd))))
	return sum, pd
}
