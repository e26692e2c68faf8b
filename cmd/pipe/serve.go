package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/internal/sysmem"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/serve"
	"github.com/pipe-engine/pipe/sink"
	"github.com/pipe-engine/pipe/tokenizer"
	"github.com/rs/zerolog"
)

// ServeCmd is `pipe serve`: an OpenAI-compatible HTTP server (package serve).
type ServeCmd struct {
	Model  string   `short:"m" help:"GGUF model file (first shard of a split model). Without it, the demo model (see pipe run)." type:"path" group:"Model"`
	Host   string   `help:"Address to listen on (a non-loopback address without --api-key logs a warning)." default:"127.0.0.1" group:"Server"`
	Port   int      `help:"Port to listen on (0 = any free port; the 'listening' event names it)." default:"8080" group:"Server"`
	Alias  []string `short:"a" help:"Model names, comma-separated, as llama-server's: the first in sorted order names the model in /v1/models and in responses, all are its aliases there (default: the file name)." placeholder:"NAME,…" group:"Server"`
	Tags   []string `help:"Model tags, comma-separated, listed in /v1/models (informational), as llama-server's." placeholder:"TAG,…" group:"Server"`
	NoUI   bool     `name:"no-ui" aliases:"no-webui" help:"No chat page: / is 404, as llama-server's --no-ui." group:"Server"`
	APIKey string   `name:"api-key" env:"PIPE_API_KEY" help:"Require 'Authorization: Bearer KEY' on every route but /health." group:"Server"`

	AllowedHosts   []string `name:"allowed-hosts" help:"Host names requests may use besides IP addresses, localhost and --host ('*': any); others are refused, as DNS rebinding uses them." placeholder:"NAME,…" group:"Server"`
	CORSOrigins    []string `name:"cors-origins" aliases:"allowed-origins" help:"Web origins (http://host:port; '*': any; 'localhost': localhost, 127.0.0.1 or ::1 on any port) whose pages may call the API from a browser, besides the server's own, as llama-server's (default: '*' with --api-key, else 'localhost'); others are refused and their CORS preflights get no Access-Control-Allow-Origin." placeholder:"ORIGIN,…" group:"Server"`
	CORSMethods    string   `name:"cors-methods" help:"Access-Control-Allow-Methods of a CORS preflight, as llama-server's." default:"GET, POST, DELETE, OPTIONS" group:"Server"`
	CORSHeaders    string   `name:"cors-headers" help:"Access-Control-Allow-Headers of a CORS preflight, as llama-server's." default:"*" group:"Server"`
	CORSCreds      bool     `name:"cors-credentials" help:"Allow credentials in CORS (Access-Control-Allow-Credentials; with --cors-origins '*' the Origin is echoed, else '*' is sent), as llama-server's." default:"true" negatable:"" group:"Server"`
	Thr            int      `short:"t" name:"threads" help:"Compute threads (0 = number of CPUs)." default:"0" group:"Model"`
	Ctx            int      `short:"c" name:"ctx-size" help:"Context of the served session in tokens: prompt + max_tokens of a request must fit." default:"4096" group:"Model"`
	KVType         string   `name:"kv-type" help:"KV cache element type: f16 or f32." enum:"f16,f32" default:"f16" group:"Model"`
	Reverse        []string `short:"r" name:"reverse-prompt" help:"Stop every reply at this text, besides a request's own stop sequences (repeatable), as llama-server's -r." group:"Server"`
	N              int      `short:"n" name:"n-predict" aliases:"predict" help:"Most tokens a request that sets no n_predict/max_tokens may generate (-1 = none: up to the context); a request's own limit wins, as llama-server's -n." default:"-1" group:"Server"`
	Parallel       int      `name:"parallel" help:"Decode slots: requests decoded together, one forward pass per step over every slot (each layer's experts read once for all), -c split among them, as llama-server's -np." default:"1" group:"Server"`
	Batch          int      `name:"batch-size" help:"Prompt tokens the one session feeds at a time, with a return_progress event after each, as llama-server's -b (output unchanged); -ub is at most this." default:"2048" group:"Server"`
	Ubatch         int      `name:"ubatch-size" help:"Most prompt tokens a slot feeds per step beside the slots that decode (--parallel above 1), as llama-server's -ub." default:"512" group:"Server"`
	KVUnified      bool     `name:"kv-unified" help:"The --parallel slots share one pool of -c KV positions, each able to fill all of it, instead of -c/--parallel each (as llama-server's -kvu): a full pool drops idle slots' caches, then ends the request holding the most." negatable:"" group:"Server"`
	SlotSim        float64  `name:"slot-prompt-similarity" help:"A request takes the free slot holding the largest share of its prompt when above this, else the least recently used (0: always the latter), as llama-server's -sps." default:"0.1" group:"Server"`
	SlotSavePath   string   `name:"slot-save-path" help:"Directory of the files POST /slots/{id}?action=save|restore writes and reads, as llama-server's (its 'ggsq' header and token list, then pipe's own KV rows and recurrent state); a save replaces only an earlier slot save; without it the slot actions answer 501." type:"existingdir" group:"Server"`
	ContextShift   bool     `name:"context-shift" help:"A generation that fills its slot's context goes on after dropping the older half of what --keep does not keep, recomputing the kept tail's KV (as llama-server's --context-shift, which re-ropes it); without it the context ends the generation (finish_reason length, truncated)." negatable:"" group:"Server"`
	Keep           int      `name:"keep" help:"With --context-shift, the prompt's first tokens that always stay (-1: the whole prompt); a request's n_keep wins, as llama-server's --keep." default:"0" group:"Server"`
	Slots          bool     `help:"Answer GET /slots (--no-slots: 501, as llama-server's)." default:"true" negatable:"" group:"Server"`
	Metrics        bool     `help:"Answer GET /metrics (Prometheus text; without it 501), as llama-server's --metrics." negatable:"" group:"Server"`
	VerboseAnswers bool     `name:"verbose-answers" help:"Add llama-server's __verbose (the native answer, with the prompt as rendered) to every chat and text completion that is not streamed, as llama-server's --verbose does (pipe serve -v / --verbose set this and --log-level debug)." group:"Server"`

	NoThink         bool   `name:"no-think" help:"Qwen3: render chats with an empty think block." group:"Model"`
	Reasoning       string `name:"reasoning" help:"Reasoning in chats, as llama-server's -rea: on, off or auto (the default; also enabled/disabled, true/false, 1/0, -1): off renders the template with enable_thinking false (as --no-think), on and auto with it true." default:"auto" group:"Server"`
	ReasoningBudget int    `name:"reasoning-budget" help:"Most tokens a chat's reasoning may take before </think> is forced (-1: no limit, 0: end it at once), when a request sets no reasoning_budget_tokens, as llama-server's." default:"-1" group:"Server"`
	TemplateKwargs  string `name:"chat-template-kwargs" help:"A JSON object of the chat template's variables, under each request's chat_template_kwargs, as llama-server's (e.g. '{\"enable_thinking\": false}')." placeholder:"JSON" group:"Server"`
	ReasoningMsg    string `name:"reasoning-budget-message" help:"Text forced before </think> when the reasoning budget is spent (a request's reasoning_budget_message wins), as llama-server's." group:"Server"`
	ReasoningFormat string `name:"reasoning-format" help:"A chat reply's leading <think>…</think>: auto or deepseek return it as reasoning_content (in the message and the stream's deltas), none leaves it in the content, deepseek-legacy does both (a stream: the content only); a request's reasoning_format wins, as llama-server's." enum:"none,deepseek,deepseek-legacy,auto" default:"auto" group:"Server"`

	AgentFlags `embed:""` // --tools, --ui-mcp-proxy, --media-path (servetools.go)

	Jinja         bool `help:"Render chats by running the model's tokenizer.chat_template as Jinja (on by default, as llama-server's; a model without one, or one pipe's Jinja cannot compile, keeps the built-in renderer with a warning); --no-jinja: the built-in ChatML, harmony or Gemma 4 renderer." default:"true" negatable:"" group:"Prompt"`
	TemplateFlags `embed:""`
	SamplingFlags `embed:"" group:"Sampling"`
	EngineFlags   `embed:"" group:"Streaming"`
	HotSetFlags   `embed:"" group:"Streaming"` // the hot set is saved when the server shuts down

	EmbeddingFlags `embed:""` // --embedding, --pooling (embedflags.go)
}

