package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/internal/affinity"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/internal/status"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/tools/quality"
)

// PerplexityCmd is `pipe perplexity`: llama-perplexity's perplexity and KL
// divergence, on the streaming engine (package quality).
type PerplexityCmd struct {
	Model  string `short:"m" required:"" help:"GGUF model file (first shard of a split model)." type:"existingfile" group:"Model"`
	File   string `short:"f" name:"file" help:"Text to evaluate (a final newline is dropped, as llama-perplexity does); not needed with --kl-divergence, whose base holds its tokens." type:"path"`
	Ctx    int    `short:"c" name:"ctx-size" help:"Tokens per chunk; the second half of each chunk is scored (llama-perplexity's -c)." default:"512" group:"Model"`
	Chunks int    `name:"chunks" help:"Evaluate at most this many chunks (-1 = all)." default:"-1"`
	Thr    int    `short:"t" name:"threads" help:"Compute threads (0 = number of CPUs, or of --cpus)." default:"0" group:"Model"`
	CPUs   string `name:"cpus" help:"Pin the process to these CPUs, e.g. 4-7 or 0,2,4-7 (Linux and Android)." placeholder:"LIST" group:"Model"`
	KVType string `name:"kv-type" help:"KV cache element type: f16 (llama.cpp's default) or f32." enum:"f16,f32" default:"f16" group:"Model"`

	KLBase string `name:"kl-divergence-base" aliases:"save-all-logits" help:"Without --kl-divergence: save every scored position's log-probabilities here (llama-perplexity's format, readable by either program). With it: the base to compare against." type:"path"`
	Batch  int    `name:"score-batch" help:"Tokens per forward pass: 0 = a chunk in one prompt pass; 1 = one token a pass, as decode runs (the passes the lossy modes --moe-* apply to, so any of them makes it 1)." default:"0"`
	KL     bool   `name:"kl-divergence" help:"Compare this run's logits with the --kl-divergence-base file: KL divergence, same top-1 token, ln(PPL/PPL_base), as llama-perplexity --kl-divergence prints them."`

	EngineFlags `embed:"" group:"Streaming"`
}

func (c *PerplexityCmd) validate() error {
	switch {
	case c.Ctx < 4:
		return fmt.Errorf("%w: -c %d must be >= 4", errFlag, c.Ctx)
	case c.Chunks == 0 || c.Chunks < -1:
		return fmt.Errorf("%w: --chunks %d must be -1 (all) or >= 1", errFlag, c.Chunks)
	case c.Ctx > maxPositions:
		return checkPositions("-c", c.Ctx, 4)
	case c.Batch < 0:
		return fmt.Errorf("%w: --score-batch %d must be >= 0", errFlag, c.Batch)
	case c.KL && c.KLBase == "":
		return fmt.Errorf("%w: --kl-divergence needs --kl-divergence-base FILE (the base's log-probabilities)", errFlag)
	case !c.KL && c.File == "":
		return fmt.Errorf("%w: -f FILE: the text to evaluate", errFlag)
	}
	if _, err := affinity.ParseList(c.CPUs); err != nil {
		return fmt.Errorf("%w: --cpus: %w", errFlag, err)
	}
	return c.EngineFlags.check(threads(c.Thr, c.CPUs))
}

// threads is -t: with -t 0, the number of --cpus, or 0 without them
// (stages.Config's default: the number of CPUs).
func threads(t int, cpuList string) int {
	if t != 0 {
		return t
	}
	cpus, _ := affinity.ParseList(cpuList)
	return len(cpus)
}

// Run implements the command.
func (c *PerplexityCmd) Run(g *Globals) error {
	if err := c.validate(); err != nil {
		return err
	}
	guard := modelGuard(c.Model)
	var text string
	if c.File != "" && !c.KL {
		b, err := safefile.ReadFile(c.File)
		if err != nil {
			return fmt.Errorf("%w: -f: %w", errFlag, err)
		}
		text = strings.TrimSuffix(string(b), "\n")
		guard.Protect("the text -f", c.File)
	}
	var base *quality.Base
	var save *output
	switch {
	case c.KL:
		f, err := safefile.OpenInput(c.KLBase)
		if err != nil {
			return fmt.Errorf("--kl-divergence-base: %w", err)
		}
		defer f.Close()
		if base, err = quality.OpenBase(f, c.KLBase); err != nil {
			return err
		}
	case c.KLBase != "":
		var err error
		if save, err = createOutput(guard, "--kl-divergence-base", c.KLBase); err != nil {
			return err
		}
		defer save.Close()
	}
	if cpus, _ := affinity.ParseList(c.CPUs); len(cpus) > 0 {
		if err := affinity.Pin(cpus); err != nil {
			return fmt.Errorf("--cpus: %w", err)
		}
	}
	nCtx := c.Ctx
	if base != nil {
		nCtx = base.NCtx
	}
	m, err := c.open(g, nCtx)
	if err != nil {
		return err
	}
	defer m.Close()
	err = c.evaluate(g, m, text, base, save)
	if save != nil {
		err = errors.Join(err, save.Close())
	}
	m.Fail(err)
	return errors.Join(err, m.Close())
}

