package model

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/quant"
)

// nopFFN leaves the residual stream as the attention left it.
type nopFFN struct{}

func (nopFFN) Run(context.Context, *Pass, int, []float32) error { return nil }

// f32Weight is a rows × cols F32 Weight of w.
func f32Weight(name string, rows, cols int, w []float32) Weight {
	b := make([]byte, 4*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Weight{Name: name, Type: quant.F32, Rows: rows, Cols: cols, Data: b}
}

// latentFixture is a one-layer decoder with latent attention (with the
// query bottleneck) and random F32 weights; its output head is the
// identity, so the logits are the normalised residual stream.
type latentFixture struct {
	E, nh, rank, nope, rope, vdim, qa int
	norm, qaNorm, kvNorm              []float32
	embd, wqa, wq, wkva, wo           []float32
	wkb, wvb                          [][]float32 // per head: rank×nope, vdim×rank (row-major)
	gate                              []float32   // head-wise output gate, nh×E (nil: none)
	scale                             float32
	r                                 Rope
}

func newLatentFixture(rng *rand.Rand) *latentFixture {
	f := &latentFixture{E: 48, nh: 3, rank: 16, nope: 8, rope: 8, vdim: 12, qa: 24, scale: 0.2,
		r: Rope{NDims: 8, Base: 10000, FreqScale: 1, AttnScale: 1}}
	vec := func(n int, std, mean float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		return v
	}
	f.norm, f.qaNorm, f.kvNorm = vec(f.E, 0.1, 1), vec(f.qa, 0.1, 1), vec(f.rank, 0.1, 1)
	f.embd = vec(10*f.E, 1, 0)
	f.wqa = vec(f.qa*f.E, 0.2, 0)
	f.wq = vec(f.nh*(f.nope+f.rope)*f.qa, 0.2, 0)
	f.wkva = vec((f.rank+f.rope)*f.E, 0.2, 0)
	f.wo = vec(f.E*f.nh*f.vdim, 0.2, 0)
	for i := 0; i < f.nh; i++ {
		f.wkb = append(f.wkb, vec(f.rank*f.nope, 0.3, 0))
		f.wvb = append(f.wvb, vec(f.vdim*f.rank, 0.3, 0))
	}
	return f
}

func (f *latentFixture) decoder(pool *kernels.Pool) *Decoder {
	lat := &Latent{Rank: f.rank, NoPE: f.nope, RoPE: f.rope, VDim: f.vdim, Rope: f.r,
		WqA: f32Weight("q_a", f.qa, f.E, f.wqa), QANorm: f.qaNorm,
		Wq:   f32Weight("q_b", f.nh*(f.nope+f.rope), f.qa, f.wq),
		WkvA: f32Weight("kv_a", f.rank+f.rope, f.E, f.wkva), KVANorm: f.kvNorm}
	for i := 0; i < f.nh; i++ {
		lat.WkB = append(lat.WkB, f32Weight("k_b", f.rank, f.nope, f.wkb[i]))
		lat.WvB = append(lat.WvB, f32Weight("v_b", f.vdim, f.rank, f.wvb[i]))
	}
	if f.gate != nil {
		lat.Gate = f32Weight("gate", f.nh, f.E, f.gate)
	}
	eye := make([]float32, f.E*f.E)
	for i := 0; i < f.E; i++ {
		eye[i*f.E+i] = 1
	}
	a := Attention{Geom: LatentGeom(f.nh, f.rank, f.rope, f.scale), Norm: f.norm, Latent: lat,
		Wo: f32Weight("o", f.E, f.nh*f.vdim, f.wo)}
	return &Decoder{Pool: pool, NEmbd: f.E, Eps: 1e-6, TokEmbd: f32Weight("embd", 10, f.E, f.embd),
		Layers: []Layer{{Attn: a, FFN: nopFFN{}}}, Output: f32Weight("out", f.E, f.E, eye)}
}

// matVec64 is W·x for a row-major rows × len(x) matrix, in float64.
func matVec64(w []float32, x []float64) []float64 {
	n := len(x)
	y := make([]float64, len(w)/n)
	for r := range y {
		for c, v := range x {
			y[r] += float64(w[r*n+c]) * v
		}
	}
	return y
}

func rmsNorm64(x []float64, w []float32) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	k := 1 / math.Sqrt(s/float64(len(x))+1e-6)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * k
		if w != nil {
			y[i] *= float64(w[i])
		}
	}
	return y
}

// ropeNorm64 rotates adjacent pairs of x by pos·base^(-2i/n).
func ropeNorm64(x []float64, pos int) {
	n := len(x)
	for i := 0; i < n/2; i++ {
		th := float64(pos) * math.Pow(10000, -2*float64(i)/float64(n))
		c, s := math.Cos(th), math.Sin(th)
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i], x[2*i+1] = x0*c-x1*s, x0*s+x1*c
	}
}