func (c *ServeCmd) validate() error {
	switch {
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("%w: --port %d must be in 0..65535", errFlag, c.Port)
	case c.N < -1 || c.N == 0 || c.N > maxPositions:
		return fmt.Errorf("%w: -n %d must be in 1..%d, or -1 (no limit)", errFlag, c.N, maxPositions)
	case c.Parallel < 1 || c.Parallel > 256:
		return fmt.Errorf("%w: --parallel %d must be in 1..256", errFlag, c.Parallel)
	case c.Batch < 1 || c.Batch > maxPositions:
		return fmt.Errorf("%w: --batch-size %d must be in 1..%d", errFlag, c.Batch, maxPositions)
	case c.Ubatch < 1 || c.Ubatch > maxPositions:
		return fmt.Errorf("%w: --ubatch-size %d must be in 1..%d", errFlag, c.Ubatch, maxPositions)
	case c.SlotSim < 0 || c.SlotSim > 1:
		return fmt.Errorf("%w: --slot-prompt-similarity %g must be in 0..1", errFlag, c.SlotSim)
	case c.Keep < -1:
		return fmt.Errorf("%w: --keep %d must be -1 (the whole prompt) or more", errFlag, c.Keep)
	case c.Ctx/c.Parallel < 2 && !c.KVUnified:
		return fmt.Errorf("%w: -c %d split among --parallel %d slots leaves %d positions each", errFlag, c.Ctx, c.Parallel, c.Ctx/c.Parallel)
	}
	if _, err := reasoningOff(c.Reasoning); err != nil {
		return err
	}
	if _, err := c.templateKwargs(); err != nil {
		return err
	}
	if c.ReasoningBudget < -1 {
		return fmt.Errorf("%w: --reasoning-budget %d must be -1 (no limit) or more", errFlag, c.ReasoningBudget)
	}
	if err := checkPositions("-c", c.Ctx, 1); err != nil {
		return err
	}
	if err := c.TemplateLimitFlags.check(); err != nil {
		return err
	}
	if err := c.EmbeddingFlags.check(); err != nil {
		return err
	}
	if err := c.AgentFlags.check(); err != nil {
		return err
	}
	return c.EngineFlags.check(c.Thr)
}

