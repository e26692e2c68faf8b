package qwen35moe

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

// nopFFN leaves the residual stream as the mixer left it.
type nopFFN struct{}

func (nopFFN) Run(context.Context, *model.Pass, int, []float32) error { return nil }

// qWeight is a rows × cols weight of type typ: Q8_0 quantized from random
// values with std; Q4_K random blocks (random quants and 6-bit scales,
// block scales d and dmin 2⁻¹⁰ and 2⁻¹²), as quantizing tens of millions
// of values to Q4_K would take the benchmark most of a minute.
func qWeight(b *testing.B, rng *rand.Rand, typ quant.Type, name string, rows, cols int, std float64) model.Weight {
	b.Helper()
	rb, err := typ.RowSize(int64(cols))
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	switch typ {
	case quant.Q4_K:
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for o := 0; o+144 <= len(data); o += 144 {
			binary.LittleEndian.PutUint16(data[o:], 0x1400)   // d = 2⁻¹⁰
			binary.LittleEndian.PutUint16(data[o+2:], 0x0c00) // dmin = 2⁻¹²
		}
	default:
		if err := quant.Quantize(typ, randVec(rng, rows*cols, std, 0), data); err != nil {
			b.Fatal(err)
		}
	}
	return model.Weight{Name: name, Type: typ, Rows: rows, Cols: cols, Data: data}
}

func randVec(rng *rand.Rand, n int, std, mean float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + std*rng.NormFloat64())
	}
	return v
}

// benchDecoder is a one-layer decoder around a delta-net of
// Qwen3.6-35B-A3B's shapes (gen preset qwen3.6-35b-a3b: n_embd 2048, state
// size 128, 16 key heads, 32 value heads, 4 conv taps) with random
// projections of type typ and a tiny output head.
func benchDecoder(b *testing.B, pool *kernels.Pool, typ quant.Type) *model.Decoder {
	const E, vocab = 2048, 16
	rng := rand.New(rand.NewPCG(3, 9))
	d := &deltaNet{K: 4, S: 128, nk: 16, nv: 32, pool: pool}
	C, V := d.C(), d.V()
	d.norm, d.ssmNorm = randVec(rng, E, 0.1, 1), randVec(rng, d.S, 0.1, 1)
	d.in = &separate{
		qkv:   qWeight(b, rng, typ, "qkv", C, E, 0.03),
		z:     qWeight(b, rng, typ, "z", V, E, 0.03),
		beta:  qWeight(b, rng, typ, "beta", d.nv, E, 0.03),
		alpha: qWeight(b, rng, typ, "alpha", d.nv, E, 0.03),
	}
	d.dt, d.a = randVec(rng, d.nv, 0.5, 0), randVec(rng, d.nv, 0.3, -1)
	d.conv = randVec(rng, d.K*C, 0.3, 0)
	d.out = qWeight(b, rng, typ, "out", E, V, 0.02)
	d.job.fn = d.job.run
	embd := model.Weight{Name: "embd", Type: quant.F32, Rows: vocab, Cols: E, Data: f32Bytes(randVec(rng, vocab*E, 1, 0))}
	out := embd
	return &model.Decoder{Pool: pool, NEmbd: E, Eps: 1e-6, TokEmbd: embd, Output: out,
		OutNorm: randVec(rng, E, 0.1, 1), Layers: []model.Layer{{Mixer: d, FFN: nopFFN{}}}}
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// benchForward runs passes of n tokens through the one-layer decoder,
// keeping the recurrent state across iterations.
func benchForward(b *testing.B, n int, typ quant.Type) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	d := benchDecoder(b, pool, typ)
	st, err := d.NewState(n, model.KVF32)
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(i % 16)
	}
	b.ResetTimer()
	c0 := processCPUSeconds()
	for range b.N {
		st.Pos = 0
		if _, err := d.Forward(context.Background(), st, tokens, nil, false); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0)
}

// reportCPU adds the process CPU time per operation since c0 (cpu-ns/op),
// robust where other processes share the machine.
func reportCPU(b *testing.B, c0 float64) {
	if c := processCPUSeconds() - c0; c > 0 {
		b.ReportMetric(c*1e9/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkDeltaNetStep: one decode token through one Qwen3.6-35B-A3B
// delta-net layer on one thread (projections, convolution, recurrence),
// with Q8_0 projections and with Q4_K ones (the type of every delta-net
// projection in `pipe gen --quant Q4_K_M`).
func BenchmarkDeltaNetStep(b *testing.B) {
	b.Run("Q8_0", func(b *testing.B) { benchForward(b, 1, quant.Q8_0) })
	b.Run("Q4_K", func(b *testing.B) { benchForward(b, 1, quant.Q4_K) })
}

// BenchmarkDeltaNetPrompt: a 64-token prompt pass through the same layer.
func BenchmarkDeltaNetPrompt(b *testing.B) {
	b.Run("Q8_0", func(b *testing.B) { benchForward(b, 64, quant.Q8_0) })
	b.Run("Q4_K", func(b *testing.B) { benchForward(b, 64, quant.Q4_K) })
}

// BenchmarkDeltaRecur: the recurrence alone (recurJob.run over all 32
// value heads) for one token, from a state that has seen 64.
func BenchmarkDeltaRecur(b *testing.B) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	d := benchDecoder(b, pool, quant.Q8_0).Layers[0].Mixer.(*deltaNet)
	rng := rand.New(rand.NewPCG(5, 6))
	C, nv, S := d.C(), d.nv, d.S
	j := &d.job
	j.d, j.n = d, 1
	j.mixed, j.beta, j.g = randVec(rng, C, 0.1, 0), randVec(rng, nv, 0.1, 0.5), randVec(rng, nv, 0.01, -0.05)
	j.o, j.state = make([]float32, nv*S), randVec(rng, nv*S*S, 0.1, 0)
	b.ResetTimer()
	c0 := processCPUSeconds()
	for range b.N {
		for h := range nv {
			j.run(h)
		}
	}
	reportCPU(b, c0)
}
