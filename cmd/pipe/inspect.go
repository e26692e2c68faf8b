package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
)

// InspectCmd is `pipe inspect FILE`: a model's architecture, hyper-parameters,
// tensor table and expert/dense split, from its metadata alone.
type InspectCmd struct {
	File    string `arg:"" name:"file" help:"GGUF model file (any shard of a split model)."`
	JSON    bool   `name:"json" help:"Print one JSON object instead of text."`
	NoTable bool   `name:"no-tensors" help:"Omit the tensor table."`
}

// inspectTensor is one row of the tensor table.
type inspectTensor struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Shape  []uint64 `json:"shape"`
	Shard  int      `json:"shard"`
	Offset uint64   `json:"offset"`
	Bytes  uint64   `json:"bytes"`
	Expert bool     `json:"expert"`
}

// inspectReport is the --json output.
type inspectReport struct {
	File             string          `json:"file"`
	Shards           []string        `json:"shards"`
	Version          uint32          `json:"gguf_version"`
	Alignment        uint64          `json:"alignment"`
	Arch             string          `json:"architecture"`
	Name             string          `json:"name,omitempty"`
	Runnable         bool            `json:"runnable"`
	HParams          model.HParams   `json:"hparams"`
	FamilyHParams    any             `json:"family_hparams,omitempty"` // the family's own keys (model.Desc.FamilyHP)
	NTensors         int             `json:"n_tensors"`
	Tensors          []inspectTensor `json:"tensors,omitempty"`
	TensorBytes      uint64          `json:"tensor_bytes"`
	DenseBytes       int64           `json:"dense_bytes"`
	DenseTensorBytes int64           `json:"dense_tensor_bytes"`
	DenseRanges      int             `json:"dense_ranges"`
	ExpertBytes      int64           `json:"expert_bytes"`
	ExpertLayers     int             `json:"expert_layers"`
	OneExpertBytes   []int64         `json:"one_expert_bytes_per_layer"`
	WorkingSetBytes  int64           `json:"working_set_bytes"`
}

