package gptoss

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/router"
)

// The testdata/*.f32 files are llama.cpp's intermediate tensors of the
// tiny gpt-oss F32 golden model, prompt p0_fox (21 tokens, one batch), see
// testdata/README.md. The tiny model's shapes: 4 heads (2 KV heads) of 64,
// n_embd 256, 8 experts, top 4, n_ff 256, sliding window 16.
const (
	nTok    = 21
	nHead   = 4
	nHeadKV = 2
	headDim = 64
	nFF     = 256
	kUsed   = 4
	window  = 16
)

const goldenMXFP4 = "../../testdata/golden/models/tiny-gptoss-MXFP4_MOE.gguf"

func readF32(t *testing.T, name string) []float32 {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// ulps is the distance in units of the last place between two float32s of
// the same sign (large for different signs).
func ulps(a, b float32) int64 {
	if a == b {
		return 0
	}
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if (ia < 0x80000000) != (ib < 0x80000000) {
		return math.MaxInt32
	}
	d := ia - ib
	if d < 0 {
		d = -d
	}
	return d
}

// fileSource serves tensor bytes from a whole file read into memory.
type fileSource struct{ data []byte }

func (s fileSource) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	end := ti.Offset + ti.Size
	if end > uint64(len(s.data)) {
		return nil, fmt.Errorf("tensor %s beyond the file", ti.Name)
	}
	return s.data[ti.Offset:end], nil
}

func openGolden(t *testing.T) (*model.Desc, fileSource) {
	t.Helper()
	f, err := gguf.Open(goldenMXFP4)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(goldenMXFP4)
	if err != nil {
		t.Fatal(err)
	}
	return d, fileSource{data}
}

