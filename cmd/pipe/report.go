package main

import (
	"fmt"

	"github.com/pipe-engine/pipe/tools/report"
)

// ReportCmd is `pipe report FILE.csv [FILE2.csv …]`: the warm-up analysis of
// per-token CSVs (pipe's own and the older 9-column files), a side-by-side
// comparison when given several, and optionally a plot.
type ReportCmd struct {
	Files   []string `arg:"" name:"file" help:"Per-token CSV files (--csv output); with several, the first is the baseline of the comparison."`
	Warmup  int      `name:"warmup" default:"-1" help:"Force the number of warm-up tokens excluded from the steady window (-1: find it with the documented rule)."`
	Threads int      `name:"threads" default:"0" help:"Compute threads, for CPU occupancy = cpu_ms / (wall_ms × threads) (0: the summary trailer's threads=, if any)."`
	Format  string   `name:"format" enum:"text,markdown,json" default:"text" help:"Output format: text, markdown or json."`
	Plot    string   `name:"plot" placeholder:"OUT.png|OUT.svg" help:"Also draw per-step wall/compute/io ms and hit % (stacked panels) to this .png or .svg file."`
}

// Run reads, analyses and prints the files.
func (c *ReportCmd) Run(g *Globals) error {
	if c.Warmup < -1 {
		return fmt.Errorf("report: --warmup %d: must be -1 (auto) or ≥ 0", c.Warmup)
	}
	if c.Threads < 0 {
		return fmt.Errorf("report: --threads %d: must be ≥ 0", c.Threads)
	}
	as := make([]*report.Analysis, 0, len(c.Files))
	for _, path := range c.Files {
		if err := g.Ctx.Err(); err != nil {
			return err
		}
		run, err := report.ReadFile(path)
		if err != nil {
			return err
		}
		a, err := report.Analyze(run, report.Options{Warmup: c.Warmup, Threads: c.Threads})
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if why := run.Incomplete(); why != "" {
			g.Log.Warn().Str("event", "incomplete_run").Str("file", path).Msg(why)
		}
		as = append(as, a)
	}
	if err := report.Write(g.Stdout, as, c.Format); err != nil {
		return err
	}
	if c.Plot != "" {
		if err := report.PlotFile(as, c.Plot); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		g.Log.Info().Str("event", "plot").Str("path", c.Plot).Int("runs", len(as)).Msg("plot")
	}
	return nil
}
