package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/tools/replay"
	"github.com/pipe-engine/pipe/warmstart"
)

// HotSetFlags are the warm-start flags of the commands that decode.
type HotSetFlags struct {
	HotSet    string `name:"hot-set" env:"PIPE_HOT_SET" help:"Hot-set file: the experts' popularity, saved when the run ends and read at the next start for --warm-start ('auto': <user cache dir>/pipe/<model header sha256>.hot; 'none': neither read nor saved)." default:"auto"`
	WarmStart bool   `name:"warm-start" help:"Read the hot set's hottest experts into the cache in the background from the start of the load (while the dense weights load and the prompt is tokenized and prefilled, layer by layer ahead of the computation; it never delays a demand read or a guess of the prompt pass, never exceeds the budget; false for A/B)." default:"true" negatable:""`
}

// options are the decode options of the flags.
func (f *HotSetFlags) options() warmstart.Options {
	path := f.HotSet
	if path == "none" {
		path = ""
	}
	return warmstart.Options{Path: path, Warm: f.WarmStart}
}

// path is the hot-set file --hot-set names ("" for none and for auto, whose
// path depends on the model; Save checks that one).
func (f *HotSetFlags) path() string {
	if f.HotSet == "none" || f.HotSet == warmstart.Auto {
		return ""
	}
	return f.HotSet
}

// protect refuses a --hot-set that is not a hot set (it is read at the start
// and replaced at the end; warmstart.CheckReplace) and makes the hot set an
// input no output may be. It returns the check to make once the outputs are
// created: a hot set that did not exist yet must not be one of them.
func (f *HotSetFlags) protect(guard *safefile.Guard) (after func() error, err error) {
	p := f.path()
	if p == "" {
		return func() error { return nil }, nil
	}
	if err := warmstart.CheckReplace(p); err != nil {
		return nil, fmt.Errorf("%w: --hot-set: %w (use another file, or --hot-set none)", errFlag, err)
	}
	guard.Protect("--hot-set", p)
	if _, err := os.Stat(p); err == nil {
		return func() error { return nil }, nil
	}
	return func() error {
		if err := guard.CheckReplace(p); err != nil {
			return fmt.Errorf("%w: --hot-set: %w", errFlag, err)
		}
		return nil
	}, nil
}

// HotSetCmd is `pipe hotset`: build a model's hot set from a route trace, so
// the first run already warm-starts.
type HotSetCmd struct {
	Model      string `short:"m" required:"" help:"GGUF model file the hot set is for (first shard of a split model)." type:"existingfile"`
	RouteTrace string `name:"route-trace" required:"" help:"route_trace v1 file recorded on this model (pipe run --route-trace)." type:"existingfile"`
	Out        string `short:"o" help:"Hot-set file to write ('auto': where pipe run --hot-set auto looks for it)." default:"auto"`
	Merge      bool   `help:"Add half the popularity of the valid hot set already at -o, as a run's end does."`
}

// Run counts every routing of the trace and saves the hot set.
func (c *HotSetCmd) Run(g *Globals) error {
	f, err := gguf.Open(c.Model)
	if err != nil {
		return err
	}
	d, err := model.Describe(f)
	if err != nil {
		return err
	}
	shape := d.ExpertShape()
	id, err := warmstart.FileID(f)
	if err != nil {
		return err
	}
	tf, err := safefile.OpenInput(c.RouteTrace)
	if err != nil {
		return fmt.Errorf("--route-trace: %w", err)
	}
	tr, err := replay.Read(tf)
	tf.Close()
	if err != nil {
		return fmt.Errorf("--route-trace %s: %w", c.RouteTrace, err)
	}
	if th, hp := tr.Header, d.HParams; th.Arch != d.Arch || th.NLayer != hp.NLayer || th.NExpert != hp.NExpert {
		return fmt.Errorf("%w: --route-trace %s was recorded on another model (%s, %d layers of %d experts; %s is %s, %d layers of %d)",
			errFlag, c.RouteTrace, th.Arch, th.NLayer, th.NExpert, c.Model, d.Arch, hp.NLayer, hp.NExpert)
	}
	h := warmstart.NewHotSet(id, shape)
	for i, r := range tr.Rows {
		if r.Layer >= len(shape) || r.Expert >= shape[r.Layer] {
			return fmt.Errorf("%w: --route-trace %s row %d: layer %d expert %d is not an expert of %s", errFlag, c.RouteTrace, i+1, r.Layer, r.Expert, c.Model)
		}
		h.Add(r.Layer, []int{r.Expert})
	}
	path, err := warmstart.ResolvePath(c.Out, id)
	if err != nil {
		return err
	}
	if err := warmstart.CheckReplace(path); err != nil {
		return fmt.Errorf("%w: -o: %w", errFlag, err)
	}
	if c.Merge {
		old, err := warmstart.Load(path, id, shape)
		switch {
		case err == nil:
			if err := h.Merge(old); err != nil {
				return err
			}
		case !errors.Is(err, fs.ErrNotExist):
			g.Log.Warn().Str("event", "hot_set_ignored").Err(err).Msg("--merge: the hot set there is not used")
		}
	}
	if err := h.Save(path, append(gguf.ShardPaths(c.Model), c.RouteTrace)...); err != nil {
		return err
	}
	g.Log.Info().Str("event", "hot_set_saved").Str("path", path).Int("routings", len(tr.Rows)).Int("experts", len(h.Hottest(int(^uint(0)>>1)))).Msg("hot set written")
	if _, err := fmt.Fprintln(g.Stdout, path); err != nil {
		return fmt.Errorf("stdout: %w", err)
	}
	return nil
}
