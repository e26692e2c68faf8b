package report

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/pipe-engine/pipe/internal/safefile"
)

// Plot geometry. A PNG is rendered at PlotDPI, so it is
// PlotWidth/vg.Inch×PlotDPI by PlotHeight/vg.Inch×PlotDPI pixels (960×720).
const (
	PlotWidth  = 10 * vg.Inch
	PlotHeight = 7.5 * vg.Inch
	PlotDPI    = 96
	// plotFloorMS is the smallest time drawn on the log-scale panel; smaller
	// values (an io_ms of 0 on a fully cached token) are drawn at it.
	plotFloorMS = 1.0
)

// PlotFile draws the runs to path, a .png or .svg file (see WritePlot). It
// refuses a path that is one of the runs' CSV files.
func PlotFile(as []*Analysis, path string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	var buf bytes.Buffer
	if err := WritePlot(&buf, as, format); err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	var guard safefile.Guard
	for _, a := range as {
		guard.Protect("the input", a.Run.Path)
	}
	f, err := guard.Create("--plot", path)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	_, err = f.Write(buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// WritePlot renders the runs as two vertically stacked panels sharing the step
// axis — gonum/plot has no twin y axis, so hit % gets its own panel rather
// than a rescaled right-hand axis:
//
//   - top: per-step wall_ms (solid), compute_ms (dashed) and io_ms (dotted)
//     on a log scale, one colour per run;
//   - bottom: the running cache hit % (0–100), same colours.
//
// Each run's warm-up end (the last warm-up step + ½) is a vertical dash-dot
// line in its colour on both panels. format is "png" or "svg".
func WritePlot(w io.Writer, as []*Analysis, format string) error {
	if len(as) == 0 {
		return fmt.Errorf("no runs to plot: %w", ErrNoTokens)
	}
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(PlotWidth, PlotHeight), vgimg.UseDPI(PlotDPI))}
	case "svg":
		c = vgsvg.New(PlotWidth, PlotHeight)
	default:
		return fmt.Errorf("%q: %w (want .png or .svg)", format, ErrPlotFormat)
	}
	top, bottom, legend, err := buildPlots(as)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	// The legend gets its own strip on the right so it never hides data.
	panels := draw.Crop(dc, 0, -legendWidth, 0, 0)
	strip := draw.Crop(dc, PlotWidth-legendWidth, 0, 0, -vg.Millimeter*8)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Millimeter * 2, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, panels)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	legend.Draw(strip)
	_, err = c.WriteTo(w)
	return err
}

// legendWidth is the width of the legend strip at the right of the panels.
const legendWidth = 2.3 * vg.Inch

// intTicks labels every tick of the step axis with a whole number.
func intTicks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
	}
	return ticks
}

// buildPlots draws runs as on two panels (newPanels, addRun) with their
// legend.
func buildPlots(as []*Analysis) (top, bottom *plot.Plot, legend plot.Legend, err error) {
	top, bottom, legend = newPanels(as)
	for i, a := range as {
		if err := addRun(top, bottom, &legend, plotutil.Color(i), a); err != nil {
			return nil, nil, legend, err
		}
	}
	return top, bottom, legend, nil
}

