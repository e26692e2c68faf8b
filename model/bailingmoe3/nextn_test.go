package bailingmoe3_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/bailingmoe3"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/quant"
)

// withNextN is the tiny model's description with an eighth block, a NextN
// layer (nextn_predict_layers 1), carrying the tensors llama.cpp's
// load_arch_tensors creates for it: layer 6's gated MLA and MoE tensors
// under blk.7 and the nextn.eh_proj, nextn.enorm, nextn.hnorm and
// layer_output_norm. Their data is never read, so they point at layer 6's
// bytes (and the tiny model's norm for the new vectors).
func withNextN(d *model.Desc) *model.Desc {
	d2 := *d
	d2.HParams.NLayer++
	own := d.FamilyHP.(bailingmoe3.HParams)
	own.NextN = 1
	own.KDA = append(slices.Clone(own.KDA), false)
	if own.ClampExp != nil {
		own.ClampExp = append(slices.Clone(own.ClampExp), 0)
	}
	if own.ClampShExp != nil {
		own.ClampShExp = append(slices.Clone(own.ClampShExp), 0)
	}
	d2.FamilyHP = own
	d2.Tensors = maps.Clone(d.Tensors)
	add := func(name string, from string, dims ...uint64) {
		ti := *d.Tensors[from]
		ti.Name = name
		if dims != nil {
			ti.Dims = dims
		}
		d2.Tensors[name] = &ti
	}
	for name := range d.Tensors {
		if rest, ok := strings.CutPrefix(name, "blk.6."); ok {
			add("blk.7."+rest, name)
		}
	}
	E := uint64(d.HParams.NEmbd)
	for _, n := range []string{"nextn.enorm.weight", "nextn.hnorm.weight", "layer_output_norm.weight"} {
		add("blk.7."+n, "blk.6.attn_norm.weight")
	}
	add("blk.7.nextn.eh_proj.weight", "blk.6.attn_output.weight", 2*E, E)
	return &d2
}

