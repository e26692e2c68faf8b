package quality

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// KLResult is a KL-divergence run's outcome against its base (the means
// over every scored position; uncertainties as llama-perplexity prints
// them).
type KLResult struct {
	Chunks, NCtx, Tokens int
	PPL, PPLErr          float64 // this run's perplexity over the base's text
	PPLBase, PPLBaseErr  float64 // the base's
	LnRatio, LnRatioErr  float64 // mean ln(PPL/PPL_base)
	KLD, KLDErr          float64 // mean KL(base ‖ this), nats
	KLDMax, KLDMedian    float64
	SameTop, SameTopErr  float64 // fraction of positions with the base's top-1 token
	PDiffRMS             float64 // RMS of p(token) − p_base(token)
	Elapsed              time.Duration
}

// DPPL is PPL − PPL_base.
func (r KLResult) DPPL() float64 { return r.PPL - r.PPLBase }

// meanErr is llama-perplexity's mean_and_uncertainty.
func meanErr(sum, sum2 float64, count int) (float64, float64) {
	if count < 1 {
		return 0, 0
	}
	f := sum / float64(count)
	df := sum2/float64(count) - float64(f*f)
	if df > 0 && count > 10 {
		return f, math.Sqrt(df / float64(count-1))
	}
	return f, 0
}

// covariance is llama-perplexity's covariance.
func covariance(a, b, ab float64, count int) float64 {
	if count < 10 {
		return 0
	}
	n := float64(count)
	return (ab/n - float64((a/n)*(b/n))) / (n - 1)
}

// KLDivergence evaluates the base's tokens chunk by chunk and compares each
// scored position with the base's log-probabilities, printing
// llama-perplexity's --kl-divergence table and statistics to o.Out. o.NCtx
// and o.Chunks are ignored: the base fixes both.
func KLDivergence(ctx context.Context, ev Evaluator, base *Base, o Options) (KLResult, error) {
	o.NCtx = base.NCtx
	if err := o.check(); err != nil {
		return KLResult{}, err
	}
	if o.NVocab != base.NVocab {
		return KLResult{}, fmt.Errorf("%w: %s has a vocabulary of %d, the model %d", ErrBaseFile, base.name, base.NVocab, o.NVocab)
	}
	n := base.NCtx
	per := n - 1 - first(n)
	res := KLResult{Chunks: base.NChunk, NCtx: n}
	kldV := make([]float32, 0, per*base.NChunk)
	pdV := make([]float32, 0, per*base.NChunk)
	lp := LogProbs{Q: make([]uint16, o.NVocab)}
	var k klSums
	c := &chunker{ev: ev, o: &o, tokens: base.Tokens, t0: time.Now()}
	out := &printer{w: o.Out}
	out.printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p\n")
	for i := 0; i < base.NChunk; i++ {
		err := c.run(ctx, i, func(row []float32, t int32) error {
			if err := base.row(&lp, i); err != nil {
				return err
			}
			kv, pd := k.compare(row, &lp, t)
			kldV = append(kldV, float32(kv))
			pdV = append(pdV, pd)
			return nil
		})
		if err != nil {
			return res, err
		}
		k.chunkLine(out, i)
		ppl, _ := meanErr(k.nll, k.nll2, k.count)
		c.report(i, base.NChunk, math.Exp(ppl))
	}
	out.printf("\n")
	res.Tokens, res.Elapsed = k.count, time.Since(c.t0)
	k.fill(&res, kldV)
	if k.count >= 100 { // llama-perplexity prints no statistics of fewer
		k.statistics(out, kldV, pdV)
	}
	return res, out.err
}

// printer writes formatted lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// logPPL are the run's and the base's mean log-perplexities and their
// covariance.
func (k *klSums) logPPL() (lp, lpErr, lb, lbErr, cov float64) {
	lp, lpErr = meanErr(k.nll, k.nll2, k.count)
	lb, lbErr = meanErr(k.nllBase, k.nllBase2, k.count)
	cov = covariance(k.nll, k.nllBase, k.nllNllBase, k.count)
	return
}

func (k *klSums) ratio() (float64, float64) {
	lp, lpErr, lb, lbErr, cov := k.logPPL()
	return lp - lb, math.Sqrt(float64(lpErr*lpErr) + float64(lbErr*lbErr) - float64(2*cov))
}

func (k *klSums) pDiffRMS() (float64, float64) {
	mse, mseErr := meanErr(k.pDiff2, k.pDiff4, k.count)
	rms := math.Sqrt(mse)
	return rms, 0.5 / rms * mseErr
}

func (k *klSums) sameTop() (float64, float64) {
	p := float64(k.nSameTop) / float64(k.count)
	return p, math.Sqrt(p * (1 - p) / float64(k.count-1))
}

// chunkLine prints one row of the per-chunk table.
func (k *klSums) chunkLine(out *printer, i int) {
	lp, lpErr, _, _, _ := k.logPPL()
	ppl := math.Exp(lp)
	r, rErr := k.ratio()
	kl, klErr := meanErr(k.kld, k.kld2, k.count)
	rms, rmsErr := k.pDiffRMS()
	top, topErr := k.sameTop()
	out.printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
		i+1, ppl, ppl*lpErr, r, rErr, kl, klErr, 100*rms, 100*rmsErr, 100*top, 100*topErr)
}