// newPanels makes the two panels of runs as — per-token times on a log scale
// above, the cache hit rate below — with their axes spanning every run, and
// the legend.
func newPanels(as []*Analysis) (top, bottom *plot.Plot, legend plot.Legend) {
	top, bottom = plot.New(), plot.New()
	legend = plot.NewLegend()
	legend.Top = true
	legend.Left = true
	legend.TextStyle.Font.Size = vg.Points(9)
	legend.ThumbnailWidth = vg.Points(28)
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.Run.Name
	}
	top.Title.Text = "per-token time — " + strings.Join(names, ", ")
	top.Y.Label.Text = "ms (log)"
	top.Y.Scale = plot.LogScale{}
	top.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	top.X.Label.Text = "step"
	top.X.Tick.Marker = plot.TickerFunc(intTicks)
	bottom.X.Tick.Marker = plot.TickerFunc(intTicks)
	bottom.Y.Label.Text = "cache hit %"
	bottom.X.Label.Text = "step"
	bottom.Y.Min, bottom.Y.Max = 0, 100
	top.Add(plotter.NewGrid())
	bottom.Add(plotter.NewGrid())

	lo, hi := math.Inf(1), math.Inf(-1)
	maxStep := 1.0
	for _, a := range as {
		for _, t := range a.Run.Rows {
			for _, v := range []float64{t.WallMS, t.ComputeMS, t.IOMS} {
				v = math.Max(v, plotFloorMS)
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
			maxStep = math.Max(maxStep, float64(t.Step))
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = plotFloorMS, 10*plotFloorMS
	}
	// Whole decades, so the log ticks have labels at both ends.
	top.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	top.Y.Max = math.Pow(10, math.Ceil(math.Log10(hi*1.0001)))
	top.X.Min, bottom.X.Min = 0, 0
	top.X.Max, bottom.X.Max = maxStep+1, maxStep+1
	return top, bottom, legend
}

// addRun draws run a in colour col: its wall, compute and I/O times above,
// its hit rate below, and the end of its warm-up across both.
func addRun(top, bottom *plot.Plot, legend *plot.Legend, col color.Color, a *Analysis) error {
	n := len(a.Run.Rows)
	wall, comp, io, hit := make(plotter.XYs, n), make(plotter.XYs, n), make(plotter.XYs, n), make(plotter.XYs, 0, n)
	for j, t := range a.Run.Rows {
		x := float64(t.Step)
		wall[j] = plotter.XY{X: x, Y: math.Max(t.WallMS, plotFloorMS)}
		comp[j] = plotter.XY{X: x, Y: math.Max(t.ComputeMS, plotFloorMS)}
		io[j] = plotter.XY{X: x, Y: math.Max(t.IOMS, plotFloorMS)}
		if t.CacheHitPct >= 0 {
			hit = append(hit, plotter.XY{X: x, Y: t.CacheHitPct})
		}
	}
	series := []struct {
		xy     plotter.XYs
		what   string
		width  vg.Length
		dashes []vg.Length
		color  color.Color
	}{
		{wall, "wall", 1.6, nil, col},
		{comp, "compute", 1.1, []vg.Length{vg.Points(5), vg.Points(3)}, col},
		{io, "io", 0.9, []vg.Length{vg.Points(1.5), vg.Points(2)}, withAlpha(col, 0xa0)},
	}
	for _, s := range series {
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			return fmt.Errorf("%s %s: %w", a.Run.Name, s.what, err)
		}
		l.Color, l.Width, l.Dashes = s.color, vg.Points(float64(s.width)), s.dashes
		top.Add(l)
		legend.Add(a.Run.Name+" "+s.what+"_ms", l)
	}
	if len(hit) > 0 {
		l, err := plotter.NewLine(hit)
		if err != nil {
			return fmt.Errorf("%s hit: %w", a.Run.Name, err)
		}
		l.Color, l.Width = col, vg.Points(2.4)
		bottom.Add(l)
		legend.Add(a.Run.Name+" hit % (lower panel)", l)
	}
	return addWarmupEnd(top, bottom, legend, col, a)
}

// addWarmupEnd marks the step where run a's warm-up ends on both panels.
func addWarmupEnd(top, bottom *plot.Plot, legend *plot.Legend, col color.Color, a *Analysis) error {
	if end := a.WarmupEndStep(); end > 0 {
		x := float64(end) + 0.5
		label := fmt.Sprintf("%s warm-up end (step %d)", a.Run.Name, end)
		if ttft := a.TTFTms(); !math.IsNaN(ttft) {
			label += fmt.Sprintf(", TTFT %.0f ms", ttft)
		}
		for k, p := range []struct {
			p      *plot.Plot
			y0, y1 float64
		}{{top, top.Y.Min, top.Y.Max}, {bottom, 0, 100}} {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: p.y0}, {X: x, Y: p.y1}})
			if err != nil {
				return err
			}
			l.Color = withAlpha(col, 0xc0)
			l.Width = vg.Points(1.2)
			l.Dashes = []vg.Length{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}
			p.p.Add(l)
			if k == 0 {
				legend.Add(label, l)
			}
		}
	}
	return nil
}

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: a}
}