// TestNextNLayer: a file whose last block is a NextN (MTP) layer loads, and
// the layer is not run: the logits of p0_fox are the tiny model's bit for
// bit, no token reaches layer 7's experts, the state holds the seven
// layers' and `pipe inspect` names the layer. A NextN tensor missing or of
// another shape than llama.cpp's is refused naming it; a file without any
// NextN tensor (llama.cpp's trunk-only case, where they are not required)
// loads.
func TestNextNLayer(t *testing.T) {
	m0, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-bailingmoe3-F32.gguf"), model.Options{})
	d2 := withNextN(d)
	pool := kernels.NewPool(1)
	defer pool.Close()
	m1, err := model.New(d2, goldentest.FileSource(raw), model.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-bailingmoe3-F32/p0_fox__ref.json"))
	forward := func(m model.Model, d *model.Desc) ([][]float32, *goldentest.Rec) {
		st, err := m.NewState(64, model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		rec := goldentest.NewRec(m, d, raw, routing)
		logits, err := m.Forward(context.Background(), st, toks, rec, true)
		if err != nil {
			t.Fatal(err)
		}
		return logits, rec
	}
	want, _ := forward(m0, d)
	got, rec := forward(m1, d2)
	if !slices.EqualFunc(got, want, slices.Equal[[]float32]) {
		t.Errorf("logits with the NextN layer differ from the tiny model's")
	}
	if _, ok := rec.X[7]; ok {
		t.Errorf("the NextN layer 7 was run")
	}
	if a, b := model.StateBytes(d2, 100, 4), model.StateBytes(d, 100, 4); a != b {
		t.Errorf("StateBytes with the NextN layer %d, without %d", a, b)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d2) {
		rows[r.Key] = r.Value
	}
	if rows["NextN (MTP) layers"] != "1 (blk.7: loaded, not run)" || !strings.HasPrefix(rows["layers"], "4 KDA + 3 gated MLA") {
		t.Errorf("inspect rows %q", rows)
	}

	for name, c := range map[string]struct {
		mut func(ts map[string]*gguf.TensorInfo)
		bad string // "" = loads
	}{
		"missing eh_proj keeps nothing required": {func(ts map[string]*gguf.TensorInfo) { delete(ts, "blk.7.nextn.eh_proj.weight") }, ""},
		"missing layer_output_norm":              {func(ts map[string]*gguf.TensorInfo) { delete(ts, "blk.7.layer_output_norm.weight") }, "blk.7.layer_output_norm.weight"},
		"missing experts":                        {func(ts map[string]*gguf.TensorInfo) { delete(ts, "blk.7.ffn_up_exps.weight") }, "blk.7.ffn_up_exps.weight"},
		"hnorm shape": {func(ts map[string]*gguf.TensorInfo) {
			ti := *ts["blk.7.nextn.hnorm.weight"]
			ti.Dims = []uint64{255}
			ts[ti.Name] = &ti
		}, "blk.7.nextn.hnorm.weight"},
		"trunk only": {func(ts map[string]*gguf.TensorInfo) {
			for name := range ts {
				if strings.HasPrefix(name, "blk.7.") {
					delete(ts, name)
				}
			}
		}, ""},
	} {
		d3 := *d2
		d3.Tensors = maps.Clone(d2.Tensors)
		c.mut(d3.Tensors)
		_, err := model.New(&d3, goldentest.FileSource(raw), model.Options{Pool: pool})
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.bad != "" && (!errors.Is(err, model.ErrBadModel) || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s: %v, want %v naming %s", name, err, model.ErrBadModel, c.bad)
		}
	}
}

// writeWithNextN writes the tiny model's file with an eighth block, a NextN
// layer, as a converted Ling 3.0 file has it: block_count 8,
// nextn_predict_layers 1, the per-layer arrays one longer (the NextN block
// an MLA layer without SwiGLU limits), layer 6's MLA and MoE tensors copied
// under blk.7, and the nextn.eh_proj, nextn.enorm, nextn.hnorm and
// layer_output_norm tensors.
func writeWithNextN(t *testing.T, src, dst string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w := gguf.NewWriter(out)
	for _, kv := range f.KV {
		v := kv.Value.Any()
		switch kv.Key {
		case "bailingmoe3.block_count":
			v = uint32(8)
		case "bailingmoe3.attention.head_count_kv":
			v = append(slices.Clone(v.([]uint32)), 1)
		case "bailingmoe3.swiglu_clamp_exp", "bailingmoe3.swiglu_clamp_shexp":
			v = append(slices.Clone(v.([]float32)), 0)
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddKV("bailingmoe3.nextn_predict_layers", uint32(1)); err != nil {
		t.Fatal(err)
	}
	type tensor struct {
		name string
		typ  quant.Type
		dims []uint64
		data []byte
	}
	var ts []tensor
	var mtp []tensor
	for _, ti := range f.Tensors {
		data := raw[ti.Offset : ti.Offset+ti.Size]
		ts = append(ts, tensor{ti.Name, ti.Type, ti.Dims, data})
		if rest, ok := strings.CutPrefix(ti.Name, "blk.6."); ok {
			mtp = append(mtp, tensor{"blk.7." + rest, ti.Type, ti.Dims, data})
		}
	}
	norm, _ := f.Tensor("blk.6.attn_norm.weight")
	normData := raw[norm.Offset : norm.Offset+norm.Size]
	for _, n := range []string{"nextn.enorm.weight", "nextn.hnorm.weight", "layer_output_norm.weight"} {
		mtp = append(mtp, tensor{"blk.7." + n, norm.Type, norm.Dims, normData})
	}
	E := uint64(f.Tensors[0].Dims[0])
	if ti, ok := f.Tensor("token_embd.weight"); ok {
		E = ti.Dims[0]
	}
	mtp = append(mtp, tensor{"blk.7.nextn.eh_proj.weight", quant.F32, []uint64{2 * E, E}, make([]byte, 4*2*E*E)})
	ts = append(ts, mtp...)
	for _, x := range ts {
		if err := w.AddTensor(x.name, x.typ, x.dims); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteHeader(); err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if err := w.WriteTensor(x.name, x.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNextNFile: the tiny model written with a NextN block (metadata as
// a converted Ling 3.0 file has it) is read through bailingmoe3's
// ReadHParams and loads; the NextN layer is not run, so p0_fox's logits
// are the tiny model's bit for bit. (llama.cpp 3f545becc's llama-completion
// loads the same file, creating the NextN tensors with TENSOR_SKIP, and
// decodes the same greedy tokens as from the tiny model: see the commit.)
func TestNextNFile(t *testing.T) {
	src := filepath.Join(golden, "models/tiny-bailingmoe3-F32.gguf")
	dst := filepath.Join(t.TempDir(), "tiny-bailingmoe3-nextn.gguf")
	writeWithNextN(t, src, dst)
	m0, d0, raw0 := goldentest.Load(t, src, model.Options{})
	m1, d1, raw1 := goldentest.Load(t, dst, model.Options{})
	if own := d1.FamilyHP.(bailingmoe3.HParams); own.NextN != 1 || d1.HParams.NLayer != 8 {
		t.Fatalf("nextn_predict_layers %d, block_count %d; want 1 and 8", own.NextN, d1.HParams.NLayer)
	}
	toks := goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-bailingmoe3-F32/p0_fox__ref.json"))
	forward := func(m model.Model, d *model.Desc, raw []byte) [][]float32 {
		st, err := m.NewState(64, model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		logits, err := m.Forward(context.Background(), st, toks, goldentest.NewRec(m, d, raw, routing), true)
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	if !slices.EqualFunc(forward(m1, d1, raw1), forward(m0, d0, raw0), slices.Equal[[]float32]) {
		t.Errorf("logits of the file with a NextN layer differ from the tiny model's")
	}
}