func loadGolden(t *testing.T) *Model {
	t.Helper()
	d, src := openGolden(t)
	pool := kernels.NewPool(1)
	t.Cleanup(pool.Close)
	m, err := model.New(d, src, model.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return m.(*Model)
}

func TestRegisteredAndShapes(t *testing.T) {
	if !model.Runnable("gpt-oss") {
		t.Fatal("gpt-oss is not registered")
	}
	m := loadGolden(t)
	if m.window != window || m.nFF != nFF || m.k != kUsed || m.headDim != headDim {
		t.Errorf("window %d n_ff %d k %d head_dim %d", m.window, m.nFF, m.k, m.headDim)
	}
	for l, L := range m.layers {
		if L.swa != (l%2 == 0) {
			t.Errorf("layer %d: sliding window %v, want %v", l, L.swa, l%2 == 0)
		}
	}
	spec := m.Router(0)
	if spec.Gating != model.TopKSoftmax || spec.K != kUsed || spec.NExpert != 8 {
		t.Errorf("router spec %+v", spec)
	}
}

// TestYarnParams pins the YaRN constants llama.cpp derives for the file:
// factor 32 from 4096, base 150000, beta 32/1 → corr dims [8, 18]
// (ggml_rope_yarn_corr_dim = 64·ln(4096/(β·2π))/(2·ln 150000): floor(8.09),
// ceil(17.39)), attn factor 1 (get_mscale cancelled by the kernel's factor).
func TestYarnParams(t *testing.T) {
	m := loadGolden(t)
	r := m.rope
	if r.FreqScale != 1.0/32 || r.ExtFactor != 1 || r.Base != 150000 || r.NDims != headDim {
		t.Errorf("rope %+v", r)
	}
	if r.Corr != [2]float32{8, 18} {
		t.Errorf("corr dims %v, want [8 18]", r.Corr)
	}
	if math.Abs(float64(r.AttnFactor)-1) > 1e-6 {
		t.Errorf("attn factor %v, want 1 (get_mscale cancelled)", r.AttnFactor)
	}
}

// TestRopeGolden rotates llama.cpp's biased Q and K of layer 0 and compares
// with its ROPE output: positions 0..20, every pair of the YaRN ramp.
func TestRopeGolden(t *testing.T) {
	m := loadGolden(t)
	for _, c := range []struct {
		in, want string
		heads    int
	}{{"l0_q_biased.f32", "l0_q_rope.f32", nHead}, {"l0_k_biased.f32", "l0_k_rope.f32", nHeadKV}} {
		x, want := readF32(t, c.in), readF32(t, c.want)
		if len(x) != nTok*c.heads*headDim || len(want) != len(x) {
			t.Fatalf("%s: %d floats", c.in, len(x))
		}
		var worst int64
		for p := 0; p < nTok; p++ {
			for h := 0; h < c.heads; h++ {
				o := (p*c.heads + h) * headDim
				m.rope.ApplyNeoX(x[o:o+headDim], p)
			}
		}
		for i := range x {
			d := ulps(x[i], want[i])
			if d > worst {
				worst = d
			}
			// cos/sin from float64 math vs glibc: ≤ 2 ulp, or tiny values near zero
			if d > 2 && math.Abs(float64(x[i]-want[i])) > 1e-7 {
				t.Errorf("%s[%d]: %g, llama.cpp %g", c.want, i, x[i], want[i])
			}
		}
		t.Logf("%s: worst %d ulp", c.want, worst)
	}
}

// TestAttentionSoftmaxGolden checks the sink softmax and the sliding
// window against llama.cpp's kq_soft_max: layer 0 slides (query p sees
// keys p-15..p), layer 1 is full causal attention.
func TestAttentionSoftmaxGolden(t *testing.T) {
	m := loadGolden(t)
	scale := float32(1 / math.Sqrt(headDim))
	for _, c := range []struct {
		layer    int
		kq, want string
	}{{0, "l0_kq.f32", "l0_kq_soft_max.f32"}, {1, "l1_kq.f32", "l1_kq_soft_max.f32"}} {
		kq, want := readF32(t, c.kq), readF32(t, c.want)
		const cells = 256
		if len(kq) != cells*nTok*nHead || len(want) != len(kq) {
			t.Fatalf("%s: %d floats", c.kq, len(kq))
		}
		L := m.layers[c.layer]
		var worst int64
		for h := 0; h < nHead; h++ {
			for p := 0; p < nTok; p++ {
				row := kq[(h*nTok+p)*cells:]
				ref := want[(h*nTok+p)*cells : (h*nTok+p+1)*cells]
				lo := 0
				if L.swa && p-window+1 > 0 {
					lo = p - window + 1
				}
				sc := make([]float32, p-lo+1)
				for j := range sc {
					sc[j] = row[lo+j] * scale
				}
				kernels.SoftmaxSink(sc, L.sinks[h])
				var sum float64
				for j := 0; j < cells; j++ {
					var got float32
					if j >= lo && j <= p {
						got = sc[j-lo]
					}
					sum += float64(got)
					if d := ulps(got, ref[j]); d > worst {
						worst = d
					}
					if d := ulps(got, ref[j]); d > 4 {
						t.Errorf("layer %d head %d query %d key %d: %g, llama.cpp %g", c.layer, h, p, j, got, ref[j])
					}
				}
				if sum >= 1 {
					t.Errorf("layer %d head %d query %d: probabilities sum to %g; the sink must take a share", c.layer, h, p, sum)
				}
			}
		}
		t.Logf("layer %d: worst %d ulp", c.layer, worst)
	}
}

// TestSwiGLUOAIGolden compares with llama.cpp's swiglu_oai of layer 0's
// biased gate and up projections (21 tokens × 4 experts × 256).
func TestSwiGLUOAIGolden(t *testing.T) {
	g, u, want := readF32(t, "l0_gate_biased.f32"), readF32(t, "l0_up_biased.f32"), readF32(t, "l0_swiglu_oai.f32")
	if len(g) != nTok*kUsed*nFF || len(u) != len(g) || len(want) != len(g) {
		t.Fatalf("%d %d %d floats", len(g), len(u), len(want))
	}
	got := make([]float32, len(g))
	SwiGLUOAI(got, g, u, swigluAlpha, swigluLimit)
	var worst int64
	for i := range got {
		d := ulps(got[i], want[i])
		worst = max(worst, d)
		if d > 2 { // expf of float64 math vs glibc: one element differs by 2 ulp
			t.Errorf("[%d] swiglu_oai(%g, %g) = %g, llama.cpp %g", i, g[i], u[i], got[i], want[i])
		}
	}
	t.Logf("worst %d ulp", worst)
}

func TestSwiGLUOAIClamp(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-1.702*x)) }
	nan := float32(math.NaN())
	for _, c := range []struct {
		g, u float32
		want float64
	}{
		{0, 0, 0},
		{1, 0, 1 * sig(1)},
		{20, 0, 7 * sig(7)},          // gate clamped above only
		{-20, 0, -20 * sig(-20)},     // not clamped below
		{2, 100, 2 * sig(2) * 8},     // up clamped to +7
		{2, -100, 2 * sig(2) * (-6)}, // up clamped to -7
		{3, 0.5, 3 * sig(3) * 1.5},
	} {
		out := make([]float32, 1)
		SwiGLUOAI(out, []float32{c.g}, []float32{c.u}, swigluAlpha, swigluLimit)
		if math.Abs(float64(out[0])-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) {
			t.Errorf("swiglu_oai(%g, %g) = %g, want %g", c.g, c.u, out[0], c.want)
		}
	}
	out := make([]float32, 1)
	SwiGLUOAI(out, []float32{nan}, []float32{1}, swigluAlpha, swigluLimit)
	if !math.IsNaN(float64(out[0])) {
		t.Errorf("NaN gate gives %g, want NaN (std::min keeps it)", out[0])
	}
}

