package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/gptoss"   // registers gpt-oss
	_ "github.com/pipe-engine/pipe/model/qwen3moe" // registers qwen3moe
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/sink"
	"github.com/pipe-engine/pipe/stages"
	"github.com/pipe-engine/pipe/tokenizer"
)

// RunCmd is `pipe run`: decode a prompt with the streaming pipeline.
type RunCmd struct {
	Model  string `short:"m" help:"GGUF model file (first shard of a split model). Without it, a demo model with real Qwen3-30B-A3B layer shapes is generated once into the user cache directory and used." type:"path"`
	Prompt string `short:"p" help:"Prompt text." default:"The quick brown fox"`
	N      int    `short:"n" name:"n-predict" help:"Tokens to generate." default:"32"`
	Thr    int    `short:"t" name:"threads" help:"Compute threads (0 = number of CPUs)." default:"0"`
	Ctx    int    `short:"c" name:"ctx-size" help:"Context length in tokens (0 = prompt + -n; 4096 in interactive mode)." default:"0"`
	KVType string `name:"kv-type" help:"KV cache element type: f16 (llama.cpp's default) or f32." enum:"f16,f32" default:"f16"`
	Echo   bool   `help:"Print the prompt before the generated text."`

	Chat        bool   `help:"Apply the model's chat template (ChatML) to the prompt."`
	System      string `help:"System message for --chat."`
	NoThink     bool   `name:"no-think" help:"Qwen3: an empty think block after the assistant header (implies --chat)."`
	Interactive bool   `short:"i" help:"Chat turn by turn from stdin, keeping the model and KV cache loaded (implies --chat)."`
	IgnoreEOS   bool   `name:"ignore-eos" help:"Do not stop at end-of-generation tokens."`

	Temp          float32 `help:"Sampling temperature; 0 = greedy (argmax, lowest id on ties)." default:"0.8"`
	TopK          int     `name:"top-k" help:"Top-k sampling (0 = off)." default:"40"`
	TopP          float32 `name:"top-p" help:"Top-p (nucleus) sampling (1 = off)." default:"0.95"`
	MinP          float32 `name:"min-p" help:"Min-p sampling (0 = off)." default:"0.05"`
	RepeatPenalty float32 `name:"repeat-penalty" help:"Repeat penalty (1 = off)." default:"1.0"`
	RepeatLastN   int     `name:"repeat-last-n" help:"Tokens the repeat penalty looks back over (-1 = all)." default:"64"`
	Seed          int64   `help:"Sampling seed (-1 = random). Same seed, same text." default:"-1"`
	NExpertUsed   int     `name:"n-expert-used" help:"Override the experts used per token (k); lossy, deterministic. 0 = the model's." default:"0"`

	MoeStream     string `name:"moe-stream" help:"Stream routed experts with O_DIRECT into a bounded cache: true, false (whole-file mmap, like llama.cpp) or auto (stream when the file is larger than half the memory available to the process)." enum:"auto,true,false" default:"auto"`
	IOThreads     int    `name:"io-threads" help:"Reader lanes for expert reads." default:"4"`
	NoODirect     bool   `name:"no-odirect" help:"Use buffered pread instead of O_DIRECT."`
	CacheMB       string `name:"cache-mb" help:"Expert cache budget in MiB, 'auto' (from the cgroup limit or MemAvailable, minus dense weights, KV and --cache-floor-mb) or 0 (no cache)." default:"auto"`
	CacheCeilMB   int64  `name:"cache-ceil-mb" help:"Upper bound for --cache-mb auto, in MiB (0 = none)." default:"0"`
	CacheFloor    int64  `name:"cache-floor-mb" help:"RAM in MiB that --cache-mb auto leaves free." default:"512"`
	CachePolicy   string `name:"cache-policy" help:"Expert cache replacement policy: layer (no LRU cliff below one token's working set; best in replay of real traces), lru, lfu or random." default:"layer"`
	Overlap       bool   `help:"Compute resident experts while the lanes read the rest (--overlap=false waits for the whole layer, for A/B)." default:"true" negatable:""`
	Prefetch      int    `help:"Speculative expert reads per layer for the next layer (0 = off)." default:"0"`
	PrefetchLanes int    `name:"prefetch-lanes" help:"Reader lanes that may serve speculative reads at once (0 = all): reads in flight share the disk, so fewer leaves demand reads more of it." default:"1"`
	HugePages     bool   `name:"huge-pages" help:"Ask for transparent huge pages behind the expert cache and anonymous dense weights: O_DIRECT reads into them need far fewer device segments (false for A/B)." default:"true" negatable:""`
	PrefetchPol   string `name:"prefetch-policy" help:"Speculative prefetch policy: next-layer (the next layer's router applied early), temporal (last token's experts) or popular." default:"next-layer"`
	Dense         string `name:"dense-weights" help:"Dense (non-expert) weights: anon (O_DIRECT into anonymous memory), warm (mmap, swept once at load) or mmap (lazy)." enum:"anon,warm,mmap" default:"anon"`

	CSV        string `help:"Write one row of metrics per generated token to this CSV file, then a '# summary' line." type:"path"`
	Progress   bool   `help:"Show a live status line on stderr when it is a terminal."`
	RouteTrace string `name:"route-trace" help:"Write the routing of every token and layer in route_trace v1 format." type:"path"`

	ForceTokens string `name:"force-tokens" help:"Teacher forcing: comma-separated token ids fed after the prompt instead of the sampled ones (testing)."`
	LogitsOut   string `name:"logits-out" help:"Write each step's logits (float32 little-endian rows; row 0 after the prompt) to this file (testing)." type:"path"`
	CPUProfile  string `name:"cpuprofile" help:"Write a Go CPU profile of the run to this file (go tool pprof)." type:"path"`
	TokensOut   string `name:"tokens-out" help:"Write the prompt token ids and the generated ids (two comma-separated lines) to this file (testing)." type:"path"`
}

