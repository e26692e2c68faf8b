package gen

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

// quantRow generates row r of t the way the generator does (floats, then the
// tensor's type) and returns the dequantized values the engine will see.
func quantRow(t *testing.T, g *weightGen, r uint64) []float32 {
	t.Helper()
	n := int(g.t.Dims[0])
	x := make([]float32, n)
	g.row(r, newRNG(1, g.t.Name, 0), x)
	rs, _ := g.t.Type.RowSize(int64(n))
	b := make([]byte, rs)
	if err := encodeRow(g.t.Type, x, b); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, n)
	if err := quant.Dequantize(g.t.Type, b, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// TestCopyHead: in qwen3-30b-a3b's layer 0, the first KV group's constant q and
// k (after quantization, RMS norm and NEOX RoPE) put most attention on the
// previous token, v copies the routing dimensions and attn_output writes them
// back with gain copyGain; routers read only routing and anchor dimensions.
func TestCopyHead(t *testing.T) {
	p, _ := LookupPreset("qwen3-30b-a3b")
	ft, _ := ParseFileType("Q4_K_M")
	pl, err := NewPlan(p, ft, 1000)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string) *TensorSpec {
		for i := range pl.Tensors {
			if pl.Tensors[i].Name == name {
				return &pl.Tensors[i]
			}
		}
		t.Fatalf("no %s", name)
		return nil
	}
	hd := p.HeadDim
	vec := func(name string, head int) []float64 {
		g := newWeightGen(&pl.Preset, spec(name), 1, DefaultRoutingSkew)
		v := make([]float64, hd)
		var ss float64
		for j := 0; j < hd; j++ {
			w := quantRow(t, g, uint64(head*hd+j))
			for a := p.NEmbd - nAnchorDims; a < p.NEmbd; a++ {
				v[j] += float64(w[a]) // x̂ = 1 on the anchors, 0 elsewhere
			}
			for i, x := range w[:p.NEmbd-nAnchorDims] {
				if x != 0 {
					t.Fatalf("%s row %d reads residual dimension %d", name, j, i)
				}
			}
			ss += v[j] * v[j]
		}
		for j := range v { // RMS norm
			v[j] /= math.Sqrt(ss / float64(hd))
		}
		return v
	}
	rope := func(x []float64, pos int) []float64 {
		y := make([]float64, hd)
		for i := 0; i < hd/2; i++ {
			th := float64(pos) * math.Pow(float64(p.RopeBase), -2*float64(i)/float64(hd))
			c, s := math.Cos(th), math.Sin(th)
			y[i] = x[i]*c - x[i+hd/2]*s
			y[i+hd/2] = x[i]*s + x[i+hd/2]*c
		}
		return y
	}
	k := vec("blk.0.attn_k.weight", 0)
	const pos = 50
	for _, head := range []int{0, p.NHead/p.NHeadKV - 1} {
		q := rope(vec("blk.0.attn_q.weight", head), pos)
		logits := make([]float64, pos+1)
		var mx float64 = -1e9
		for d := 0; d <= pos; d++ {
			kr := rope(k, pos-d)
			var dot float64
			for j := range q {
				dot += q[j] * kr[j]
			}
			logits[d] = dot / math.Sqrt(float64(hd))
			mx = math.Max(mx, logits[d])
		}
		var sum float64
		for d := range logits {
			sum += math.Exp(logits[d] - mx)
		}
		w1 := math.Exp(logits[1]-mx) / sum
		if logits[1] != mx || w1 < 0.8 {
			t.Errorf("head %d: attention on the previous token %.2f (logits %.2f %.2f %.2f)", head, w1, logits[0], logits[1], logits[2])
		}
	}
	// v copies the routing dimensions
	gv := newWeightGen(&pl.Preset, spec("blk.0.attn_v.weight"), 1, DefaultRoutingSkew)
	for j := 0; j < hd; j += 37 {
		w := quantRow(t, gv, uint64(j))
		for i, x := range w {
			if (i == j) != (x == 1) {
				t.Fatalf("v row %d: column %d = %v", j, i, x)
			}
		}
	}
	// attn_output writes them back with gain copyGain, over the group's heads
	gout := newWeightGen(&pl.Preset, spec("blk.0.attn_output.weight"), 1, DefaultRoutingSkew)
	w := quantRow(t, gout, 5)
	var gain float64
	for h := 0; h < p.NHead/p.NHeadKV; h++ {
		gain += float64(w[h*hd+5])
	}
	if math.Abs(gain-copyGain) > 0.02 {
		t.Errorf("copy gain %.3f, want %.3f", gain, copyGain)
	}
	// layer 1 has no copy head
	if g := newWeightGen(&pl.Preset, spec("blk.1.attn_q.weight"), 1, DefaultRoutingSkew); g.special(0) {
		t.Error("layer 1 has a copy head")
	}
	checkRouterAnchors(t, pl, spec)
}