// TestRouterGolden: the gating rule this package reports, applied by the
// router package to llama.cpp's biased router logits, selects llama.cpp's
// experts with its weights.
func TestRouterGolden(t *testing.T) {
	m := loadGolden(t)
	logits := readF32(t, "l0_router_logits_biased.f32")
	wantW := readF32(t, "l0_router_weights.f32")
	raw, err := os.ReadFile("testdata/l0_router_topk.i32")
	if err != nil {
		t.Fatal(err)
	}
	spec := m.Router(0)
	ids := make([]int, spec.K)
	w := make([]float32, spec.K)
	probs := make([]float32, spec.NExpert)
	for tk := 0; tk < nTok; tk++ {
		if err := router.Route(spec, logits[tk*8:(tk+1)*8], ids, w, probs); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < spec.K; r++ {
			want := int(int32(binary.LittleEndian.Uint32(raw[4*(tk*spec.K+r):])))
			if ids[r] != want {
				t.Errorf("token %d rank %d: expert %d, llama.cpp %d", tk, r, ids[r], want)
			}
			if d := ulps(w[r], wantW[tk*spec.K+r]); d > 1 {
				t.Errorf("token %d rank %d: weight %g, llama.cpp %g", tk, r, w[r], wantW[tk*spec.K+r])
			}
		}
	}
}

// TestPeekRouter: the peek is the layer's biased router, as Forward feeds
// it: llama.cpp's layer-0 router logits are reproduced from its FFN input.
func TestPeekRouter(t *testing.T) {
	m := loadGolden(t)
	var _ model.RouterPeeker = m
	if err := m.PeekRouter(4, make([]float32, 256), 1, make([]float32, 8)); err == nil {
		t.Error("layer 4 accepted")
	}
	if err := m.PeekRouter(0, make([]float32, 255), 1, make([]float32, 8)); err == nil {
		t.Error("short input accepted")
	}
	zero := make([]float32, 8)
	if err := m.PeekRouter(1, make([]float32, 256), 1, zero); err != nil {
		t.Fatal(err)
	}
	for e, v := range zero { // a zero input yields the bias alone
		if v != m.layers[1].gateB[e] {
			t.Errorf("expert %d: %g, bias %g", e, v, m.layers[1].gateB[e])
		}
	}
}

func TestSoftmaxSinkProperties(t *testing.T) {
	x := []float32{1, 2, 3}
	kernels.SoftmaxSink(x, float32(math.Inf(-1))) // a -inf sink is plain softmax
	y := []float32{1, 2, 3}
	model.Softmax(y)
	for i := range x {
		if x[i] != y[i] {
			t.Errorf("-inf sink: %v, softmax %v", x, y)
		}
	}
	z := []float32{0, 0}
	kernels.SoftmaxSink(z, 0) // three equal logits, one without a value
	for _, v := range z {
		if math.Abs(float64(v)-1.0/3) > 1e-7 {
			t.Errorf("equal sink: %v, want 1/3 each", z)
		}
	}
	big := []float32{0}
	kernels.SoftmaxSink(big, 1000) // the sink dominates without overflow
	if big[0] != 0 || math.IsNaN(float64(big[0])) {
		t.Errorf("large sink: %v, want 0", big)
	}
}

func TestComputeExpertErrors(t *testing.T) {
	m := loadGolden(t)
	var s model.Scratch
	x := make([]float32, 256)
	out := make([]float32, 256)
	if err := m.ComputeExpert(0, 0, [][]byte{{}, {}}, 1, x, out, &s); err == nil {
		t.Error("two parts accepted")
	}
	if err := m.ComputeExpert(9, 0, [][]byte{{}, {}, {}}, 1, x, out, &s); !errors.Is(err, model.ErrBadModel) {
		t.Errorf("layer 9: %v, want ErrBadModel", err)
	}
	if err := m.ComputeExpert(0, 8, [][]byte{{}, {}, {}}, 1, x, out, &s); !errors.Is(err, model.ErrBadModel) {
		t.Errorf("expert 8: %v, want ErrBadModel", err)
	}
	if err := m.ComputeExpert(0, 0, [][]byte{{1}, {2}, {3}}, 1, x, out, &s); err == nil {
		t.Error("truncated expert bytes accepted")
	}
}