var errFlag = errors.New("bad flag")

func (c *RunCmd) validate() error {
	switch {
	case c.N < 0:
		return fmt.Errorf("%w: -n %d must be >= 0", errFlag, c.N)
	case c.Thr < 0:
		return fmt.Errorf("%w: -t %d must be >= 0", errFlag, c.Thr)
	case c.Ctx < 0:
		return fmt.Errorf("%w: -c %d must be >= 0", errFlag, c.Ctx)
	case c.IOThreads <= 0 || c.IOThreads > 256:
		return fmt.Errorf("%w: --io-threads %d must be in 1..256", errFlag, c.IOThreads)
	case c.Prefetch < 0:
		return fmt.Errorf("%w: --prefetch %d must be >= 0", errFlag, c.Prefetch)
	case c.PrefetchLanes < 0:
		return fmt.Errorf("%w: --prefetch-lanes %d must be >= 0", errFlag, c.PrefetchLanes)
	case c.CacheCeilMB < 0 || c.CacheFloor < 0:
		return fmt.Errorf("%w: --cache-ceil-mb and --cache-floor-mb must be >= 0", errFlag)
	case c.NExpertUsed < 0:
		return fmt.Errorf("%w: --n-expert-used %d must be >= 0", errFlag, c.NExpertUsed)
	}
	return nil
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

// Run implements the command.
func (c *RunCmd) Run(g *Globals) error {
	if err := c.validate(); err != nil {
		return err
	}
	if c.NoThink || c.Interactive {
		c.Chat = true
	}
	threads := c.Thr
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	var forced []int32
	if c.ForceTokens != "" {
		var err error
		if forced, err = parseIDs(c.ForceTokens); err != nil {
			return err
		}
	}
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	path := c.Model
	demo := false
	if path == "" {
		p, err := ensureDemo(g)
		if err != nil {
			return err
		}
		path, demo = p, true
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("-m: %w", err)
	}
	stream := c.MoeStream == "true"
	if c.MoeStream == "auto" {
		stream = demo || streamByDefault(st.Size())
	}
	cfg := stages.Config{
		Path: path, Stream: stream, IOThreads: c.IOThreads, NoODirect: c.NoODirect,
		Policy: c.CachePolicy, Overlap: c.Overlap, Prefetch: c.Prefetch, PrefetchPol: c.PrefetchPol, PrefetchLanes: c.PrefetchLanes, HugePages: c.HugePages,
		Dense: stages.DenseMode(c.Dense), Threads: threads, ExpertsUsed: c.NExpertUsed, Log: g.Log,
		CacheCeil: c.CacheCeilMB << 20, CacheFloor: c.CacheFloor << 20,
	}
	switch c.CacheMB {
	case "auto":
		cfg.CacheAuto = true
	default:
		mb, err := strconv.ParseInt(c.CacheMB, 10, 64)
		if err != nil || mb < 0 {
			return fmt.Errorf("%w: --cache-mb %q: want a number of MiB >= 0 or auto", errFlag, c.CacheMB)
		}
		cfg.CacheBytes = mb << 20
	}
	if demo && cfg.CacheAuto {
		// The demo shows streaming with a cache smaller than the experts.
		cfg.CacheAuto = false
		cfg.CacheBytes = demoCacheMB << 20
	}
	kv := model.KVF16
	cfg.KVElemBytes = 2
	if c.KVType == "f32" {
		kv = model.KVF32
		cfg.KVElemBytes = 4
	}
	// The prompt is not tokenized yet: a token is at least one byte, so its
	// length in bytes bounds its length in tokens.
	cfg.KVPositions = c.Ctx
	if cfg.KVPositions == 0 {
		cfg.KVPositions = len(c.Prompt) + len(c.System) + 64 + c.N
		if c.Interactive {
			cfg.KVPositions = 4096
		}
	}

	eng, err := stages.Open(g.Ctx, cfg)
	if err != nil {
		return err
	}
	defer eng.Close()
	tcfg, err := tokenizer.FromGGUF(eng.Desc().File)
	if err != nil {
		return fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	tok, err := tokenizer.New(tcfg)
	if err != nil {
		return fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	seed := c.Seed
	if seed < 0 {
		seed = time.Now().UnixNano() & math.MaxInt64
	}
	smp, err := sample.New(sample.Params{Temp: c.Temp, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP,
		RepeatPenalty: c.RepeatPenalty, RepeatLastN: c.RepeatLastN, Seed: uint64(seed)})
	if err != nil {
		return err
	}

	var progress *sink.Progress
	if c.Progress {
		progress = sink.NewProgress(g.Stderr)
	}
	sk, err := sink.New(sink.Options{CSV: c.CSV, Log: g.Log, Progress: progress, Warmup: -1, Threads: threads})
	if err != nil {
		return err
	}
	defer sk.Close()
	d := eng.Desc()
	sk.Load(sink.LoadInfo{
		Seconds: eng.LoadTime.Seconds(), DenseBytes: d.DenseBytes, ExpertBytes: d.ExpertTotalBytes,
		BudgetBytes: eng.Budget(), ODirect: eng.ODirect(), Lanes: c.IOThreads, Threads: threads,
		Extra: []sink.Field{sink.F("model", path), sink.F("arch", d.Arch), sink.F("moe_stream", stream),
			sink.F("dense_weights", c.Dense), sink.F("overlap", c.Overlap), sink.F("working_set_bytes", eng.WorkingSet()),
			sink.F("seed", seed)},
	})
	sk.Set("model", path)
	sk.Set("moe_stream", stream)
	sk.Set("dense", c.Dense)
	sk.Set("overlap", c.Overlap)

	r := &runner{c: c, g: g, eng: eng, tok: tok, smp: smp, sink: sk, kv: kv, forced: forced}
	if c.RouteTrace != "" {
		closeTrace, err := r.openTrace(path)
		if err != nil {
			return err
		}
		defer closeTrace()
	}
	if c.LogitsOut != "" {
		f, err := os.Create(c.LogitsOut)
		if err != nil {
			return fmt.Errorf("--logits-out: %w", err)
		}
		defer f.Close()
		r.logits = bufio.NewWriter(f)
		defer r.logits.Flush()
	}
	var runErr error
	if c.Interactive {
		runErr = r.interactive()
	} else {
		runErr = r.once()
	}
	if runErr != nil {
		sk.Fail(runErr)
	}
	pr := eng.Profile()
	per := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(max(r.steps+1, 1)) }
	g.Log.Info().Str("event", "profile").Int("forwards", r.steps+1).
		Float64("attention_ms", per(pr.Attention)).Float64("router_ms", per(pr.Router)).
		Float64("experts_ms", per(pr.Experts)).Float64("stall_ms", per(pr.Stall)).
		Float64("lm_head_ms", per(pr.LMHead)).Float64("embed_ms", per(pr.Embed)).
		Msg("time per forward pass (prefill counted as one)")
	if ps, ok := eng.PlannerStats(); ok && ps.Speculative > 0 {
		g.Log.Info().Str("event", "prefetch").Int64("reads", ps.Speculative).Int64("used", ps.SpeculativeUsed).
			Float64("precision", float64(ps.SpeculativeUsed)/float64(ps.Speculative)).
			Int64("withdrawn", ps.SpeculativeWithdrawn).Int64("promoted", ps.SpeculativePromoted).
			Int64("skipped", ps.SpeculativeSkipped).
			Msg("speculative reads: issued, routed to by their layer, withdrawn unread when the guess proved wrong")
	}
	if c.TokensOut != "" {
		if err := os.WriteFile(c.TokensOut, []byte(joinIDs(r.promptIDs)+"\n"+joinIDs(r.genIDs)+"\n"), 0o644); err != nil && runErr == nil {
			runErr = fmt.Errorf("--tokens-out: %w", err)
		}
	}
	if err := sk.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, v := range ids {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, ",")
}

type runner struct {
	c      *RunCmd
	g      *Globals
	eng    *stages.Engine
	tok    *tokenizer.Tokenizer
	smp    *sample.Sampler
	sink   *sink.Sink
	kv     model.KVType
	forced []int32
	logits *bufio.Writer

	promptIDs, genIDs []int32
	steps             int
	sess              *stages.Session
	inPrefill         bool
	turnNo            int
}

func (r *runner) prompt() (string, bool, error) {
	c := r.c
	if !c.Chat {
		return c.Prompt, false, nil
	}
	var msgs []tokenizer.Message
	if c.System != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: c.System})
	}
	msgs = append(msgs, tokenizer.Message{Role: "user", Content: c.Prompt})
	s, err := r.tok.Chat(msgs, true, c.NoThink)
	return s, true, err
}