// open loads the model with a KV cache of nCtx positions.
func (c *PerplexityCmd) open(g *Globals, nCtx int) (*decode.Model, error) {
	cfg, err := c.EngineFlags.config(c.Model, threads(c.Thr, c.CPUs), g.Log)
	if err != nil {
		return nil, err
	}
	o := decode.Options{Engine: cfg, KV: model.KVF16, Ctx: nCtx}
	if c.KVType == "f32" {
		o.KV = model.KVF32
	}
	o.Progress = showProgress(g.Status, decode.PhaseLoad)
	return decode.Open(g.Ctx, o)
}

// evaluate runs perplexity over text, or KL divergence against base, and
// adds the results to the run summary.
func (c *PerplexityCmd) evaluate(g *Globals, m *decode.Model, text string, base *quality.Base, save *output) error {
	tok := m.Tokenizer()
	sess, err := m.NewSession(decode.SessionOptions{Sampling: sample.Params{RepeatPenalty: 1, TopP: 1}}) // samples nothing
	if err != nil {
		return err
	}
	ev := &evaluator{s: sess, batch: c.Batch}
	if m.Engine().Config().Lossy.On() {
		ev.batch = 1
	}
	o := quality.Options{NCtx: c.Ctx, Chunks: c.Chunks, AddBOS: tok.AddBOS(), BOS: tok.BOS(), NVocab: tok.NVocab(),
		Out: g.Stdout}
	o.OnChunk = func(ci quality.ChunkInfo) {
		g.Log.Info().Str("event", "chunk").Int("chunk", ci.Chunk).Int("chunks", ci.Chunks).Float64("ppl", ci.PPL).
			Float64("elapsed_s", ci.Elapsed.Seconds()).Msg("chunk")
		g.Status.Update(func() string { return chunkText(ci) })
	}
	defer g.Status.Clear()
	if base != nil {
		res, err := quality.KLDivergence(g.Ctx, ev, base, o)
		m.SetSummary("mode", "kl-divergence")
		klSummary(m, res)
		return err
	}
	var w io.Writer
	if save != nil {
		w = save
	}
	ids := tok.Encode(text, true, false)
	g.Log.Info().Str("event", "tokenized").Int("tokens", len(ids)).Int("n_ctx", c.Ctx).Msg("tokenized")
	res, err := quality.Perplexity(g.Ctx, ev, ids, o, w)
	m.SetSummary("mode", "perplexity")
	pplSummary(m, res)
	return err
}

// chunkText is the status line after a chunk.
func chunkText(ci quality.ChunkInfo) string {
	frac := float64(ci.Chunk) / float64(max(ci.Chunks, 1))
	eta := ci.Elapsed.Seconds() / frac * (1 - frac)
	return fmt.Sprintf("chunks   %s %d/%d  PPL %.4f  ETA %.0f s", status.Bar(frac, 24), ci.Chunk, ci.Chunks, ci.PPL, eta)
}

func pplSummary(m *decode.Model, r quality.Result) {
	m.SetSummary("n_ctx", r.NCtx)
	m.SetSummary("chunks", r.Chunks)
	m.SetSummary("scored_tokens", r.Tokens)
	if r.Tokens > 0 {
		m.SetSummary("ppl", r.PPL)
		m.SetSummary("ppl_err", r.PPLErr)
	}
	evalSummary(m, r.Chunks*r.NCtx, r.Elapsed.Seconds())
}

func klSummary(m *decode.Model, r quality.KLResult) {
	m.SetSummary("n_ctx", r.NCtx)
	m.SetSummary("chunks", r.Chunks)
	m.SetSummary("scored_tokens", r.Tokens)
	if r.Tokens > 0 {
		for _, kv := range []struct {
			k string
			v float64
		}{{"ppl", r.PPL}, {"ppl_base", r.PPLBase}, {"dppl", r.DPPL()}, {"ln_ppl_ratio", r.LnRatio},
			{"kld", r.KLD}, {"kld_err", r.KLDErr}, {"kld_median", r.KLDMedian}, {"kld_max", r.KLDMax},
			{"same_top_pct", 100 * r.SameTop}, {"p_diff_rms_pct", 100 * r.PDiffRMS}} {
			m.SetSummary(kv.k, kv.v)
		}
	}
	evalSummary(m, r.Chunks*r.NCtx, r.Elapsed.Seconds())
}

// evalSummary adds the evaluation's rate and expert I/O to the summary:
// its forward passes are prompt passes (Session.Score), so their lookups
// are the counters' Prompt ones.
func evalSummary(m *decode.Model, tokens int, s float64) {
	m.SetSummary("eval_s", s)
	if s > 0 {
		m.SetSummary("eval_tok_s", float64(tokens)/s)
	}
	c := m.Engine().Metrics().Counters
	if !c.Streaming {
		return
	}
	m.SetSummary("eval_read_MiB", float64(c.ReadBytes)/(1<<20))
	if tokens > 0 {
		m.SetSummary("eval_MiB_per_token", float64(c.ReadBytes)/(1<<20)/float64(tokens))
	}
	if pct, ok := c.Prompt.HitPct(); ok && c.Cached {
		m.SetSummary("eval_hit_pct", pct)
	}
}

// evaluator is a decode session as a quality.Evaluator, batch tokens a
// forward pass.
type evaluator struct {
	s     *decode.Session
	batch int
}

func (e *evaluator) Eval(ctx context.Context, tokens []int32, from int, fn func(int, []float32) error) error {
	_, err := e.s.Score(ctx, tokens, from, e.batch, fn)
	return err
}
