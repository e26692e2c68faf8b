package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
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
}

// llamaLong maps llama.cpp long flags whose pipe form differs in more than
// its name (plain renames are kong aliases on the flags themselves).
var llamaLong = map[string]string{
	"--conversation":      "--interactive",
	"--no-conversation":   "--interactive=false",
	"--no-display-prompt": "--echo=false",
}

const (
	gpuHint     = "pipe runs on the CPU: it keeps the dense weights resident and streams routed experts from the file into a bounded cache (--cache-mb)"
	expertHint  = "pipe always keeps routed experts off the resident set and streams them (--moe-stream); size their cache with --cache-mb"
	batchHint   = "pipe prefills the whole prompt as one batch; there is no batch size to set"
	mlockHint   = "pipe reads dense weights into anonymous memory (--dense-weights anon) and bounds the expert cache (--cache-mb); there is nothing to lock"
	noMmapHint  = "use --moe-stream=true (experts read with O_DIRECT, never mmap'd) and --dense-weights anon"
	parallelHnt = "pipe decodes one sequence at a time; pipe serve queues requests"
)

// llamaUnsupported are llama.cpp flags pipe cannot honour, with what pipe
// does instead.
var llamaUnsupported = map[string]string{
	"-ngl": gpuHint, "--n-gpu-layers": gpuHint, "--gpu-layers": gpuHint,
	"-sm": gpuHint, "--split-mode": gpuHint, "-ts": gpuHint, "--tensor-split": gpuHint,
	"-mg": gpuHint, "--main-gpu": gpuHint, "-dev": gpuHint, "--device": gpuHint,
	"-ot": expertHint, "--override-tensor": expertHint,
	"-ncmoe": expertHint, "--n-cpu-moe": expertHint, "-cmoe": expertHint, "--cpu-moe": expertHint,
	"-b": batchHint, "--batch-size": batchHint, "-ub": batchHint, "--ubatch-size": batchHint,
	"--mlock": mlockHint, "--no-mmap": noMmapHint, "--mmap": noMmapHint,
	"-fa": "pipe's attention has one CPU implementation; there is no flash-attention switch", "--flash-attn": "pipe's attention has one CPU implementation; there is no flash-attention switch",
	"-np": parallelHnt, "--parallel": parallelHnt, "-cb": parallelHnt, "--cont-batching": parallelHnt,
}

// stringSwitches are pipe flags with a value that llama.cpp's (and
// BigMoeOnEdge's) users type bare: alone they mean "=true".
var stringSwitches = map[string][]string{
	"--moe-stream": {"auto", "true", "false"},
}

// translateArgs rewrites llama.cpp spellings into pipe's (see above) up to a
// "--" that ends the flags.
func translateArgs(args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		name, _, _ := strings.Cut(a, "=")
		if hint, ok := llamaUnsupported[name]; ok {
			return nil, fmt.Errorf("%w: %s is a llama.cpp flag pipe cannot honour: %s", errFlag, name, hint)
		}
		if r, ok := llamaShort[name]; ok && name == a {
			out = append(out, r)
			continue
		}
		if r, ok := llamaLong[a]; ok {
			out = append(out, r)
			continue
		}
		if vals, ok := stringSwitches[a]; ok && (i+1 == len(args) || !slices.Contains(vals, args[i+1])) {
			out = append(out, a+"=true")
			continue
		}
		out = append(out, a)
	}
	return out, nil
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

// readPromptFile reads -f: a file, or stdin for "-".
func readPromptFile(path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("%w: -f: %w", errFlag, err)
	}
	return string(b), nil
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
	File       string `short:"f" name:"file" help:"Read the prompt from this file ('-' = stdin), as llama.cpp's -f (replaces -p)." group:"Prompt"`
	Escape     bool   `short:"e" help:"Turn \\n, \\r, \\t, \\', \\\", \\\\ and \\xNN in the prompt into the characters they name, as llama.cpp does." default:"true" negatable:"" group:"Prompt"`
	CacheTypeK string `name:"cache-type-k" help:"llama.cpp's -ctk: the KV cache type (f16 or f32; it must equal --cache-type-v); overrides --kv-type." group:"Model"`
	CacheTypeV string `name:"cache-type-v" help:"llama.cpp's -ctv: the KV cache type (f16 or f32)." group:"Model"`
}

// applyLlama resolves -f, -e and -ctk/-ctv into the prompt and --kv-type.
func (c *RunCmd) applyLlama() error {
	if c.File != "" {
		p, err := readPromptFile(c.File)
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
