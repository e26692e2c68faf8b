package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/pipe-engine/pipe/tools/load"
)

// load is `pipe bench --clients K --url URL`: K concurrent streaming clients
// against a running server (package tools/load), reported on stdout as a
// text summary, or one JSON line with --format json.
func (c *BenchCmd) load(g *Globals) error {
	if c.Clients < 1 || c.URL == "" || c.N < 1 {
		return fmt.Errorf("%w: --clients %d, --url %q, -n %d: load mode needs --clients >= 1, --url and -n >= 1", errFlag, c.Clients, c.URL, c.N)
	}
	prompts, err := c.clientPrompts()
	if err != nil {
		return err
	}
	rep, err := load.Run(g.Ctx, load.Options{URL: c.URL, Clients: c.Clients, Prompts: prompts, N: c.N, APIKey: os.Getenv("PIPE_API_KEY")})
	if err != nil {
		return fmt.Errorf("bench: --clients: %w", err)
	}
	if c.Format == "json" {
		return json.NewEncoder(g.Stdout).Encode(rep)
	}
	fmt.Fprintf(g.Stdout, "%d clients × %d tokens: aggregate %.2f tok/s over %v; TTFT p50 %v, p95 %v", c.Clients, c.N,
		rep.AggregateTokS, rep.Wall.Round(1e6), rep.TTFTP50.Round(1e6), rep.TTFTP95.Round(1e6))
	if rep.MiBPerToken >= 0 {
		fmt.Fprintf(g.Stdout, "; %.3f MiB read per token", rep.MiBPerToken)
	}
	fmt.Fprintln(g.Stdout)
	for i, cl := range rep.Clients {
		fmt.Fprintf(g.Stdout, "client %d: %d tokens, TTFT %v, %.2f tok/s\n", i, cl.Tokens, cl.TTFT.Round(1e6), cl.TokS())
	}
	return nil
}

// clientPrompts are --client-prompts' non-empty lines, or -p alone.
func (c *BenchCmd) clientPrompts() ([]string, error) {
	if c.ClientPrompts == "" {
		return []string{c.Prompt}, nil
	}
	b, err := os.ReadFile(c.ClientPrompts)
	if err != nil {
		return nil, fmt.Errorf("%w: --client-prompts: %w", errFlag, err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --client-prompts %s: no prompt in it", errFlag, c.ClientPrompts)
	}
	return out, nil
}