// Run opens the file and prints the report.
func (c *InspectCmd) Run(g *Globals) error {
	f, err := gguf.Open(c.File)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	d, err := model.Describe(f)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	rep := buildInspectReport(f, d, !c.NoTable)
	g.Log.Debug().Str("event", "inspect").Str("file", c.File).Str("arch", d.Arch).
		Int("tensors", rep.NTensors).Int64("dense_bytes", d.DenseBytes).Int64("expert_bytes", d.ExpertTotalBytes).
		Int64("working_set_bytes", d.WorkingSet).Msg("inspect")
	if c.JSON {
		enc := json.NewEncoder(g.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeInspectText(g.Stdout, rep, d)
}

func buildInspectReport(f *gguf.File, d *model.Desc, table bool) *inspectReport {
	rep := &inspectReport{
		File: f.Path, Version: f.Version, Alignment: f.Alignment,
		Arch: d.Arch, Name: d.Name, Runnable: d.Supported, HParams: d.HParams, FamilyHParams: d.FamilyHP,
		NTensors: len(f.Tensors), TensorBytes: f.TensorBytes(),
		DenseBytes: d.DenseBytes, DenseTensorBytes: d.DenseTensorBytes, DenseRanges: len(d.Dense),
		ExpertBytes: d.ExpertTotalBytes, OneExpertBytes: d.ExpertBytes, WorkingSetBytes: d.WorkingSet,
	}
	for _, s := range f.Shards {
		rep.Shards = append(rep.Shards, s.Path)
	}
	for _, b := range d.ExpertBytes {
		if b > 0 {
			rep.ExpertLayers++
		}
	}
	if table {
		for i := range f.Tensors {
			t := &f.Tensors[i]
			_, _, isExp := model.IsExpertTensor(t.Name)
			rep.Tensors = append(rep.Tensors, inspectTensor{
				Name: t.Name, Type: t.Type.String(), Shape: t.Dims, Shard: t.Shard,
				Offset: t.Offset, Bytes: t.Size, Expert: isExp,
			})
		}
	}
	return rep
}

func mib(n int64) string { return fmt.Sprintf("%d (%.2f MiB)", n, float64(n)/(1<<20)) }

func writeInspectText(w io.Writer, r *inspectReport, d *model.Desc) error {
	ew := &errWriter{w: w}
	p := func(format string, args ...any) { fmt.Fprintf(ew, format, args...) }
	p("file:          %s\n", printable(r.File))
	if len(r.Shards) > 1 {
		p("shards:        %d (%s)\n", len(r.Shards), printable(strings.Join(r.Shards, ", ")))
	}
	p("format:        GGUF v%d, alignment %d\n", r.Version, r.Alignment)
	status := "runnable"
	if !r.Runnable {
		status = "not runnable: no architecture of this name is built in"
	}
	p("architecture:  %s (%s)\n", printable(r.Arch), status)
	if r.Name != "" {
		p("name:          %s\n", printable(r.Name))
	}
	h := r.HParams
	p("\nhyper-parameters:\n")
	writeHParams(ew, h, model.InspectRows(d))

	if len(r.Tensors) > 0 {
		p("\ntensors (%d):\n", r.NTensors)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "name\ttype\tshape\tshard\toffset\tbytes\t\n")
		for _, t := range r.Tensors {
			name := printable(t.Name)
			if t.Expert {
				name += " *"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t\n", name, t.Type, shape(t.Shape), t.Shard, t.Offset, t.Bytes)
		}
		tw.Flush()
		p("(* = routed-expert tensor)\n")
	}

	p("\ntotals:\n")
	p("  tensors:                %d, %s\n", r.NTensors, mib(int64(r.TensorBytes)))
	p("  dense bytes:            %s in %d ranges (tensors %d + padding)\n", mib(r.DenseBytes), r.DenseRanges, r.DenseTensorBytes)
	p("  expert bytes:           %s in %d layers\n", mib(r.ExpertBytes), r.ExpertLayers)
	p("  one expert per layer:   %s\n", perLayer(r.OneExpertBytes))
	p("  one-token working set:  %s (Σ layers of k=%d × expert bytes)\n", mib(r.WorkingSetBytes), h.NExpertUsed)
	return ew.err
}

// printable escapes what a terminal would act on in text from the file
// (general.name, the architecture, tensor names): control characters,
// including ESC of a terminal escape sequence, tab and newline, as \xHH or
// \uHHHH, and invalid UTF-8 as \xHH. Printable text is unchanged.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shape(dims []uint64) string {
	s := make([]string, len(dims))
	for i, d := range dims {
		s[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// perLayer prints the per-layer expert sizes compactly: runs of equal values
// are collapsed ("110592 ×2, 127488 ×2").
func perLayer(b []int64) string {
	if len(b) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] == b[i] {
			j++
		}
		v := fmt.Sprint(b[i])
		if b[i] == 0 {
			v = "dense" // a layer without routed experts
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", v, j-i))
		} else {
			parts = append(parts, v)
		}
		i = j
	}
	return strings.Join(parts, ", ") + " bytes"
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// writeHParams writes the hyper-parameters table of inspect's text report:
// the common rows, then the family's own.
func writeHParams(ew io.Writer, h model.HParams, own []model.InspectRow) {
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	row := func(k string, v any) {
		if s, ok := v.(string); ok {
			v = printable(s) // rope scaling's type is the file's text
		}
		fmt.Fprintf(tw, "  %s\t%v\n", k, v)
	}
	row("n_layer", h.NLayer)
	row("n_embd", h.NEmbd)
	row("n_head / n_head_kv", fmt.Sprintf("%d / %d", h.NHead, h.NHeadKV))
	if len(h.HeadCountLayers) > 0 {
		row("n_head per layer", fmt.Sprint(h.HeadCountLayers))
	}
	if len(h.HeadCountKVLayers) > 0 {
		row("n_head_kv per layer", fmt.Sprint(h.HeadCountKVLayers))
	}
	row("head_dim (k / v)", fmt.Sprintf("%d / %d", h.HeadDim, h.HeadDimV))
	row("n_expert / used (k)", fmt.Sprintf("%d / %d", h.NExpert, h.NExpertUsed))
	row("n_ff_exp", h.NFFExp)
	if h.NFF != 0 {
		row("n_ff", h.NFF)
	}
	if h.NFFShExp != 0 {
		row("n_ff_shexp", h.NFFShExp)
	}
	if m := h.MoE; m.LeadingDense != 0 || m.NShared != 0 {
		row("dense layers / shared experts", fmt.Sprintf("%d leading / %d", m.LeadingDense, m.NShared))
	}
	if m := h.MoE; m.GatingFunc != 0 || m.WeightsNorm || m.WeightsScale != 0 || m.Groups != 0 {
		row("gating", fmt.Sprintf("func %d, norm %v, scale %g, groups %d of %d", m.GatingFunc, m.WeightsNorm, m.WeightsScale, m.GroupsUsed, m.Groups))
	}
	if a := h.MLA; a.KVLoraRank != 0 {
		row("latent attention", fmt.Sprintf("kv_lora_rank %d, q_lora_rank %d, head k/v %d / %d, n_rot %d", a.KVLoraRank, a.QLoraRank, a.KeyLength, a.ValLength, h.NRot))
	}
	row("n_vocab", h.NVocab)
	row("n_ctx_train", h.NCtxTrain)
	row("rope freq_base", h.RopeFreqBase)
	if h.RopeScalingType != "" || h.RopeScaleLinear != 0 {
		row("rope scaling", fmt.Sprintf("%s ×%g from %d", orDash(h.RopeScalingType), h.RopeScaleLinear, h.RopeScalingOrigCtx))
	}
	row("rms_eps", h.RMSEps)
	if h.SlidingWindow != 0 {
		row("sliding_window", h.SlidingWindow)
	}
	if len(h.SlidingWindowPattern) > 0 {
		row("sliding_window layers", fmt.Sprint(h.SlidingWindowPattern))
	}
	if h.FinalLogitSoftcap != 0 {
		row("final_logit_softcap", h.FinalLogitSoftcap)
	}
	if len(h.RopeSections) > 0 {
		row("rope sections", fmt.Sprint(h.RopeSections))
	}
	if n := h.RecurrentLayers(); n > 0 {
		row("recurrent layers", fmt.Sprintf("%d of %d (state %d floats each)", n, h.NLayer, h.RecurrentFloats()))
	}
	if g := h.SSM; g.StateSize != 0 {
		row("ssm conv / state / heads k,v", fmt.Sprintf("%d / %d / %d,%d", g.ConvKernel, g.StateSize, g.GroupCount, g.TimeStepRank))
	}
	for _, r := range own {
		row(r.Key, r.Value)
	}
	tw.Flush()
}
