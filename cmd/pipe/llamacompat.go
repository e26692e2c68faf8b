package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pipe-engine/pipe/tokenizer"
)

// llama.cpp's command line, as its users type it. kong knows one-letter
// short flags only, so llama.cpp's multi-letter single-dash flags are
// rewritten to pipe's long forms before parsing, bare boolean switches that
// pipe spells with a value get one, and the flags pipe cannot honour stop the
// parse with one error that says what pipe does instead (never a misparse).

// llamaShort maps llama.cpp's multi-letter single-dash flags to pipe's.
var llamaShort = map[string]string{
	"-sys":    "--system-prompt",
	"-cnv":    "--interactive",
	"-no-cnv": "--interactive=false",
	"-ctk":    "--cache-type-k",
	"-ctv":    "--cache-type-v",
	"-st":     "--single-turn",
	"-if":     "--interactive",
	"-ndio":   "--no-odirect",
	"-v":      "--log-level=debug",
	"-np":     "--parallel",
	"-ub":     "--ubatch-size",
	"-b":      "--batch-size",
	"-sps":    "--slot-prompt-similarity",
	"-rea":    "--reasoning",
	"-kvu":    "--kv-unified",
	"-no-kvu": "--no-kv-unified",
}

// llamaVerbose are llama.cpp's spellings of --verbose.
var llamaVerbose = map[string]bool{"-v": true, "--verbose": true, "--log-verbose": true}

// llamaLong maps llama.cpp long flags whose pipe form differs in more than
// its name (plain renames are kong aliases on the flags themselves).
var llamaLong = map[string]string{
	"--conversation":       "--interactive",
	"--no-conversation":    "--interactive=false",
	"--no-display-prompt":  "--echo=false",
	"--verbose":            "--log-level=debug",
	"--log-verbose":        "--log-level=debug",
	"--log-disable":        "--log-level=error",
	"--usage":              "--help",
	"--interactive-first":  "--interactive",
	"--no-direct-io":       "--no-odirect",
	"--no-webui-mcp-proxy": "--no-ui-mcp-proxy",
}

const (
	gpuHint     = "pipe runs on the CPU: it keeps the dense weights resident and streams routed experts from the file into a bounded cache (--cache-mb)"
	expertHint  = "pipe always keeps routed experts off the resident set and streams them (--moe-stream); size their cache with --cache-mb"
	mlockHint   = "pipe reads dense weights into anonymous memory (--dense-weights anon) and bounds the expert cache (--cache-mb); there is nothing to lock"
	noMmapHint  = "use --moe-stream=true (experts read with O_DIRECT, never mmap'd) and --dense-weights anon"
	parallelHnt = "pipe serve always batches its --parallel slots continuously"
	downloadHnt = "pipe does not download models (and has no network access to do it): download the GGUF file yourself and pass its path with -m"
)

// stringSwitches are pipe flags with a value that llama.cpp's (and
// BigMoeOnEdge's) users type bare: alone they mean "=true".
var stringSwitches = map[string][]string{
	"--moe-stream": {"auto", "true", "false"},
}