func (r *runner) once() error {
	text, special, err := r.prompt()
	if err != nil {
		return err
	}
	ids := r.tok.Encode(text, true, special)
	if len(ids) == 0 {
		return fmt.Errorf("%w: -p: the prompt is empty after tokenization", errFlag)
	}
	r.promptIDs = ids
	n := r.c.N
	nCtx := r.c.Ctx
	if nCtx == 0 {
		nCtx = len(ids) + n
	}
	if len(ids)+n > nCtx {
		return fmt.Errorf("%w: prompt (%d tokens) + -n %d exceeds the context -c %d", model.ErrContextFull, len(ids), n, nCtx)
	}
	sess, err := r.eng.NewSession(nCtx, r.kv, r.sink)
	if err != nil {
		return err
	}
	out := r.g.Stdout
	if r.c.Echo {
		fmt.Fprint(out, text)
	}
	_, err = r.turn(sess, ids, n)
	if err == nil {
		fmt.Fprintln(out)
	}
	return err
}

// turn prefills ids and generates up to n tokens; it returns whether it
// stopped at an end-of-generation token.
func (r *runner) turn(sess *stages.Session, ids []int32, n int) (bool, error) {
	ctx := r.g.Ctx
	r.sess = sess
	r.inPrefill = true
	rows, d, err := sess.Prefill(ctx, ids, false)
	r.inPrefill = false
	if err != nil {
		return false, err
	}
	r.sink.Prefill(len(ids), d)
	r.smp.AcceptAll(ids)
	logits := rows[0]
	stream := r.tok.NewStream(false)
	out := r.g.Stdout
	for i := 0; i < n; i++ {
		if err := r.writeLogits(logits); err != nil {
			return false, err
		}
		next, err := r.smp.Sample(logits)
		if err != nil {
			return false, err
		}
		if len(r.forced) > 0 {
			next, r.forced = r.forced[0], r.forced[1:]
		}
		r.smp.Accept(next)
		r.genIDs = append(r.genIDs, next)
		if r.tok.IsEOG(next) && !r.c.IgnoreEOS {
			fmt.Fprint(out, stream.Flush())
			return true, nil
		}
		fmt.Fprint(out, stream.Add(next))
		if f, ok := out.(interface{ Flush() error }); ok {
			_ = f.Flush()
		}
		// Every generated token is fed, so each one gets a CSV row with the
		// cost of the decode step that consumed it.
		r.steps++
		var m sink.TokenMetrics
		logits, m, err = sess.Step(ctx, next, n)
		if err != nil {
			return false, err
		}
		if err := r.sink.Token(m); err != nil {
			return false, err
		}
	}
	fmt.Fprint(out, stream.Flush())
	return false, nil
}