var errSource = errors.New("source failed")

// failingSource fails for one tensor.
type failingSource struct {
	fileSource
	name string
}

func (s failingSource) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	if ti.Name == s.name {
		return nil, errSource
	}
	return s.fileSource.TensorBytes(ti)
}

// TestLoadErrors: a tensor that cannot be read is named and wrapped;
// inconsistent hyper-parameters are ErrBadModel.
func TestLoadErrors(t *testing.T) {
	d, src := openGolden(t)
	pool := kernels.NewPool(1)
	defer pool.Close()
	_, err := model.New(d, failingSource{src, "blk.2.attn_sinks.weight"}, model.Options{Pool: pool})
	if !errors.Is(err, errSource) || !strings.Contains(err.Error(), "blk.2.attn_sinks.weight") {
		t.Errorf("err = %v, want the source's error naming blk.2.attn_sinks.weight", err)
	}
	for name, mut := range map[string]func(h *model.HParams){
		"no sliding window": func(h *model.HParams) { h.SlidingWindow = 0 },
		"odd head dim":      func(h *model.HParams) { h.HeadDim, h.HeadDimV, h.NRot = 63, 63, 63 },
		"heads":             func(h *model.HParams) { h.NHead = 8 },
		"rope scaling":      func(h *model.HParams) { h.RopeScalingType = "longrope" },
	} {
		d2 := *d
		mut(&d2.HParams)
		_, err := model.New(&d2, src, model.Options{Pool: pool})
		if name == "rope scaling" {
			if !errors.Is(err, model.ErrUnsupportedArch) {
				t.Errorf("%s: %v, want ErrUnsupportedArch", name, err)
			}
			continue
		}
		if !errors.Is(err, model.ErrBadModel) {
			t.Errorf("%s: %v, want ErrBadModel", name, err)
		}
	}
}

func TestExpertsUsedOverride(t *testing.T) {
	d, src := openGolden(t)
	pool := kernels.NewPool(1)
	defer pool.Close()
	m, err := model.New(d, src, model.Options{Pool: pool, ExpertsUsed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if k := m.Router(0).K; k != 2 {
		t.Errorf("k = %d, want 2", k)
	}
	if _, err := model.New(d, src, model.Options{Pool: pool, ExpertsUsed: 9}); err == nil {
		t.Error("9 of 8 experts accepted")
	}
}

// TestSwiGLUOAIMatchesScalar: SwiGLUOAI (its exponentials vectorized through
// kernels.Exp, oaiChunk at a time) equals the element-by-element formula
// with math.Exp bit for bit (NaN for NaN) on lengths around the chunk and
// the vector width, with clamped, huge, tiny and special inputs, and with
// out aliasing gate.
func TestSwiGLUOAIMatchesScalar(t *testing.T) {
	scalar := func(g, u float32) float32 {
		x := oaiGate(g, swigluLimit)
		y := min(max(u, -swigluLimit), swigluLimit)
		if math.IsNaN(float64(u)) {
			y = u
		}
		e := float32(math.Exp(float64(float32(swigluAlpha * -x))))
		glu := x / (1 + e)
		return glu * (y + 1)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	specials := []float32{0, float32(math.Copysign(0, -1)), 7, 7.0001, -7, 100, -100, -60, -52.1, 1e-40, -1e-40,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32}
	for _, n := range []int{0, 1, 7, 8, 9, 255, 256, 257, 600, 2880} {
		g, u := make([]float32, n), make([]float32, n)
		for i := range g {
			g[i] = float32(rng.NormFloat64() * 6)
			u[i] = float32(rng.NormFloat64() * 6)
			if rng.IntN(8) == 0 {
				g[i] = specials[rng.IntN(len(specials))]
			}
			if rng.IntN(8) == 0 {
				u[i] = specials[rng.IntN(len(specials))]
			}
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = scalar(g[i], u[i])
		}
		got := make([]float32, n)
		SwiGLUOAI(got, g, u, swigluAlpha, swigluLimit)
		SwiGLUOAI(g, g, u, swigluAlpha, swigluLimit) // out aliases gate
		for i := range want {
			for _, v := range []float32{got[i], g[i]} {
				if math.Float32bits(v) != math.Float32bits(want[i]) && !(v != v && want[i] != want[i]) {
					t.Fatalf("n %d [%d]: %g (%#x), element by element %g (%#x)", n, i, v, math.Float32bits(v), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}