// translateArgs rewrites llama.cpp spellings into pipe's (see above) up to a
// "--" that ends the flags. A negative number after a flag is that flag's
// value, as llama.cpp reads it (-n -1, --seed -1): it is joined to the flag,
// since kong would read it as a flag of its own.
// The llama.cpp spellings are those of llama-cli and llama-server, so they
// are read in pipe run and pipe serve only (report has a --warmup of its
// own); the negative numbers everywhere.
func translateArgs(args []string) ([]string, error) {
	llama := slices.Contains([]string{"run", "serve"}, commandOf(args))
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		if llama && strings.HasPrefix(a, "--") {
			a = dashed(a)
		}
		name, _, _ := strings.Cut(a, "=")
		if !llama {
			name = "" // no llama.cpp spelling matches
		}
		if hint, ok := llamaRefusals[name]; ok {
			return nil, fmt.Errorf("%w: %s is a llama.cpp flag pipe cannot honour: %s", errFlag, name, hint)
		}
		if vals, ok := llamaIgnored[name]; ok {
			if name == a && i+1 < len(args) && slices.Contains(vals, args[i+1]) {
				i++
			}
			continue
		}
		switch r, short := llamaShort[name]; {
		case llama && commandOf(args) == "serve" && llamaVerbose[a]:
			// llama-server's verbosity also puts __verbose in its answers
			out, a = append(out, "--log-level=debug"), "--verbose-answers"
		case short && name == a:
			a = r
		case llama && llamaLong[a] != "":
			a = llamaLong[a]
		}
		if vals, ok := stringSwitches[a]; ok && (i+1 == len(args) || !slices.Contains(vals, args[i+1])) {
			a += "=true"
		}
		if i+1 < len(args) && isFlag(a) && !strings.Contains(a, "=") && negativeNumber(args[i+1]) {
			i++
			if strings.HasPrefix(a, "--") {
				a += "=" + args[i]
			} else {
				a += args[i] // -n-1: kong reads a short flag's tail as its value
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// isFlag reports whether a is a flag (not a value or a negative number).
func isFlag(a string) bool {
	return strings.HasPrefix(a, "-") && len(a) > 1 && !negativeNumber(a)
}

// negativeNumber reports whether a is a negative decimal number (-1, -0.5).
func negativeNumber(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a[1:], 64)
	return err == nil && (a[1] >= '0' && a[1] <= '9' || a[1] == '.')
}

// processEscapes turns \n, \r, \t, \', \", \\ and \xNN into the characters
// they name, as llama.cpp's -e does; any other backslash stays.
func processEscapes(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '\'', '"', '\\':
			b.WriteByte(s[i])
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					break
				}
			}
			b.WriteString(`\x`)
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// kvType resolves --kv-type and llama.cpp's -ctk/-ctv (pipe keeps K and V in
// one type, f16 or f32).
func kvType(kv, k, v string) (string, error) {
	for _, f := range []struct{ name, val string }{{"--cache-type-k", k}, {"--cache-type-v", v}} {
		if f.val != "" && f.val != "f16" && f.val != "f32" {
			return "", fmt.Errorf("%w: %s %s: pipe's KV cache is f16 or f32", errFlag, f.name, f.val)
		}
	}
	if k != "" && v != "" && k != v {
		return "", fmt.Errorf("%w: --cache-type-k %s and --cache-type-v %s differ: pipe keeps K and V in one type", errFlag, k, v)
	}
	if k != "" {
		return k, nil
	}
	if v != "" {
		return v, nil
	}
	return kv, nil
}

// LlamaFlags are llama.cpp's spellings of what `pipe run` does, for its
// users' muscle memory.
type LlamaFlags struct {
	File       string   `short:"f" name:"file" help:"Read the prompt from this file ('-' = stdin), as llama.cpp's -f (replaces -p)." group:"Prompt"`
	Escape     bool     `short:"e" help:"Turn \\n, \\r, \\t, \\', \\\", \\\\ and \\xNN in the prompt into the characters they name, as llama.cpp does." default:"true" negatable:"" group:"Prompt"`
	CacheTypeK string   `name:"cache-type-k" help:"llama.cpp's -ctk: the KV cache type (f16 or f32; it must equal --cache-type-v); overrides --kv-type." group:"Model"`
	CacheTypeV string   `name:"cache-type-v" help:"llama.cpp's -ctv: the KV cache type (f16 or f32)." group:"Model"`
	Reverse    []string `short:"r" name:"reverse-prompt" help:"Stop the reply once the generated text contains this (repeatable; in -i the prompt comes back), as llama.cpp's -r." group:"Prompt"`
	SingleTurn bool     `name:"single-turn" help:"llama.cpp's -st: one chat turn, then exit (-p or -f is the turn; without them one line is read from stdin)." group:"Prompt"`
}

// applyLlama resolves -f, -e and -ctk/-ctv into the prompt and --kv-type,
// and -sys without --chat into --chat (llama-cli applies the chat template
// whenever it has a system prompt to place; sysChat records that it was
// implied, for the error when the model has no template).
func (c *RunCmd) applyLlama(g *Globals) error {
	if c.System != "" && !c.Chat {
		c.Chat, c.sysChat = true, true
		g.Log.Info().Str("event", "chat_template").Msg("-sys given: the prompt is rendered with the model's chat template, as llama-cli does (--chat)")
	}
	if c.File != "" {
		p, err := readPrompt(g.Ctx, c.File)
		if err != nil {
			return err
		}
		c.Prompt = p
	}
	if c.Escape {
		c.Prompt = processEscapes(c.Prompt)
	}
	kv, err := kvType(c.KVType, c.CacheTypeK, c.CacheTypeV)
	c.KVType = kv
	return err
}

// reversePrompts stops a reply at the first of llama.cpp's -r strings the
// generated text contains (it may span tokens).
type reversePrompts struct {
	stops []string
	tail  string // the end of the reply so far, as long as the longest stop
	max   int
}

func newReversePrompts(stops []string) *reversePrompts {
	r := &reversePrompts{}
	for _, s := range stops {
		if s != "" {
			r.stops = append(r.stops, s)
			r.max = max(r.max, len(s))
		}
	}
	return r
}

// add takes a token's text; it reports whether the reply now holds a stop.
func (r *reversePrompts) add(text string) bool {
	if len(r.stops) == 0 {
		return false
	}
	r.tail += text
	for _, s := range r.stops {
		if strings.Contains(r.tail, s) {
			r.tail = ""
			return true
		}
	}
	if len(r.tail) > r.max {
		r.tail = r.tail[len(r.tail)-r.max:]
	}
	return false
}

// reset forgets the reply (a new one starts).
func (r *reversePrompts) reset() { r.tail = "" }

// TemplateFlags choose how chats are rendered: the built-in renderer the
// GGUF's template is detected as (the default), the template run as Jinja
// (llama.cpp's --jinja), a named built-in, or another Jinja template.
type TemplateFlags struct {
	ChatTemplate     string `name:"chat-template" help:"Chat template: a built-in (chatml, harmony, gemma4, or one of llama.cpp's: llama3, mistral-v7, command-r, deepseek3, phi3, gemma, zephyr, vicuna, …), a Jinja file, or Jinja source." placeholder:"NAME|FILE" group:"Prompt"`
	ChatTemplateFile string `name:"chat-template-file" help:"Render chats with this Jinja template file." type:"path" group:"Prompt"`

	TemplateLimitFlags `embed:""`
}

// apply sets tok's chat renderer from the flags and --jinja (jinja).
func (f *TemplateFlags) apply(tok *tokenizer.Tokenizer, jinja bool) error {
	lim, err := f.checked()
	if err == nil {
		err = tok.SetTemplateLimits(lim)
	}
	if err != nil {
		return err
	}
	switch {
	case f.ChatTemplateFile != "":
		b, err := os.ReadFile(f.ChatTemplateFile)
		if err != nil {
			return fmt.Errorf("%w: --chat-template-file: %w", errFlag, err)
		}
		return flagErr("--chat-template-file", tok.UseJinja(string(b), f.ChatTemplateFile))
	case f.ChatTemplate != "":
		if tok.UseBuiltin(f.ChatTemplate) == nil {
			return nil
		}
		if b, err := os.ReadFile(f.ChatTemplate); err == nil {
			return flagErr("--chat-template", tok.UseJinja(string(b), f.ChatTemplate))
		}
		// with --jinja, llama.cpp takes any other string as Jinja source
		if jinja || strings.Contains(f.ChatTemplate, "{%") || strings.Contains(f.ChatTemplate, "{{") {
			return flagErr("--chat-template", tok.UseJinja(f.ChatTemplate, "--chat-template source"))
		}
		return fmt.Errorf("%w: --chat-template %q: not a built-in (chatml, harmony, gemma4, %s), a file or Jinja source",
			errFlag, f.ChatTemplate, strings.Join(tokenizer.LlamaTemplateNames(), ", "))
	case jinja:
		src := tok.ChatTemplate()
		if src == "" {
			return fmt.Errorf("%w: --jinja: the model has no tokenizer.chat_template (give one with --chat-template-file)", errFlag)
		}
		return flagErr("--jinja", tok.UseJinja(src, "GGUF key "+tokenizer.KeyChatTemplate))
	}
	return nil
}

func flagErr(flag string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errFlag, flag, err)
	}
	return nil
}

// dashed spells a llama.cpp long flag's name with '-' for '_' (its value
// unchanged), as llama.cpp's parser reads --backend_sampling as
// --backend-sampling; anything else is left as it is.
func dashed(a string) string {
	name, val, ok := strings.Cut(a, "=")
	d := strings.ReplaceAll(name, "_", "-")
	if d == name || !llamaNames[d] {
		return a
	}
	if ok {
		return d + "=" + val
	}
	return d
}

// llamaNames are every llama.cpp spelling of llamaTable.
var llamaNames = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range llamaTable {
		for _, n := range strings.Fields(f.names) {
			m[n] = true
		}
	}
	return m
}()