// reference is the layer computed the textbook way, in float64: every head
// decompresses its keys (k_nope = Wk_bᵀ c) and values (v = Wv_b c) from the
// latent c and attends as multi-head attention; it returns the normalised
// residual stream of every token.
func (f *latentFixture) reference(tokens []int32) [][]float64 {
	var cs, kpes [][]float64
	var out [][]float64
	for p, tok := range tokens {
		x := make([]float64, f.E)
		for i := range x {
			x[i] = float64(f.embd[int(tok)*f.E+i])
		}
		h := rmsNorm64(x, f.norm)
		q := matVec64(f.wq, rmsNorm64(matVec64(f.wqa, h), f.qaNorm))
		kv := matVec64(f.wkva, h)
		c := rmsNorm64(kv[:f.rank], f.kvNorm)
		kpe := append([]float64(nil), kv[f.rank:]...)
		ropeNorm64(kpe, p)
		cs, kpes = append(cs, c), append(kpes, kpe)
		att := make([]float64, 0, f.nh*f.vdim)
		for i := 0; i < f.nh; i++ {
			qi := q[i*(f.nope+f.rope) : (i+1)*(f.nope+f.rope)]
			qpe := append([]float64(nil), qi[f.nope:]...)
			ropeNorm64(qpe, p)
			sc := make([]float64, p+1)
			mx := math.Inf(-1)
			for j := 0; j <= p; j++ {
				for d := 0; d < f.nope; d++ { // k_nope[d] = Σ_r Wk_b[r][d] c[r]
					var k float64
					for r := 0; r < f.rank; r++ {
						k += float64(f.wkb[i][r*f.nope+d]) * cs[j][r]
					}
					sc[j] += qi[d] * k
				}
				for d := 0; d < f.rope; d++ {
					sc[j] += qpe[d] * kpes[j][d]
				}
				sc[j] *= float64(f.scale)
				mx = math.Max(mx, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			o := make([]float64, f.vdim)
			for j := range sc {
				v := matVec64(f.wvb[i], cs[j])
				for d := range o {
					o[d] += sc[j] / sum * v[d]
				}
			}
			if f.gate != nil { // o ·= σ(gate_i·h)
				g := matVec64(f.gate[i*f.E:(i+1)*f.E], h)[0]
				for d := range o {
					o[d] /= 1 + math.Exp(-g)
				}
			}
			att = append(att, o...)
		}
		y := matVec64(f.wo, att)
		for i := range x {
			x[i] += y[i]
		}
		out = append(out, rmsNorm64(x, nil))
	}
	return out
}

// TestLatentAttentionReference: the absorbed latent attention (queries
// moved into the latent space, values decompressed after the softmax)
// equals multi-head attention over the decompressed keys and values, for a
// prompt pass and for a token-by-token decode, with F32 and F16 caches, at
// 1 and 2 threads, with and without bailingmoe3's head-wise output gate;
// the cache holds one row of rank + rope per position.
func TestLatentAttentionReference(t *testing.T) {
	for _, gated := range []bool{false, true} {
		f := newLatentFixture(rand.New(rand.NewPCG(22, 2)))
		if gated {
			rng := rand.New(rand.NewPCG(23, 2))
			f.gate = make([]float32, f.nh*f.E)
			for i := range f.gate {
				f.gate[i] = float32(0.5 * rng.NormFloat64())
			}
		}
		t.Run(fmt.Sprintf("gated%v", gated), func(t *testing.T) { checkLatentReference(t, f) })
	}
}

func checkLatentReference(t *testing.T, f *latentFixture) {
	tokens := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	want := f.reference(tokens)
	for _, kv := range []KVType{KVF32, KVF16} {
		for _, threads := range []int{1, 2} {
			for _, prompt := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v/t%d/prompt%v", kv, threads, prompt), func(t *testing.T) {
					pool := kernels.NewPool(threads)
					defer pool.Close()
					d := f.decoder(pool)
					st, err := d.NewState(16, kv)
					if err != nil {
						t.Fatal(err)
					}
					per := int64(2)
					if kv == KVF32 {
						per = 4
					}
					if st.Bytes() != 16*int64(f.rank+f.rope)*per {
						t.Errorf("cache %d bytes, want one row of %d per position", st.Bytes(), f.rank+f.rope)
					}
					var got [][]float32
					if prompt {
						rows, err := d.Forward(context.Background(), st, tokens, nil, true)
						if err != nil {
							t.Fatal(err)
						}
						got = rows
					} else {
						for _, tok := range tokens {
							rows, err := d.Forward(context.Background(), st, []int32{tok}, nil, false)
							if err != nil {
								t.Fatal(err)
							}
							got = append(got, append([]float32(nil), rows[0]...))
						}
					}
					tol := 2e-5
					if kv == KVF16 {
						tol = 3e-3
					}
					for p := range want {
						for i, w := range want[p] {
							if d := math.Abs(float64(got[p][i]) - w); d > tol*(1+math.Abs(w)) {
								t.Fatalf("token %d dim %d: %v, reference %v", p, i, got[p][i], w)
							}
						}
					}
				})
			}
		}
	}
}
