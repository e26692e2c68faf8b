package model

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// TestKVPerLayerWidths: layers of different widths keep their own rows, and
// Bytes counts each at its width.
func TestKVPerLayerWidths(t *testing.T) {
	for _, kv := range []KVType{KVF32, KVF16} {
		st, err := NewKV(4, []int{2, 6}, kv)
		if err != nil {
			t.Fatal(err)
		}
		per := int64(4)
		if kv == KVF16 {
			per = 2
		}
		if st.Bytes() != 2*4*(2+6)*per {
			t.Errorf("%v: %d bytes", kv, st.Bytes())
		}
		st.Store(0, 3, []float32{1, 2}, []float32{3, 4})
		st.Store(1, 3, []float32{1, 2, 3, 4, 5, 6}, []float32{6, 5, 4, 3, 2, 1})
		// one position with q·k = 1·1+1·2 for head 0 of layer 0: softmax of one score is 1
		out := make([]float32, 2)
		st.Attend(&AttnArgs{Layer: 0, Dim: 2, Lo: 3, Hi: 3, Scale: 1}, []float32{1, 1}, make([]float32, 1), out)
		if out[0] != 3 || out[1] != 4 {
			t.Errorf("%v layer 0: %v, want the stored V row [3 4]", kv, out)
		}
		st.Attend(&AttnArgs{Layer: 1, Off: 4, Dim: 2, Lo: 3, Hi: 3, Scale: 1}, []float32{1, 1}, make([]float32, 1), out)
		if out[0] != 2 || out[1] != 1 {
			t.Errorf("%v layer 1 head 2: %v, want [2 1]", kv, out)
		}
	}
	if _, err := NewKV(4, []int{2, 0}, KVF32); err == nil {
		t.Error("zero width accepted")
	}
}

// TestAttendWindowAndSink: a sink takes its share of the softmax mass; the
// window bounds which positions are seen.
func TestAttendWindowAndSink(t *testing.T) {
	st, _ := NewKV(3, []int{1}, KVF32)
	for p, v := range []float32{10, 20, 30} {
		st.Store(0, p, []float32{0}, []float32{v})
	}
	out := make([]float32, 1)
	sc := make([]float32, 3)
	st.Attend(&AttnArgs{Dim: 1, Lo: 1, Hi: 2, Scale: 1}, []float32{1}, sc, out)
	if out[0] != 25 { // equal scores over positions 1 and 2
		t.Errorf("window [1,2]: %v, want 25", out[0])
	}
	st.Attend(&AttnArgs{Dim: 1, Lo: 0, Hi: 2, Scale: 1, HasSink: true, Sink: float32(math.Log(3))}, []float32{1}, sc, out)
	if math.Abs(float64(out[0])-10) > 1e-5 { // 1/6 each of 10, 20, 30; the sink takes half
		t.Errorf("sink: %v, want 10", out[0])
	}
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		u := math.Float32bits(x)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	return b
}

// TestDecoderOneLayer runs the skeleton on a one-layer model small enough to
// check by hand: identity projections, zero rotation, a dense FFN hook.
func TestDecoderOneLayer(t *testing.T) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	eye := Weight{Name: "eye", Type: quant.F32, Rows: 2, Cols: 2, Data: f32bytes(1, 0, 0, 1)}
	d := &Decoder{Pool: pool, NEmbd: 2, Eps: 0,
		TokEmbd: Weight{Name: "emb", Type: quant.F32, Rows: 3, Cols: 2, Data: f32bytes(1, 0, 0, 1, 1, 1)},
		Output:  eye, Softcap: 1, EmbdScale: 2,
		Layers: []Layer{{Attn: Attention{Geom: Geom{NHead: 1, NHeadKV: 1, HeadDim: 2, Rope: Rope{NDims: 2, Base: 1e4, FreqScale: 0, AttnScale: 1}, Scale: 1},
			Wq: eye, Wk: eye, Wo: eye}, FFN: doubler{}}},
	}
	st, err := d.NewState(4, KVF32)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := d.Forward(context.Background(), st, []int32{0}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// x = 2·[1 0]; h = RMSNorm(x) = [√2 0]; attention over one position
	// returns V = K = h (Wv absent), so x = [2+√2 0]; the FFN doubles it;
	// the output RMSNorm gives [√2 0] again, soft-capped at 1: tanh.
	want := []float32{float32(math.Tanh(math.Sqrt2)), 0}
	if len(lg) != 1 || math.Abs(float64(lg[0][0]-want[0])) > 1e-6 || lg[0][1] != 0 {
		t.Errorf("logits %v, want %v", lg, want)
	}
	if st.Pos != 1 {
		t.Errorf("pos %d", st.Pos)
	}
	if err := d.PeekRouter(0, []float32{1, 2}, 1, make([]float32, 2)); err == nil {
		t.Error("peek through a layer without a router succeeded")
	}
	if _, err := d.Forward(context.Background(), st, []int32{5}, nil, false); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
}

type doubler struct{}

func (doubler) Run(_ context.Context, p *Pass, _ int, x []float32) error {
	for i := range x {
		x[i] *= 2
	}
	return nil
}

// TestLoaderOptional: an absent optional tensor is no error, a present one
// of the wrong shape is.
func TestLoaderOptional(t *testing.T) {
	f := openGolden(t, "tiny-qwen3moe-F32.gguf")
	d, err := Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	ld := NewLoader(d, nil)
	if _, ok := ld.OptionalMatrix("no.such.weight", 256, -1); ok || ld.Err() != nil {
		t.Errorf("absent: ok %v err %v", ok, ld.Err())
	}
	if _, ok := ld.OptionalVector("no.such.weight", 3); ok || ld.Err() != nil {
		t.Errorf("absent vector: ok %v err %v", ok, ld.Err())
	}
	if _, ok := ld.OptionalMatrix("output_norm.weight", 7, -1); !ok || !errors.Is(ld.Err(), ErrBadModel) {
		t.Errorf("wrong shape: ok %v err %v", ok, ld.Err())
	}
	ld = NewLoader(d, nil)
	ld.Matrix("no.such.weight", 1, 1)
	if !errors.Is(ld.Err(), ErrBadModel) {
		t.Errorf("required and absent: %v", ld.Err())
	}
}