// checkRouterAnchors: routers read only routing and anchor dimensions, and
// the anchors carry the experts' popularity (none with --routing-skew 0).
func checkRouterAnchors(t *testing.T, pl *Plan, spec func(string) *TensorSpec) {
	t.Helper()
	p := pl.Preset
	// routers read only routing and anchor dimensions; anchors carry popularity
	gr := newWeightGen(&pl.Preset, spec("blk.3.ffn_gate_inp.weight"), 1, DefaultRoutingSkew)
	row := make([]float32, p.NEmbd)
	var popW []float64
	for e := 0; e < p.NExpert; e++ {
		gr.row(uint64(e), newRNG(1, "x", 0), row)
		for i := routeDimsOf(&p); i < p.NEmbd-nAnchorDims; i++ {
			if row[i] != 0 {
				t.Fatalf("router row %d reads dimension %d", e, i)
			}
		}
		popW = append(popW, float64(row[p.NEmbd-1]))
	}
	var m, v float64
	for _, x := range popW {
		m += x
	}
	m /= float64(len(popW))
	for _, x := range popW {
		v += (x - m) * (x - m)
	}
	if v == 0 {
		t.Error("router anchor weights carry no popularity")
	}
	if g0 := newWeightGen(&pl.Preset, spec("blk.3.ffn_gate_inp.weight"), 1, 0); true {
		g0.row(0, newRNG(1, "x", 0), row)
		if row[p.NEmbd-1] != 0 {
			t.Error("--routing-skew 0 still has popularity")
		}
	}
}

