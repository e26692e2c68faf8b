package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	rtrace "runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/internal/affinity"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/internal/sysmem"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/sink"
	"github.com/pipe-engine/pipe/tokenizer"
	"github.com/pipe-engine/pipe/tools/replay"
)

// RunCmd is `pipe run`: decode a prompt with the streaming pipeline.
type RunCmd struct {
	Model  string `short:"m" help:"GGUF model file (first shard of a split model). Without it, a demo model with real Qwen3-30B-A3B layer shapes is generated once into the user cache directory and used." type:"path" group:"Model"`
	Prompt string `short:"p" help:"Prompt text." default:"The quick brown fox" group:"Prompt"`
	N      int    `short:"n" name:"n-predict" aliases:"predict" help:"Tokens to generate (-1 = until end-of-generation or a full context; the default in -i)." default:"32" group:"Prompt"`
	Thr    int    `short:"t" name:"threads" help:"Compute threads (0 = number of CPUs, or of --cpus)." default:"0" group:"Model"`
	CPUs   string `name:"cpus" help:"Pin the process to these CPUs, e.g. 4-7 or 0,2,4-7 (a phone's big cores; Linux and Android)." placeholder:"LIST" group:"Model"`
	Ctx    int    `short:"c" name:"ctx-size" help:"Context length in tokens (0 = prompt + -n; 4096 in interactive mode)." default:"0" group:"Model"`
	KVType string `name:"kv-type" help:"KV cache element type: f16 (llama.cpp's default) or f32." enum:"f16,f32" default:"f16" group:"Model"`
	Echo   bool   `aliases:"display-prompt" help:"Print the prompt before the generated text." group:"Output"`

	Chat        bool   `help:"Apply the model's chat template (ChatML) to the prompt." group:"Prompt"`
	System      string `aliases:"system-prompt" help:"System message for --chat (llama.cpp: -sys)." group:"Prompt"`
	NoThink     bool   `name:"no-think" help:"Qwen3: an empty think block after the assistant header (implies --chat)." group:"Prompt"`
	Interactive bool   `short:"i" help:"Chat turn by turn from stdin, keeping the model and KV cache loaded (implies --chat; llama.cpp: -cnv)." group:"Prompt"`
	promptTurn  bool   // -p or -f given with -i: the prompt is the first user turn (AfterApply)
	sysChat     bool   // -sys without --chat turned --chat on (applyLlama)
	IgnoreEOS   bool   `name:"ignore-eos" help:"Do not stop at end-of-generation tokens." group:"Prompt"`
	Reasoning   string `help:"Thinking blocks (<think>…</think>) in the printed text: show or hide." enum:"show,hide" default:"show" group:"Prompt"`

	Jinja         bool `help:"Render chats by running the model's tokenizer.chat_template as Jinja (as llama.cpp's --jinja) instead of the built-in ChatML, harmony or Gemma 4 renderer." negatable:"" group:"Prompt"`
	LlamaFlags    `embed:""`
	TemplateFlags `embed:""`
	SamplingFlags `embed:"" group:"Sampling"`
	EngineFlags   `embed:"" group:"Streaming"`
	HotSetFlags   `embed:"" group:"Streaming"`

	CSV        string `help:"Write one row of metrics per generated token to this CSV file, then a '# summary' line." type:"path" group:"Output"`
	Progress   bool   `help:"Show a live per-token status line on stderr when it is a terminal and stdout is not the same one." group:"Output"`
	RouteTrace string `name:"route-trace" help:"Write the routing of every token and layer in route_trace v1 format." type:"path" group:"Output"`

	ForceTokens string `name:"force-tokens" help:"Teacher forcing: comma-separated token ids fed after the prompt instead of the sampled ones (testing)." hidden:""`
	LogitsOut   string `name:"logits-out" help:"Write each step's logits (float32 little-endian rows; row 0 after the prompt) to this file (testing)." type:"path" hidden:""`
	CPUProfile  string `name:"cpuprofile" help:"Write a Go CPU profile of the run to this file (go tool pprof)." type:"path" group:"Output"`
	ExecTrace   string `name:"exec-trace" help:"Write a Go execution trace of the run to this file (go tool trace): when each goroutine ran, blocked and woke, on which P, and its system calls." type:"path" group:"Output"`
	TokensOut   string `name:"tokens-out" help:"Write the prompt token ids and the generated ids (two comma-separated lines) to this file (testing)." type:"path" hidden:""`
}

