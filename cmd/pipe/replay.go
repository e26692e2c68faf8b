package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/tools/replay"
)

// ReplayCmd is `pipe replay TRACE…`: offline cache simulation of route_trace
// v1 files, hit % and MiB read per token for each policy at each budget.
type ReplayCmd struct {
	Traces  []string `arg:"" name:"trace" help:"route_trace v1 file(s) (pipe run --route-trace, or BigMoeOnEdge's)." type:"existingfile"`
	Budgets string   `help:"Cache budgets in MiB, comma-separated." default:"250,500,750,1000,1500,2000,3000,4000"`
	Policy  string   `help:"Policies to compare, comma-separated: lru, lfu, random, layer (the engine default), layer+admit (layer with admission: a miss colder than the victim is used but not cached), layer-lrfu, layer-lru, belady (offline optimum)." default:"lru,lfu,random,layer,belady"`
	Phase   string   `help:"Lookups counted in hit %: decode (prefill only warms the cache) or all." enum:"decode,all" default:"decode"`
	Seed    int64    `help:"Seed of the random policy." default:"1"`
	Format  string   `help:"Output format: text, markdown or json." enum:"text,markdown,json" default:"text"`

	Lossy string `help:"Instead of the sweep: replay the lossy routing modes on the decode routings with the cache's residency at each lookup, against lossless, per budget (policy: the first of --policy, layer by default): comma-separated drop=F, dynamic-k=P and, as the comparison, topk=N (a lower --n-expert-used). --moe-substitute cannot be replayed: a trace holds only each routing's top k." placeholder:"MODES"`

	WarmStart   bool `name:"warm-start" help:"Instead of the sweep: the hot set of the trace's first half (its decode tokens' first half and the prefill) warm-starts a new process replaying the second half; hit % of its first --first-tokens tokens and of all, cold vs warm vs continued (the cache as the first half left it)."`
	FirstTokens int  `name:"first-tokens" help:"Head window of --warm-start, in decode tokens." default:"20"`

	Streams int `help:"Replay the decode tokens as N clients batched in one step each, as pipe serve --parallel N runs them (client j starts j/N of the way in and wraps around): each distinct expert of a step's N tokens is looked up and read once. Compare its MiB/token with a run without it." default:"1"`
}

// Run replays every trace and prints one report per trace.
func (c *ReplayCmd) Run(g *Globals) (err error) {
	if c.Streams < 1 || c.Streams > replay.MaxStreams {
		return fmt.Errorf("%w: --streams %d must be 1..%d", errFlag, c.Streams, replay.MaxStreams)
	}
	if c.FirstTokens < 1 {
		return fmt.Errorf("%w: --first-tokens %d must be >= 1", errFlag, c.FirstTokens)
	}
	budgets, err := replay.ParseBudgets(c.Budgets)
	if err != nil {
		return err
	}
	phase, err := replay.ParsePhaseSel(c.Phase)
	if err != nil {
		return fmt.Errorf("--phase: %w", err)
	}
	var pols []string
	for _, p := range strings.Split(c.Policy, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pols = append(pols, p)
		}
	}
	if len(c.Traces) > 1 && c.Format == "json" {
		if err := put(g.Stdout, "["); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				err = put(g.Stdout, "]\n")
			}
		}()
	}
	for i, path := range c.Traces {
		if err := g.Ctx.Err(); err != nil {
			return err
		}
		f, err := safefile.OpenInput(path)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		tr, err := replay.Read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("replay %s: %w", path, err)
		}
		seq := replay.Compile(tr)
		name := filepath.Base(path)
		if c.Streams > 1 {
			if seq, err = replay.Streams(seq, c.Streams); err != nil {
				return fmt.Errorf("replay %s: %w", path, err)
			}
			name = fmt.Sprintf("%s ×%d streams", name, c.Streams)
		}
		if c.Lossy != "" {
			if err := c.lossy(g, name, seq, pols, budgets, i); err != nil {
				return fmt.Errorf("replay %s: %w", path, err)
			}
			continue
		}
		if c.WarmStart {
			if err := c.warm(g, name, seq, pols, budgets, i); err != nil {
				return fmt.Errorf("replay %s: %w", path, err)
			}
			continue
		}
		g.Log.Debug().Str("trace", path).Int("batches", len(seq.Batches)).Int("decode_tokens", seq.DecodeTokens).Msg("replaying")
		rep, err := replay.Sweep(name, seq, replay.SweepOptions{Policies: pols, Budgets: budgets, Phase: phase, Seed: c.Seed})
		if err != nil {
			return fmt.Errorf("replay %s: %w", path, err)
		}
		if err := c.separate(g.Stdout, i); err != nil {
			return err
		}
		if err := rep.Write(g.Stdout, c.Format); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}
	return nil
}

// warm runs the --warm-start replay of one trace (the i-th) and prints it.
func (c *ReplayCmd) warm(g *Globals, name string, seq *replay.Sequence, pols []string, budgets []int64, i int) error {
	if pols == nil || c.Policy == "lru,lfu,random,layer,belady" {
		pols = []string{"lru", "layer"} // the default list holds belady, which needs the future
	}
	rep, err := replay.WarmStart(name, seq, replay.WarmOptions{Policies: pols, Budgets: budgets, FirstTokens: c.FirstTokens, Seed: c.Seed})
	if err != nil {
		return err
	}
	return c.print(g, i, rep)
}

// lossy runs the --lossy replay of one trace (the i-th) and prints it.
func (c *ReplayCmd) lossy(g *Globals, name string, seq *replay.Sequence, pols []string, budgets []int64, i int) error {
	modes, err := replay.ParseLossyModes(c.Lossy)
	if err != nil {
		return err
	}
	pol := "layer"
	if len(pols) > 0 && c.Policy != "lru,lfu,random,layer,belady" {
		pol = pols[0]
	}
	rep, err := replay.LossySweep(name, seq, pol, budgets, modes, c.Seed)
	if err != nil {
		return err
	}
	return c.print(g, i, rep)
}

// tableReport is a report that prints as a text or markdown table.
type tableReport interface {
	Write(w io.Writer, markdown bool) error
}

// print writes the i-th trace's report in --format.
func (c *ReplayCmd) print(g *Globals, i int, rep tableReport) error {
	if err := c.separate(g.Stdout, i); err != nil {
		return err
	}
	if c.Format == "json" {
		enc := json.NewEncoder(g.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.Write(g.Stdout, c.Format == "markdown")
}

// separate writes what goes before the i-th trace's report: nothing for the
// first, a comma between JSON reports, a blank line between text ones.
func (c *ReplayCmd) separate(w io.Writer, i int) error {
	switch {
	case i == 0:
		return nil
	case c.Format == "json":
		return put(w, ",")
	default:
		return put(w, "\n")
	}
}

// put writes s to stdout, naming what failed.
func put(w io.Writer, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("replay: writing the report: %w", err)
	}
	return nil
}