// Run implements the command: load the model, listen, serve until SIGINT or
// SIGTERM, then shut down gracefully (exit status 0).
func (c *ServeCmd) Run(g *Globals) error {
	if err := c.validate(); err != nil {
		return err
	}
	params := c.params(0)
	if err := params.Validate(); err != nil {
		return fmt.Errorf("%w: %w", errFlag, err)
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
	if _, err := c.HotSetFlags.protect(modelGuard(path)); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	if err != nil {
		return fmt.Errorf("--host/--port: %w", err)
	}
	defer ln.Close()
	o, err := c.options(g, path, demo)
	if err != nil {
		return err
	}
	// The engine outlives a signal: Serve cancels the running request
	// itself and the model is closed after it.
	m, err := decode.Open(context.WithoutCancel(g.Ctx), o)
	if err != nil {
		return err
	}
	if err := c.applyTemplate(m.Tokenizer(), g.Log); err != nil {
		m.Close()
		return err
	}
	kwargs, _ := c.templateKwargs() // checked by validate
	so := serve.Options{Model: m, ModelID: c.modelID(path), ModelAliases: c.aliases(), ModelTags: cleanList(c.Tags), NoUI: c.NoUI, ModelPath: path, Version: versionString(), Fingerprint: fingerprint(),
		Ctx: c.Ctx, Sampling: params, Seed: c.Seed, MaxTokens: c.N, Stops: c.Reverse, NoThink: c.noThink(), ReasoningFormat: c.ReasoningFormat,
		ReasoningBudget: &c.ReasoningBudget, TemplateKwargs: kwargs, ReasoningBudgetMessage: c.ReasoningMsg, APIKey: c.APIKey,
		AllowedHosts: append(c.AllowedHosts, c.Host), CORSOrigins: c.CORSOrigins, CORSMethods: c.CORSMethods, CORSHeaders: c.CORSHeaders, CORSNoCredentials: !c.CORSCreds,
		NoSlots: !c.Slots, Verbose: c.VerboseAnswers, NoMetrics: !c.Metrics, ContextShift: c.ContextShift, Keep: c.Keep,
		Parallel: c.Parallel, KVUnified: c.KVUnified, Ubatch: min(c.Ubatch, c.Batch), Batch: c.Batch, SlotSimilarity: c.SlotSim, SlotSavePath: c.SlotSavePath, Log: g.Log}
	if err := c.EmbeddingFlags.apply(&so, m.Engine().Desc().File); err != nil {
		m.Close()
		return err
	}
	if err := c.AgentFlags.options(&so); err != nil {
		m.Close()
		return err
	}
	srv, err := serve.New(so)
	if err != nil {
		m.Close()
		return err
	}
	serr := srv.Serve(g.Ctx, ln)
	return errors.Join(serr, m.Close())
}

// applyTemplate sets the chat renderer: --jinja (the default) runs the
// GGUF's own template, as llama-server's default does, unless the model
// has none or pipe's Jinja cannot compile it, which leaves the built-in
// renderer (with a warning; llama-server falls back to ChatML).
func (c *ServeCmd) applyTemplate(tok *tokenizer.Tokenizer, log zerolog.Logger) error {
	if !c.Jinja || c.ChatTemplate != "" || c.ChatTemplateFile != "" {
		return c.TemplateFlags.apply(tok, c.Jinja)
	}
	if err := c.TemplateFlags.apply(tok, false); err != nil { // the template limits
		return err
	}
	src := tok.ChatTemplate()
	if src == "" {
		log.Warn().Str("event", "chat_template").Msg("the model has no tokenizer.chat_template: chats use the built-in renderer")
		return nil
	}
	if err := tok.UseJinja(src, "GGUF key "+tokenizer.KeyChatTemplate); err != nil {
		log.Warn().Str("event", "chat_template").Err(err).Msg("the model's chat template does not compile as Jinja: chats use the built-in renderer (--no-jinja)")
	}
	return nil
}

// templateKwargs reads --chat-template-kwargs: a JSON object (nil when
// not given).
func (c *ServeCmd) templateKwargs() (map[string]json.RawMessage, error) {
	if c.TemplateKwargs == "" {
		return nil, nil
	}
	var kw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(c.TemplateKwargs), &kw); err != nil || kw == nil {
		return nil, fmt.Errorf("%w: --chat-template-kwargs: want a JSON object: %v", errFlag, err)
	}
	if v, ok := kw["enable_thinking"]; ok && string(v) != "true" && string(v) != "false" {
		return nil, fmt.Errorf("%w: --chat-template-kwargs: enable_thinking: want true or false", errFlag)
	}
	return kw, nil
}