var errFlag = errors.New("bad flag")

func (c *RunCmd) validate() error {
	switch {
	case c.N < -1:
		return fmt.Errorf("%w: -n %d must be >= 0, or -1 (until end-of-generation or a full context)", errFlag, c.N)
	case c.N > maxPositions:
		return checkPositions("-n", c.N, -1)
	}
	if err := checkPositions("-c", c.Ctx, 0); err != nil {
		return err
	}
	if _, err := affinity.ParseList(c.CPUs); err != nil {
		return fmt.Errorf("%w: --cpus: %w", errFlag, err)
	}
	if err := c.params(0).Validate(); err != nil {
		return fmt.Errorf("%w: %w", errFlag, err)
	}
	if err := c.TemplateLimitFlags.check(); err != nil {
		return err
	}
	return c.EngineFlags.check(threads(c.Thr, c.CPUs))
}

func parseIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: --force-tokens: %q is not a token id", errFlag, f)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

// options turns the flags into the decode loop's options.
func (c *RunCmd) options(g *Globals, path string, demo bool, seed uint64) (decode.Options, error) {
	cfg, err := c.EngineFlags.config(path, threads(c.Thr, c.CPUs), g.Log)
	if err != nil {
		return decode.Options{}, err
	}
	o := decode.Options{Engine: cfg, KV: model.KVF16, Ctx: c.Ctx, AutoCache: demoCache(demo),
		LoadFields: []sink.Field{sink.F("seed", seed)}, HotSet: c.HotSetFlags.options()}
	if c.KVType == "f32" {
		o.KV = model.KVF32
	}
	if !c.Interactive {
		o.Reserve = decode.EstimatePositions(len(c.Prompt)+len(c.System), c.N)
		if c.N < 0 && c.Ctx == 0 {
			o.Ctx = decode.DefaultCtx // -n -1 runs until the context is full
		}
	}
	o.Sink = sink.Options{CSV: c.CSV, Warmup: -1, PeakRSS: sysmem.PeakRSS}
	o.Progress = showProgress(g.Status)
	if see := observeProgress; see != nil {
		show := o.Progress
		o.Progress = func(p decode.Progress) {
			if show != nil {
				show(p)
			}
			see(p)
		}
	}
	if c.Progress && !sameTerminal(g.Stdout, g.Stderr) {
		o.Sink.Progress = sink.NewProgress(g.Status)
	}
	return o, nil
}