// BenchmarkGeneratePooled measures assembling tensors from block pools (the
// path the large models take), in bytes of model written.
func BenchmarkGeneratePooled(b *testing.B) {
	m, err := Prepare(Options{Preset: "qwen3-30b-a3b", Layers: 1, VocabSize: 300, Seed: 1, RoutingSkew: DefaultRoutingSkew})
	if err != nil {
		b.Fatal(err)
	}
	pools, err := buildPools(context.Background(), 1, m.Plan, 2)
	if err != nil {
		b.Fatal(err)
	}
	var ts *TensorSpec
	for i := range m.Plan.Tensors {
		if m.Plan.Tensors[i].Name == "blk.0.ffn_up_exps.weight" {
			ts = &m.Plan.Tensors[i]
		}
	}
	b.SetBytes(int64(ts.Bytes()))
	var buf []byte
	for b.Loop() {
		if buf, err = m.tensorBytes(context.Background(), ts, pools, 2, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGemma4Scales: gemma4 presets write llama.cpp's converter's rope
// factors (gemma4-26b-a4b: 0.25 of the 512-dim full head rotates, 64 pairs
// of 1 then 192 of 1e30; gemma4-tiny: all 128/2 pairs rotate), a token
// embedding of std 1/√n_embd with anchors at anchorValue/√n_embd (Gemma
// multiplies by √n_embd: the residual is then N(0, 1) as for the other
// architectures, and the tied logits do not saturate the soft-cap), and
// ffn_gate_inp.scale = √n_embd (the router's 1/√n_embd is undone).
func TestGemma4Scales(t *testing.T) {
	for _, c := range []struct {
		preset string
		ones   int
	}{{"gemma4-26b-a4b", 64}, {"gemma4-tiny", 64}} {
		p, err := LookupPreset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		rf := &TensorSpec{Name: "rope_freqs.weight", Layer: -1, Dims: []uint64{uint64(p.HeadDimFull / 2)}, Role: RoleRopeFreqs}
		dst := make([]float32, p.HeadDimFull/2)
		newWeightGen(&p, rf, 1, DefaultRoutingSkew).row(0, newRNG(1, "t", 0), dst)
		for i, v := range dst {
			if want := float32(1); (i < c.ones && v != want) || (i >= c.ones && v != 1e30) {
				t.Fatalf("%s rope_freqs[%d] = %v (%d rotated pairs expected)", c.preset, i, v, c.ones)
			}
		}
		sq := math.Sqrt(float64(p.NEmbd))
		if got := stdOf(&p, &TensorSpec{Role: RoleEmbed}); math.Abs(got-1/sq) > 1e-12 {
			t.Errorf("%s: token_embd std %v, want 1/√%d", c.preset, got, p.NEmbd)
		}
		if got := embedAnchor(1 / sq); math.Abs(float64(got)-anchorValue/sq) > 1e-6 {
			t.Errorf("%s: anchor %v", c.preset, got)
		}
		sc := &TensorSpec{Name: "blk.0.ffn_gate_inp.scale", Layer: 0, Dims: []uint64{uint64(p.NEmbd)}, Role: RoleScale}
		v := make([]float32, p.NEmbd)
		newWeightGen(&p, sc, 1, DefaultRoutingSkew).row(0, newRNG(1, "t", 0), v)
		if v[0] != float32(sq) {
			t.Errorf("%s: ffn_gate_inp.scale %v, want √n_embd", c.preset, v[0])
		}
	}
	q, _ := LookupPreset("qwen3-tiny")
	if stdOf(&q, &TensorSpec{Role: RoleEmbed}) != embedStd {
		t.Error("qwen3 embedding scaled")
	}
}

// TestMergeFamilyMeta: a family key that is a common key replaces the
// common value in place (GGUF holds a key once: nemotron_h_moe's per-layer
// feed_forward_length); other keys are appended in order.
func TestMergeFamilyMeta(t *testing.T) {
	ps := []kvPair{{"a.block_count", uint32(3)}, {"a.feed_forward_length", uint32(8)}}
	got := mergeFamilyMeta(ps, "a.", []MetaKV{{"expert_count", uint32(4)}, {"feed_forward_length", []uint32{0, 8, 0}}})
	if len(got) != 3 || got[1].k != "a.feed_forward_length" || fmt.Sprint(got[1].v) != "[0 8 0]" || got[2].k != "a.expert_count" {
		t.Errorf("merged %v", got)
	}
}

// TestExpertIDsRows: a hash-routing table (RoleExpertIDs) is typed I32 by
// assignTypes whatever the file type, and each of its rows holds distinct
// expert ids in range that encodeRow stores as little-endian int32.
func TestExpertIDsRows(t *testing.T) {
	p := &Preset{NExpert: 8}
	ts := []TensorSpec{{Name: "blk.0.ffn_gate_tid2eid.weight", Layer: 0, Dims: []uint64{6, 500}, Role: RoleExpertIDs}}
	if err := assignTypes(p, FileType{Default: quant.Q4_K}, ts); err != nil || ts[0].Type != quant.I32 {
		t.Fatalf("type %v, %v; want I32", ts[0].Type, err)
	}
	g := newWeightGen(p, &ts[0], 1, 0)
	rg := newRNG(1, "ids", 0)
	row, raw := make([]float32, 6), make([]byte, 24)
	seen := map[int32]bool{}
	for r := range uint64(500) {
		g.row(r, rg, row)
		if err := encodeRow(quant.I32, row, raw); err != nil {
			t.Fatal(err)
		}
		ids := map[int32]bool{}
		for i := range row {
			id := int32(binary.LittleEndian.Uint32(raw[4*i:]))
			if id < 0 || id >= 8 || ids[id] || float32(id) != row[i] {
				t.Fatalf("row %d: ids %v (bytes %x)", r, row, raw)
			}
			ids[id], seen[id] = true, true
		}
	}
	if len(seen) != 8 {
		t.Fatalf("500 rows used experts %v, want all 8", seen)
	}
}