// fill sets res's numbers from the sums.
func (k *klSums) fill(res *KLResult, kldV []float32) {
	lp, lpErr, lb, lbErr, _ := k.logPPL()
	res.PPL, res.PPLBase = math.Exp(lp), math.Exp(lb)
	res.PPLErr, res.PPLBaseErr = res.PPL*lpErr, res.PPLBase*lbErr
	res.LnRatio, res.LnRatioErr = k.ratio()
	res.KLD, res.KLDErr = meanErr(k.kld, k.kld2, k.count)
	res.PDiffRMS, _ = k.pDiffRMS()
	res.SameTop, res.SameTopErr = k.sameTop()
	if len(kldV) > 0 {
		s := slices.Clone(kldV)
		slices.Sort(s)
		res.KLDMax, res.KLDMedian = float64(s[len(s)-1]), float64(median(s))
	}
}

// median of sorted v, as llama-perplexity takes it.
func median(v []float32) float32 {
	n := len(v)
	if n%2 == 0 {
		return 0.5 * (v[n/2] + v[n/2-1])
	}
	return v[n/2]
}

// percentile of sorted v, llama-perplexity's interpolation in float32.
func percentile(v []float32, fraction float32) float32 {
	if fraction <= 0 {
		return v[0]
	}
	if fraction >= 1 {
		return v[len(v)-1]
	}
	p := float32(fraction * float32(len(v)-1))
	ip := int(p)
	p -= float32(ip)
	return float32((1-p)*v[ip]) + float32(p*v[min(ip+1, len(v)-1)])
}

// statistics prints llama-perplexity's closing blocks.
func (k *klSums) statistics(out *printer, kldV, pdV []float32) {
	slices.Sort(kldV)
	slices.Sort(pdV)
	lp, lpErr, lb, lbErr, cov := k.logPPL()
	ppl, pplB := math.Exp(lp), math.Exp(lb)
	pplErr, pplBErr := ppl*lpErr, pplB*lbErr
	out.printf("====== Perplexity statistics ======\n")
	out.printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, pplErr)
	out.printf("Mean PPL(base)                : %10.6f ± %10.6f\n", pplB, pplBErr)
	out.printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100*cov/(lpErr*lbErr))
	r, rErr := k.ratio()
	out.printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r, rErr)
	er := math.Exp(r)
	out.printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", er, er*rErr)
	pcov := float64(ppl * pplB * cov)
	out.printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", ppl-pplB, math.Sqrt(float64(pplErr*pplErr)+float64(pplBErr*pplBErr)-float64(2*pcov)))
	out.printf("\n====== KL divergence statistics ======\n")
	kl, klErr := meanErr(k.kld, k.kld2, k.count)
	out.printf("Mean    KLD: %10.6f ± %10.6f\n", kl, klErr)
	out.printf("Maximum KLD: %10.6f\n", kldV[len(kldV)-1])
	for _, q := range []struct {
		label string
		f     float32
	}{{"99.9%", 0.999}, {"99.0%", 0.990}, {"95.0%", 0.950}, {"90.0%", 0.900}} {
		out.printf("%-6s  KLD: %10.6f\n", q.label, percentile(kldV, q.f))
	}
	out.printf("Median  KLD: %10.6f\n", median(kldV))
	for _, q := range []struct {
		label string
		f     float32
	}{{"10.0%", 0.100}, {" 5.0%", 0.050}, {" 1.0%", 0.010}, {" 0.1%", 0.001}} {
		out.printf("%-6s  KLD: %10.6f\n", q.label, percentile(kldV, q.f))
	}
	out.printf("Minimum KLD: %10.6f\n", kldV[0])
	out.printf("\n====== Token probability statistics ======\n")
	pd, pdErr := meanErr(k.pDiff, k.pDiff2, k.count)
	out.printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100*pd, 100*pdErr)
	out.printf("Maximum Δp: %6.3f%%\n", 100*pdV[len(pdV)-1])
	for _, q := range []struct {
		label string
		f     float32
	}{{"99.9%", 0.999}, {"99.0%", 0.990}, {"95.0%", 0.950}, {"90.0%", 0.900}, {"75.0%", 0.750}} {
		out.printf("%s   Δp: %6.3f%%\n", q.label, 100*percentile(pdV, q.f))
	}
	out.printf("Median  Δp: %6.3f%%\n", 100*median(pdV))
	for _, q := range []struct {
		label string
		f     float32
	}{{"25.0%", 0.250}, {"10.0%", 0.100}, {" 5.0%", 0.050}, {" 1.0%", 0.010}, {" 0.1%", 0.001}} {
		out.printf("%s   Δp: %6.3f%%\n", q.label, 100*percentile(pdV, q.f))
	}
	out.printf("Minimum Δp: %6.3f%%\n", 100*pdV[0])
	rms, rmsErr := k.pDiffRMS()
	out.printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100*rms, 100*rmsErr)
	top, topErr := k.sameTop()
	out.printf("Same top p: %6.3f ± %5.3f %%\n", 100*top, 100*topErr)
}