// reasoningOff reads --reasoning as llama.cpp's common_arg_utils do
// (is_truthy, is_falsey, is_autoy): whether it turns thinking off.
func reasoningOff(v string) (bool, error) {
	switch v {
	case "on", "enabled", "true", "1", "auto", "-1":
		return false, nil
	case "off", "disabled", "false", "0":
		return true, nil
	}
	return false, fmt.Errorf("%w: --reasoning %q: want on, off or auto", errFlag, v)
}

// noThink is --no-think or --reasoning off.
func (c *ServeCmd) noThink() bool {
	off, _ := reasoningOff(c.Reasoning)
	return c.NoThink || off
}

// modelID is the model's name: the first alias in sorted order (llama-server
// keeps them in a std::set), else the file's name.
func (c *ServeCmd) modelID(path string) string {
	if a := c.aliases(); len(a) > 0 {
		return a[0]
	}
	return strings.TrimSuffix(filepath.Base(path), ".gguf")
}

// aliases are the --alias names, sorted and without duplicates.
func (c *ServeCmd) aliases() []string {
	return cleanList(c.Alias)
}

// cleanList trims a comma-separated flag's items, drops empty ones and
// duplicates, and sorts them (llama-server's std::set of aliases or tags).
func cleanList(items []string) []string {
	var out []string
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// serveSummaryWindow bounds what the server's sink keeps for its summary
// (sink.Options.SummaryWindow): running sums and the first and last this
// many tokens, so a server that runs for weeks does not grow with every
// token it generates.
const serveSummaryWindow = 4096

func (c *ServeCmd) options(g *Globals, path string, demo bool) (decode.Options, error) {
	cfg, err := c.EngineFlags.config(path, c.Thr, g.Log)
	if err != nil {
		return decode.Options{}, err
	}
	o := decode.Options{Engine: cfg, KV: model.KVF16, Ctx: c.Ctx, AutoCache: demoCache(demo),
		Sink: sink.Options{Warmup: -1, SummaryWindow: serveSummaryWindow, PeakRSS: sysmem.PeakRSS}, HotSet: c.HotSetFlags.options(), Progress: showProgress(g.Status, decode.PhaseLoad)}
	if c.KVType == "f32" {
		o.KV = model.KVF32
	}
	return o, nil
}