func (r *runner) writeLogits(l []float32) error {
	if r.logits == nil {
		return nil
	}
	var b [4]byte
	for _, v := range l {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		if _, err := r.logits.Write(b[:]); err != nil {
			return fmt.Errorf("--logits-out: %w", err)
		}
	}
	return nil
}

func (r *runner) interactive() error {
	c := r.c
	nCtx := c.Ctx
	if nCtx == 0 {
		nCtx = 4096
	}
	sess, err := r.eng.NewSession(nCtx, r.kv, r.sink)
	if err != nil {
		return err
	}
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	var past []tokenizer.Message
	if c.System != "" {
		past = append(past, tokenizer.Message{Role: "system", Content: c.System})
	}
	endTurn, hasEnd := r.tok.ID("<|im_end|>")
	for {
		fmt.Fprint(r.g.Stderr, "> ")
		if !in.Scan() {
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		user := tokenizer.Message{Role: "user", Content: line}
		var ids []int32
		if r.turnNo == 0 {
			text, err := r.tok.Chat(append(past, user), true, c.NoThink)
			if err != nil {
				return err
			}
			ids = r.tok.Encode(text, true, true)
		} else {
			// The previous reply's end-of-turn token was sampled but not fed.
			if last := r.genIDs[len(r.genIDs)-1]; r.tok.IsEOG(last) {
				ids = append(ids, last)
			} else if hasEnd {
				ids = append(ids, endTurn)
			}
			text, err := r.tok.ChatDelta(past, user, true, c.NoThink)
			if err != nil {
				return err
			}
			ids = r.tok.AppendEncode(ids, text, false, true)
		}
		past = append(past, user)
		if sess.St.Pos+len(ids)+c.N > nCtx {
			return fmt.Errorf("%w: the conversation needs %d positions, -c is %d", model.ErrContextFull, sess.St.Pos+len(ids)+c.N, nCtx)
		}
		first := len(r.genIDs)
		if _, err := r.turn(sess, ids, c.N); err != nil {
			return err
		}
		reply := r.genIDs[first:]
		if len(reply) > 0 && r.tok.IsEOG(reply[len(reply)-1]) {
			reply = reply[:len(reply)-1]
		}
		past = append(past, tokenizer.Message{Role: "assistant", Content: r.tok.Decode(reply, false)})
		r.turnNo++
		fmt.Fprintln(r.g.Stdout)
		if err := r.g.Ctx.Err(); err != nil {
			return err
		}
	}
}

// stdin is where interactive mode reads turns (tests replace it).
var stdin io.Reader = os.Stdin

// streamByDefault is the --moe-stream auto rule: stream when the file is
// larger than half of the memory available to the process (the tighter of
// the cgroup limit and MemAvailable), so the page cache could not hold it
// next to everything else.
func streamByDefault(fileBytes int64) bool {
	avail := availableMemory()
	return avail <= 0 || fileBytes > avail/2
}