// Run implements the command.
func (c *RunCmd) Run(g *Globals) error {
	if err := c.validate(); err != nil {
		return err
	}
	if err := c.applyLlama(g); err != nil {
		return err
	}
	if c.NoThink || c.Interactive {
		c.Chat = true
	}
	var forced []int32
	if c.ForceTokens != "" {
		var err error
		if forced, err = parseIDs(c.ForceTokens); err != nil {
			return err
		}
	}
	path, demo := c.Model, false
	if path == "" {
		p, err := ensureDemo(g)
		if err != nil {
			return err
		}
		path, demo = p, true
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("-m: %w", err)
	}
	// Every output is created before the model is loaded: a bad path fails
	// at once, and none can be an input (the model, -f, the hot set) or
	// another output.
	guard := modelGuard(path)
	if c.File != "" && c.File != "-" {
		guard.Protect("the prompt file -f", c.File)
	}
	hotCheck, err := c.HotSetFlags.protect(guard)
	if err != nil {
		return err
	}
	outs, err := c.openOutputs(guard)
	if err != nil {
		return err
	}
	defer outs.close()
	if err := hotCheck(); err != nil {
		return err
	}
	if outs.profile != nil {
		if err := pprof.StartCPUProfile(outs.profile); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if outs.exec != nil {
		if err := rtrace.Start(outs.exec); err != nil {
			return fmt.Errorf("--exec-trace: %w", err)
		}
		defer rtrace.Stop()
	}
	if cpus, _ := affinity.ParseList(c.CPUs); len(cpus) > 0 {
		if err := affinity.Pin(cpus); err != nil {
			return fmt.Errorf("--cpus: %w", err)
		}
	}
	seed := decode.ResolveSeed(c.Seed)
	o, err := c.options(g, path, demo, seed)
	if err != nil {
		return err
	}
	o.Sink.Create = outs.takeCSV
	m, err := decode.Open(g.Ctx, o)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := c.TemplateFlags.apply(m.Tokenizer(), c.Jinja); err != nil {
		return err
	}
	r := &runner{c: c, g: g, m: m, logits: outs.logits, out: &stdoutWriter{w: g.Stdout}, sameTerm: sameTerminal(g.Stdout, g.Stderr),
		reverse: newReversePrompts(c.Reverse)}
	if outs.trace != nil {
		r.openTrace(path, outs.trace)
	}
	runErr := r.run(decode.SessionOptions{Sampling: c.params(seed), Force: forced, System: c.System, NoThink: c.NoThink})
	g.Status.Release()
	r.closeTrace()
	if outs.tokens != nil {
		fmt.Fprintf(outs.tokens, "%s\n%s\n", joinIDs(r.promptIDs), joinIDs(r.genIDs))
	}
	if outs.profile != nil {
		pprof.StopCPUProfile()
	}
	if outs.exec != nil {
		rtrace.Stop() // waits for the trace's last write
	}
	// A lost output fails the run, and the CSV trailer says so.
	runErr = errors.Join(runErr, outs.close())
	m.Fail(runErr)
	err = errors.Join(runErr, m.Close())
	if !g.JSONLog && r.tm.calls > 0 {
		g.Log.Info().Msg(r.tm.line(steadyOf(m.Summary())))
	}
	if demo && err == nil {
		sayDemoNext(g)
	}
	return err
}

// runOutputs are the run's files (nil when not asked for).
type runOutputs struct {
	csv                            *os.File // until the sink takes it
	logits, trace, tokens, profile *output
	exec                           *output // --exec-trace
}

// takeCSV hands the CSV file to the sink (sink.Options.Create).
func (o *runOutputs) takeCSV(string) (*os.File, error) {
	f := o.csv
	o.csv = nil
	return f, nil
}

// openOutputs creates every output file the flags name.
func (c *RunCmd) openOutputs(guard *safefile.Guard) (*runOutputs, error) {
	o := &runOutputs{}
	for _, x := range []struct {
		flag, path string
		dst        **output
	}{
		{"--csv", c.CSV, nil},
		{"--logits-out", c.LogitsOut, &o.logits},
		{"--route-trace", c.RouteTrace, &o.trace},
		{"--tokens-out", c.TokensOut, &o.tokens},
		{"--cpuprofile", c.CPUProfile, &o.profile},
		{"--exec-trace", c.ExecTrace, &o.exec},
	} {
		if x.path == "" {
			continue
		}
		if x.dst != nil {
			f, err := createOutput(guard, x.flag, x.path)
			if err != nil {
				o.close()
				return nil, err
			}
			*x.dst = f
			continue
		}
		f, err := guard.Create(x.flag, x.path)
		if err != nil {
			o.close()
			return nil, fmt.Errorf("%s: %w", x.flag, err)
		}
		o.csv = f
	}
	return o, nil
}

// close closes every output still open and returns their errors.
func (o *runOutputs) close() error {
	var errs []error
	if o.csv != nil {
		errs = append(errs, o.csv.Close())
		o.csv = nil
	}
	for _, f := range []*output{o.logits, o.trace, o.tokens, o.profile, o.exec} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, v := range ids {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, ",")
}

// runner prints what the decode loop generates and keeps the --tokens-out
// record.
type runner struct {
	c         *RunCmd
	g         *Globals
	m         *decode.Model
	logits    *output       // --logits-out, or nil
	logitsBuf []byte        // one row of --logits-out
	out       *stdoutWriter // the generated text
	trace     *output       // --route-trace, or nil
	traceW    *replay.TraceWriter
	think     *thinkFilter // --reasoning of the reply being printed
	tm        timings      // every decode call so far, for the end-of-run line
	sameTerm  bool         // stdout and stderr are one terminal: log lines wait for the end of a reply
	reverse   *reversePrompts

	promptIDs, genIDs []int32
}

// run decodes once or interactively.
func (r *runner) run(so decode.SessionOptions) error {
	c := r.c
	sess, err := r.m.NewSession(so)
	if err != nil {
		return err
	}
	if c.Interactive {
		return r.chat(sess, so)
	}
	return r.once(sess)
}

func (r *runner) genOptions() decode.GenOptions {
	o := decode.GenOptions{MaxTokens: r.c.N, IgnoreEOS: r.c.IgnoreEOS}
	if r.logits != nil {
		o.OnLogits = r.writeLogits
	}
	return o
}

// print writes each generated token's text to stdout as it comes; a failed
// write, or a failed --route-trace write, ends the run.
func (r *runner) print(t decode.Token) error {
	r.g.Status.Clear() // no progress over the text
	if r.sameTerm {
		r.g.Status.Hold() // nor log lines inside it
	}
	r.genIDs = append(r.genIDs, t.ID)
	if err := r.out.write(t.Text, fmt.Sprintf("token %d", len(r.genIDs))); err != nil {
		return err
	}
	if r.trace != nil && r.trace.Err() != nil {
		return fmt.Errorf("token %d: %w", len(r.genIDs), r.trace.Err())
	}
	if r.reverse.add(t.Text) {
		return decode.ErrStop
	}
	return nil
}

func (r *runner) once(sess *decode.Session) error {
	c := r.c
	given := time.Now() // the prompt is given: the start of the time to first token
	if err := r.fitPrompt(sess, len(c.Prompt)+len(c.System)); err != nil {
		return err
	}
	p := decode.Prompt{Text: c.Prompt, Chat: c.Chat, System: c.System, NoThink: c.NoThink}
	if c.Chat {
		// A chat template can make a short prompt enormous: the rendered
		// text must fit the context too, refused before it is tokenized.
		p.Fit = func(n int) error { return r.fitRendered(sess, n) }
	}
	ids, text, err := r.m.EncodeContext(r.g.Ctx, p)
	if err == nil && c.Chat {
		err = r.fitRenderedTokens(sess, len(ids))
	}
	if err != nil {
		if errors.Is(err, decode.ErrEmptyPrompt) {
			return fmt.Errorf("%w: -p: %w", errFlag, err)
		}
		if c.sysChat && errors.Is(err, tokenizer.ErrUnsupportedTemplate) {
			return fmt.Errorf("%w: -sys needs the model's chat template to place the system message, and pipe cannot render this one (%w); put the system text into -p instead", errFlag, err)
		}
		return err
	}
	r.promptIDs = ids
	if c.Echo {
		r.g.Status.Clear()
		if err := r.out.write(text, "the prompt (--echo)"); err != nil {
			return err
		}
	}
	o := r.genOptions()
	o.Given = given
	res, err := sess.Generate(r.g.Ctx, ids, o, r.print)
	r.tm.add(res)
	if err != nil {
		return err
	}
	err = r.out.write("\n", "the final newline")
	r.g.Status.Release()
	return err
}

// fitPrompt refuses, before it is tokenized, a prompt of n bytes that
// cannot fit the session's context (-c; none yet with -c 0, which sizes the
// context to the prompt).
func (r *runner) fitPrompt(sess *decode.Session, n int) error {
	nCtx := sess.Ctx()
	if err := r.m.FitText(n, nCtx); err != nil {
		if r.c.Ctx > 0 {
			return fmt.Errorf("%w: the prompt: %w (-c %d)", errFlag, err, nCtx)
		}
		return fmt.Errorf("%w: the prompt: %w (%d with -n %d; set -c)", errFlag, err, nCtx, r.c.N)
	}
	return nil
}

// fitRendered refuses, before it is tokenized, a chat-rendered prompt of
// n bytes that cannot fit the session's context or, with -c 0 (a context
// sized to the prompt), the model's trained context.
func (r *runner) fitRendered(sess *decode.Session, n int) error {
	if sess.Ctx() > 0 {
		if err := r.fitPrompt(sess, n); err != nil {
			return fmt.Errorf("%w (after the chat template)", err)
		}
		return nil
	}
	if train := r.m.Engine().Desc().HParams.NCtxTrain; train > 0 {
		if err := r.m.FitText(n, train); err != nil {
			return fmt.Errorf("%w: the prompt rendered by the chat template: %w (the model was trained on %d; set -c to allow more)", errFlag, err, train)
		}
	}
	return nil
}

// fitRenderedTokens refuses, before the prompt pass, a chat-rendered prompt
// of ids tokens that cannot fit -c or, with -c 0, the trained context.
func (r *runner) fitRenderedTokens(sess *decode.Session, ids int) error {
	if nCtx := sess.Ctx(); nCtx > 0 && ids >= nCtx {
		return fmt.Errorf("%w: the prompt rendered by the chat template is %d tokens, the context holds %d", errFlag, ids, nCtx)
	}
	if train := r.m.Engine().Desc().HParams.NCtxTrain; sess.Ctx() == 0 && train > 0 && ids > train {
		return fmt.Errorf("%w: the prompt rendered by the chat template is %d tokens, beyond the %d the model was trained on (set -c to allow it)", errFlag, ids, train)
	}
	return nil
}

func (r *runner) writeLogits(l []float32) error {
	r.logitsBuf = r.logitsBuf[:0]
	for _, v := range l {
		r.logitsBuf = binary.LittleEndian.AppendUint32(r.logitsBuf, math.Float32bits(v))
	}
	if _, err := r.logits.Write(r.logitsBuf); err != nil {
		return fmt.Errorf("step %d: %w", len(r.genIDs), err)
	}
	return nil
}

// stdin is where interactive mode reads turns (tests replace it).
var stdin io.Reader = os.Stdin

// observeProgress, when set, also sees every progress report of `pipe run`
// (tests set it to act at a known point of a prompt pass, not after a sleep).
var observeProgress func(decode.Progress)

// SamplingFlags are the sampler's flags (shared by the commands that decode).
type SamplingFlags struct {
	Temp          float32 `aliases:"temperature" help:"Sampling temperature; 0 = greedy (argmax, lowest id on ties)." default:"0.8"`
	TopK          int     `name:"top-k" help:"Top-k sampling (0 = off)." default:"40"`
	TopP          float32 `name:"top-p" help:"Top-p (nucleus) sampling (1 = off)." default:"0.95"`
	MinP          float32 `name:"min-p" help:"Min-p sampling (0 = off)." default:"0.05"`
	RepeatPenalty float32 `name:"repeat-penalty" help:"Repeat penalty (1 = off)." default:"1.0"`
	RepeatLastN   int     `name:"repeat-last-n" help:"Tokens the repeat penalty looks back over (-1 = all)." default:"64"`
	FreqPenalty   float32 `name:"frequency-penalty" help:"Frequency penalty over the --repeat-last-n window (0 = off)." default:"0"`
	PresPenalty   float32 `name:"presence-penalty" help:"Presence penalty over the --repeat-last-n window (0 = off)." default:"0"`
	Seed          int64   `short:"s" help:"Sampling seed (-1 = random). Same seed, same text." default:"-1"`
}

func (f *SamplingFlags) params(seed uint64) sample.Params {
	return sample.Params{Temp: f.Temp, TopK: f.TopK, TopP: f.TopP, MinP: f.MinP,
		RepeatPenalty: f.RepeatPenalty, RepeatLastN: f.RepeatLastN, FreqPenalty: f.FreqPenalty, PresencePenalty: f.PresPenalty, Seed: seed}
}
