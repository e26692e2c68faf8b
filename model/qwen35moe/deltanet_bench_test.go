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

// q8Weight is a rows × cols Q8_0 weight of random values with std.
func q8Weight(b *testing.B, rng *rand.Rand, name string, rows, cols int, std float64) model.Weight {
	b.Helper()
	x := randVec(rng, rows*cols, std, 0)
	rb, err := quant.Q8_0.RowSize(int64(cols))
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, int(rb)*rows)
	if err := quant.Quantize(quant.Q8_0, x, data); err != nil {
		b.Fatal(err)
	}
	return model.Weight{Name: name, Type: quant.Q8_0, Rows: rows, Cols: cols, Data: data}
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
// size 128, 16 key heads, 32 value heads, 4 conv taps) with random Q8_0
// projections and a tiny output head.
func benchDecoder(b *testing.B, pool *kernels.Pool) *model.Decoder {
	const E, vocab = 2048, 16
	rng := rand.New(rand.NewPCG(3, 9))
	d := &deltaNet{K: 4, S: 128, nk: 16, nv: 32, pool: pool}
	C, V := d.C(), d.V()
	d.norm, d.ssmNorm = randVec(rng, E, 0.1, 1), randVec(rng, d.S, 0.1, 1)
	d.in = &separate{
		qkv:   q8Weight(b, rng, "qkv", C, E, 0.03),
		z:     q8Weight(b, rng, "z", V, E, 0.03),
		beta:  q8Weight(b, rng, "beta", d.nv, E, 0.03),
		alpha: q8Weight(b, rng, "alpha", d.nv, E, 0.03),
	}
	d.dt, d.a = randVec(rng, d.nv, 0.5, 0), randVec(rng, d.nv, 0.3, -1)
	d.conv = randVec(rng, d.K*C, 0.3, 0)
	d.out = q8Weight(b, rng, "out", E, V, 0.02)
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
func benchForward(b *testing.B, n int) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	d := benchDecoder(b, pool)
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
// delta-net layer on one thread (projections, convolution, recurrence).
func BenchmarkDeltaNetStep(b *testing.B) { benchForward(b, 1) }

// BenchmarkDeltaNetPrompt: a 64-token prompt pass through the same layer.
func BenchmarkDeltaNetPrompt(b *testing.B) { benchForward(b, 64) }

// BenchmarkDeltaRecur: the recurrence alone (recurJob.run over all 32
// value heads) for one token, from a state that has seen 64.
func BenchmarkDeltaRecur(b *testing.B) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	d := benchDecoder(b, pool).Layers[0].Mixer.(*deltaNet)
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
