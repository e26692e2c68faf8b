package qwen3next_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/model/goldentest"
	_ "github.com/pipe-engine/pipe/model/qwen3next"
	"github.com/pipe-engine/pipe/quant"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

// genTiny writes qwen3next-tiny with quant into a temporary file.
func genTiny(t *testing.T, quant string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := gen.GenerateFile(context.Background(), gen.Options{Preset: "qwen3next-tiny", Quant: quant, Seed: 13, RoutingSkew: gen.DefaultRoutingSkew}, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// load builds the model at path on a pool of threads, with a recording MoE.
func load(t *testing.T, path string, threads int) (model.Model, model.MoE) {
	t.Helper()
	pool := kernels.NewPool(threads)
	t.Cleanup(pool.Close)
	m, d, raw := goldentest.Load(t, path, model.Options{Pool: pool})
	return m, goldentest.NewRec(m, d, raw, routing)
}

var prompt = []int32{300, 32, 113, 117, 105, 278, 293, 372, 110, 287, 111, 120, 32, 106, 309, 112, 115, 265, 310, 258}

// forward feeds tokens in passes of the given sizes (the rest in the last)
// and returns the logits of every position.
func forward(t *testing.T, m model.Model, moe model.MoE, st *model.State, tokens []int32, sizes ...int) [][]float32 {
	t.Helper()
	var out [][]float32
	for len(tokens) > 0 {
		n := len(tokens)
		if len(sizes) > 0 {
			n, sizes = min(sizes[0], n), sizes[1:]
		}
		rows, err := m.Forward(context.Background(), st, tokens[:n], moe, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, append([]float32(nil), r...))
		}
		tokens = tokens[n:]
	}
	return out
}

// run is forward over a fresh state of 64 positions.
func run(t *testing.T, m model.Model, moe model.MoE, tokens []int32, sizes ...int) [][]float32 {
	t.Helper()
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	return forward(t, m, moe, st, tokens, sizes...)
}

// sameBits fails unless got and want are the same bits.
func sameBits(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for p := range want {
		for i := range want[p] {
			if math.Float32bits(got[p][i]) != math.Float32bits(want[p][i]) {
				t.Fatalf("%s: position %d logit %d = %v, want %v", what, p, i, got[p][i], want[p][i])
			}
		}
	}
}

// TestPassesAgree: the logits of a prompt are the same bits whether it is
// fed whole, in chunks (the recurrent and KV states carried between
// passes) or token by token, on F32 and Q4_K_M and at -t 1 and 2.
func TestPassesAgree(t *testing.T) {
	ones := make([]int, len(prompt))
	for i := range ones {
		ones[i] = 1
	}
	for _, q := range []string{"F32", "Q4_K_M"} {
		var ref [][]float32
		path := genTiny(t, q)
		for _, threads := range []int{1, 2} {
			m, moe := load(t, path, threads)
			for _, sizes := range [][]int{{len(prompt)}, {7, 5}, ones} {
				got := run(t, m, moe, prompt, sizes...)
				if ref == nil {
					ref = got
					continue
				}
				sameBits(t, q+" passes", got, ref)
			}
		}
	}
}

// TestRewindStartsOver: rewinding a state with recurrent layers to an
// earlier position starts the sequence over, and feeding the prompt again
// gives the first pass's logits.
func TestRewindStartsOver(t *testing.T) {
	m, moe := load(t, genTiny(t, "F32"), 1)
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	first := forward(t, m, moe, st, prompt)
	if got := st.Rewind(5); got != 0 {
		t.Fatalf("Rewind(5) = %d, want 0 (a recurrent state cannot be rolled back)", got)
	}
	sameBits(t, "after Rewind", forward(t, m, moe, st, prompt), first)
}

// TestStateBytes: the state holds KV rows for the attention layers only
// and the delta-net layers' conv and recurrent states, and the family
// sizes it as NewState allocates it.
func TestStateBytes(t *testing.T) {
	m, _ := load(t, genTiny(t, "F32"), 1)
	st, err := m.NewState(64, model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	hp := m.Desc().HParams
	kv := int64(2) * 2 * 64 * int64(hp.NHeadKV*hp.HeadDim) * 4 // 2 attention layers
	rec := int64(2) * 4 * int64(3*(2*2*32+4*32)+4*32*32)       // 2 delta-net layers
	if got := st.Bytes(); got != kv+rec {
		t.Fatalf("Bytes = %d, want %d KV + %d recurrent", got, kv, rec)
	}
	if got := model.StateBytes(m.Desc(), 64, 4); got != kv+rec {
		t.Fatalf("model.StateBytes = %d, want %d", got, kv+rec)
	}
}

// TestLegacySSMIn: a file converted before llama.cpp split the delta-net's
// input projection (one ssm_in per layer, holding per key head its q, k, v
// and z rows) gives the same logits, bit for bit, as the split attn_qkv
// and attn_gate it is rebuilt from.
func TestLegacySSMIn(t *testing.T) {
	path := genTiny(t, "F32")
	m, moe := load(t, path, 1)
	want := run(t, m, moe, prompt, 7, 5)
	legacy := filepath.Join(t.TempDir(), "legacy.gguf")
	rewrite(t, path, legacy, edit{legacy: &m.Desc().HParams.SSM})
	lm, lmoe := load(t, legacy, 1)
	if lm.Desc().Tensors["blk.0.ssm_in.weight"] == nil || lm.Desc().Tensors["blk.0.attn_qkv.weight"] != nil {
		t.Fatal("the rewritten file has no ssm_in in place of attn_qkv")
	}
	sameBits(t, "ssm_in", run(t, lm, lmoe, prompt, 7, 5), want)
}

// edit is what rewrite changes in a file: metadata set or replaced, the
// delta-net projections merged into the legacy ssm_in (legacy is the
// file's delta-net geometry), tensors added at the end, tensors left out.
type edit struct {
	kv     map[string]any
	legacy *model.SSMGeom
	add    []tensor
	drop   string
}

// tensor is one F32 tensor to add.
type tensor struct {
	name string
	dims []uint64
	data []byte
}

// rewrite copies the F32 file src to dst with the edit applied.
func rewrite(t *testing.T, src, dst string, e edit) {
	t.Helper()
	d, raw := goldentest.Open(t, src)
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	for _, kv := range d.File.KV {
		v := any(kv.Value)
		if nv, ok := e.kv[kv.Key]; ok {
			v = nv
		}
		if kv.Key != gguf.KeyAlignment {
			must(t, w.AddKV(kv.Key, v))
		}
	}
	for k, v := range e.kv {
		if _, ok := d.File.Get(k); !ok {
			must(t, w.AddKV(k, v))
		}
	}
	var outs []tensor
	for i := range d.File.Tensors {
		ti := &d.File.Tensors[i]
		data := raw[ti.Offset : ti.Offset+ti.Size]
		switch {
		case ti.Name == e.drop, e.legacy != nil && strings.HasSuffix(ti.Name, ".attn_gate.weight"):
			continue
		case e.legacy != nil && strings.HasSuffix(ti.Name, ".attn_qkv.weight"):
			blk := strings.TrimSuffix(ti.Name, "attn_qkv.weight")
			z := d.Tensors[blk+"attn_gate.weight"]
			data = mergeQKVZ(data, raw[z.Offset:z.Offset+z.Size], int(ti.Dims[0]), *e.legacy)
			must(t, w.AddTensor(blk+"ssm_in.weight", ti.Type, []uint64{ti.Dims[0], ti.Dims[1] + z.Dims[1]}))
			outs = append(outs, tensor{blk + "ssm_in.weight", nil, data})
			continue
		}
		must(t, w.AddTensor(ti.Name, ti.Type, ti.Dims))
		outs = append(outs, tensor{ti.Name, nil, data})
	}
	for _, a := range e.add {
		if a.name == e.drop {
			continue
		}
		must(t, w.AddTensor(a.name, quant.F32, a.dims))
		outs = append(outs, a)
	}
	must(t, w.WriteHeader())
	for _, o := range outs {
		must(t, w.WriteTensor(o.name, o.data))
	}
	must(t, w.Close())
	must(t, os.WriteFile(dst, buf.Bytes(), 0o644))
}

// mergeQKVZ lays out F32 rows of E floats: per key head its q and k rows
// (S each) then its value heads' v and z rows (r·S each).
func mergeQKVZ(qkv, z []byte, E int, g model.SSMGeom) []byte {
	S, nk, r := g.StateSize, g.GroupCount, g.TimeStepRank/g.GroupCount
	K, row := nk*S, 4*E
	rows := func(b []byte, first, n int) []byte { return b[first*row : (first+n)*row] }
	var out []byte
	for k := 0; k < nk; k++ {
		out = append(out, rows(qkv, k*S, S)...)
		out = append(out, rows(qkv, K+k*S, S)...)
		out = append(out, rows(qkv, 2*K+k*r*S, r*S)...)
		out = append(out, rows(z, k*r*S, r*S)...)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// withNextN writes the tiny F32 file at src to dst with one NextN layer
// appended as convert_hf_to_gguf.py writes it: block_count 5,
// nextn_predict_layers 1, blk.4 a copy of attention layer 3's block plus
// nextn.eh_proj, enorm and hnorm (less the tensor drop).
func withNextN(t *testing.T, src, dst, drop string) {
	t.Helper()
	d, raw := goldentest.Open(t, src)
	var add []tensor
	for i := range d.File.Tensors {
		ti := &d.File.Tensors[i]
		if rest, ok := strings.CutPrefix(ti.Name, "blk.3."); ok {
			add = append(add, tensor{"blk.4." + rest, ti.Dims, raw[ti.Offset : ti.Offset+ti.Size]})
		}
	}
	E := uint64(d.HParams.NEmbd)
	add = append(add,
		tensor{"blk.4.nextn.eh_proj.weight", []uint64{2 * E, E}, make([]byte, 4*2*E*E)},
		tensor{"blk.4.nextn.enorm.weight", []uint64{E}, make([]byte, 4*E)},
		tensor{"blk.4.nextn.hnorm.weight", []uint64{E}, make([]byte, 4*E)})
	rewrite(t, src, dst, edit{kv: map[string]any{"qwen3next.block_count": uint32(5), "qwen3next.nextn_predict_layers": uint32(1)}, add: add, drop: drop})
}

// TestNextNLayersSkipped: a file with a multi-token-prediction layer, as
// the converter writes Qwen3-Next by default, runs its first
// block_count − nextn_predict_layers layers only: the same logits, bit for
// bit, and the same state size as the file without it; the NextN layer is
// neither recurrent nor kept in the state, and inspect names it beside the
// layers run (delta-net / attention, every one MoE with a shared expert). A NextN
// layer missing a tensor llama.cpp requires is refused with ErrBadModel
// naming it.
func TestNextNLayersSkipped(t *testing.T) {
	path := genTiny(t, "F32")
	m, moe := load(t, path, 1)
	want := run(t, m, moe, prompt, 7, 5)
	mtp := filepath.Join(t.TempDir(), "mtp.gguf")
	withNextN(t, path, mtp, "")
	nm, nmoe := load(t, mtp, 2)
	d := nm.Desc()
	if d.HParams.NLayer != 5 || d.HParams.RecurrentLayers() != 2 || d.HParams.IsRecurrent(4) {
		t.Fatalf("block_count %d, %d recurrent layers, layer 4 recurrent %v", d.HParams.NLayer, d.HParams.RecurrentLayers(), d.HParams.IsRecurrent(4))
	}
	sameBits(t, "with a NextN layer", run(t, nm, nmoe, prompt, 7, 5), want)
	if got, w := model.StateBytes(d, 64, 4), model.StateBytes(m.Desc(), 64, 4); got != w {
		t.Fatalf("StateBytes %d with the NextN layer, %d without", got, w)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d) {
		rows[r.Key] = r.Value
	}
	if row := rows["NextN (MTP) layers"]; row != "1 (blk.4: checked, not run)" {
		t.Fatalf("inspect NextN row %q", row)
	}
	if row := rows["layers run"]; row != "4 of 5: 2 delta-net + 2 attention, every one MoE (routed top-2 of 8 + a gated shared expert of 128; no dense layers)" {
		t.Fatalf("inspect layers row %q (the dense / expert split)", row)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	withNextN(t, path, bad, "blk.4.nextn.eh_proj.weight")
	bd, braw := goldentest.Open(t, bad)
	pool := kernels.NewPool(1)
	defer pool.Close()
	_, err := model.New(bd, goldentest.FileSource(braw), model.Options{Pool: pool})
	if !errors.Is(err, model.ErrBadModel) || !strings.Contains(err.Error(), "blk.4.nextn.eh_proj.weight") {
		t.Fatalf("NextN layer without eh_proj: %v, want ErrBadModel naming it", err)
	}
}
