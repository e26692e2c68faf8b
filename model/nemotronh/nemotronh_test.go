package nemotronh_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/kernels"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/goldentest"
	"github.com/pipe-engine/pipe/model/nemotronh"
	"github.com/pipe-engine/pipe/router"
)

// routing is what the recording MoE routes with: the engine's router.
var routing = goldentest.Router{Route: router.Route, ScratchLen: router.ScratchLen}

const golden = "../../testdata/golden"

// moeLayers are the MoE blocks of the tiny model's pattern ME*EME.
var moeLayers = []int{1, 3, 5}

func goldenPrompt(t *testing.T) []int32 {
	return goldentest.PromptTokens(t, filepath.Join(golden, "runs/tiny-nemotron-h-moe-F32/p0_fox__ref.json"))
}

// TestIntermediatesMatchLlamaCpp runs the golden F32 model on p0_fox and
// compares, block by block, with llama.cpp's dump of the same pass: every
// MoE block's input (attn_norm-L, the normed residual stream: it carries
// the Mamba-2 block 0, the attention block 2 and the Mamba-2 block 4 before
// it), its router logits, the experts chosen by σ(logits) + exp_probs_b
// with their renormalised, ×2.5 weights, the routed output; the logits
// last. Only float summation orders differ: bound 1e-5.
func TestIntermediatesMatchLlamaCpp(t *testing.T) {
	const bound = 1e-5
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-nemotron-h-moe-F32.gguf"), model.Options{})
	rec := goldentest.NewRec(m, d, raw, routing)
	prompt := goldenPrompt(t)
	st, err := m.NewState(len(prompt), model.KVF32)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward(context.Background(), st, prompt, rec, true)
	if err != nil {
		t.Fatal(err)
	}
	dp := goldentest.LoadDump(t, filepath.Join(golden, "tensors/tiny-nemotron-h-moe-F32/p0_fox__ref"))
	check := func(what string, got [][]float32) float64 {
		e := goldentest.RelErr(t, what, got, dp.F32(t, what))
		if e > bound {
			t.Errorf("%s: relative error %.3g > %.0e", what, e, bound)
		}
		return e
	}
	hp := d.HParams
	for _, l := range moeLayers {
		check(fmt.Sprintf("attn_norm-%d", l), rec.X[l])
		le := check(fmt.Sprintf("ffn_moe_logits-%d", l), rec.Logits[l])
		dp.CheckRouting(t, rec, l, hp.NExpert, m.Router(l).K, "ffn_moe_weights_scaled", le)
		check(fmt.Sprintf("ffn_moe_out-%d", l), rec.Out[l])
	}
	check("result_output", logits)
}

// TestPassesAgree: the logits of the prompt are the same bits whether it
// is fed whole, in chunks (the convolution, SSM and KV states carried
// between passes) or token by token, at -t 1 and 2 (the scan's heads run
// on the pool); the state is the attention block's KV rows and the two
// Mamba-2 blocks' states, the MoE blocks keep none.
func TestPassesAgree(t *testing.T) {
	prompt := goldenPrompt(t)
	var ref [][]float32
	for _, threads := range []int{1, 2} {
		pool := kernels.NewPool(threads)
		t.Cleanup(pool.Close)
		m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-nemotron-h-moe-Q4_K_M.gguf"), model.Options{Pool: pool})
		moe := goldentest.NewRec(m, d, raw, routing)
		for _, size := range []int{len(prompt), 6, 1} {
			st, err := m.NewState(64, model.KVF32)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(64*2*2*64*4 + 2*4*5056); st.Bytes() != want || model.StateBytes(d, 64, 4) != want {
				t.Fatalf("state of %d bytes (family says %d), want %d", st.Bytes(), model.StateBytes(d, 64, 4), want)
			}
			got := forward(t, m, st, prompt, size, moe)
			if ref == nil {
				ref = got
				continue
			}
			for p := range ref {
				for i := range ref[p] {
					if math.Float32bits(got[p][i]) != math.Float32bits(ref[p][i]) {
						t.Fatalf("-t %d passes of %d: position %d logit %d = %v, whole prompt -t 1: %v", threads, size, p, i, got[p][i], ref[p][i])
					}
				}
			}
		}
	}
}

// forward feeds prompt in passes of size tokens and returns every
// position's logits.
func forward(t *testing.T, m model.Model, st *model.State, prompt []int32, size int, moe model.MoE) [][]float32 {
	t.Helper()
	var got [][]float32
	for i := 0; i < len(prompt); i += size {
		rows, err := m.Forward(context.Background(), st, prompt[i:min(i+size, len(prompt))], moe, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, append([]float32(nil), r...))
		}
	}
	return got
}

// TestFileShape: the block kinds come from the per-layer head_count_kv and
// feed_forward_length (FamilyHP), the Mamba-2 blocks are the recurrent
// ones the shared code counts, the MoE blocks route by sigmoid with their
// own selection bias, renormalised and scaled by 2.5, only they have
// experts; the state keys and inspect rows say so.
func TestFileShape(t *testing.T) {
	m, d, _ := goldentest.Load(t, filepath.Join(golden, "models/tiny-nemotron-h-moe-F32.gguf"), model.Options{})
	own, ok := d.FamilyHP.(nemotronh.HParams)
	if !ok || own.Pattern != "ME*EME" {
		t.Fatalf("FamilyHP = %#v, want pattern ME*EME", d.FamilyHP)
	}
	if n := d.HParams.RecurrentLayers(); n != 2 || !d.HParams.IsRecurrent(0) || !d.HParams.IsRecurrent(4) || d.HParams.RecurrentFloats() != 5056 {
		t.Errorf("recurrent layers %d (0: %v, 4: %v), %d floats each; want 2 (0 and 4) of 5056", n, d.HParams.IsRecurrent(0), d.HParams.IsRecurrent(4), d.HParams.RecurrentFloats())
	}
	if got := fmt.Sprint(d.ExpertShape()); got != "[0 16 0 16 0 16]" {
		t.Errorf("experts per layer %s", got)
	}
	for l := 0; l < 6; l++ {
		s := m.Router(l)
		if l%2 == 0 {
			if s.K != 0 {
				t.Errorf("layer %d (not MoE) has a router %+v", l, s)
			}
			continue
		}
		if s.Gating != model.SigmoidTopK || !s.Normalize || s.Scale != 2.5 || len(s.Bias) != 16 || s.K != 4 {
			t.Errorf("layer %d router %+v", l, s)
		}
	}
	if &m.Router(1).Bias[0] == &m.Router(3).Bias[0] {
		t.Errorf("layers 1 and 3 share one selection bias")
	}
	if keys := model.StateKeys(d); keys != "ssm.conv_kernel 4, ssm.inner_size 256, ssm.state_size 16, ssm.group_count 2" {
		t.Errorf("StateKeys = %q", keys)
	}
	rows := map[string]string{}
	for _, r := range model.InspectRows(d) {
		rows[r.Key] = r.Value
	}
	if !strings.HasPrefix(rows["block pattern"], "ME*EME") ||
		!strings.HasPrefix(rows["layers"], "3 MoE (routed + 1 shared expert, squared ReLU), 2 Mamba-2, 1 attention (no RoPE)") ||
		rows["mamba-2"] != "8 heads of 32, state 16, 2 groups, conv 4 (state 5056 floats per block)" {
		t.Errorf("inspect rows %v", rows)
	}
}

// TestRefusesBadFiles: what the graph cannot run is refused as a bad model
// naming the key: Nemotron 3 Super's latent MoE, an MTP block, Mamba-2
// heads not in whole groups, an inner size not a multiple of the heads.
func TestRefusesBadFiles(t *testing.T) {
	d, raw := goldentest.Open(t, filepath.Join(golden, "models/tiny-nemotron-h-moe-F32.gguf"))
	for name, c := range map[string]struct {
		mut func(d *model.Desc)
		key string
	}{
		"latent":  {func(d *model.Desc) { d.FamilyHP = withOwn(d, func(h *nemotronh.HParams) { h.LatentSize = 1024 }) }, "moe_latent_size = 1024"},
		"mtp":     {func(d *model.Desc) { d.FamilyHP = withOwn(d, func(h *nemotronh.HParams) { h.NextN = 1 }) }, "nextn_predict_layers = 1"},
		"groups":  {func(d *model.Desc) { d.HParams.SSM.GroupCount = 3 }, "ssm.group_count = 3"},
		"inner":   {func(d *model.Desc) { d.HParams.SSM.InnerSize = 250 }, "ssm.inner_size = 250"},
		"pattern": {func(d *model.Desc) { d.FamilyHP = withOwn(d, func(h *nemotronh.HParams) { h.Pattern = "ME*" }) }, "block_count = 6"},
	} {
		d2 := *d
		d2.Tensors = map[string]*gguf.TensorInfo{}
		for k, v := range d.Tensors {
			d2.Tensors[k] = v
		}
		c.mut(&d2)
		pool := kernels.NewPool(1)
		_, err := model.New(&d2, goldentest.FileSource(raw), model.Options{Pool: pool})
		pool.Close()
		if !errors.Is(err, model.ErrBadModel) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: %v, want %v naming %s", name, err, model.ErrBadModel, c.key)
		}
	}
}

// withOwn is d's family hyper-parameters changed by f.
func withOwn(d *model.Desc, f func(*nemotronh.HParams)) nemotronh.HParams {
	h := d.FamilyHP.(nemotronh.HParams)
	f(&h)
	return h
}

// TestBatchedExperts: the batched single-token experts (ComputeExperts, one
// pool dispatch per projection) give ComputeExpert's bits, at -t 1 and 2,
// for every expert of every MoE block of the quantized model, with a
// two-token work among them.
func TestBatchedExperts(t *testing.T) {
	for _, threads := range []int{1, 2} {
		pool := kernels.NewPool(threads)
		t.Cleanup(pool.Close)
		m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-nemotron-h-moe-Q4_K_M.gguf"), model.Options{Pool: pool})
		bf := m.(model.BatchExpertFFN)
		E := d.HParams.NEmbd
		for _, l := range moeLayers {
			var work []model.ExpertWork
			for e := 0; e < d.HParams.NExpert; e++ {
				var parts [][]byte
				for _, sl := range d.Experts[l][e] {
					parts = append(parts, raw[sl.Off:sl.Off+sl.Len])
				}
				n := 1 + e%5/4 // expert 4, 9, 14: two tokens
				x := make([]float32, n*E)
				for i := range x {
					x[i] = float32(math.Sin(float64(i*(e+1)+l))) * 2
				}
				work = append(work, model.ExpertWork{Expert: e, Parts: parts, N: n, X: x, Out: make([]float32, n*E)})
			}
			var s model.Scratch
			if err := bf.ComputeExperts(l, work, &s); err != nil {
				t.Fatal(err)
			}
			for _, w := range work {
				want := make([]float32, w.N*E)
				if err := m.ComputeExpert(l, w.Expert, w.Parts, w.N, w.X, want, &s); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(w.Out[i]) {
						t.Fatalf("-t %d layer %d expert %d: batched out[%d] = %v, ComputeExpert %v", threads, l, w.Expert, i, w.Out[i], want[i])
					}
				}
			}
		}
	}
}

// TestForwardBatch: two sequences in one ForwardBatch (pipe serve's slots:
// each keeps its own Mamba-2 and KV state, the MoE blocks see both) give,
// pass after pass, the bits each gives alone through Forward.
func TestForwardBatch(t *testing.T) {
	m, d, raw := goldentest.Load(t, filepath.Join(golden, "models/tiny-nemotron-h-moe-Q4_K_M.gguf"), model.Options{})
	moe := goldentest.NewRec(m, d, raw, routing)
	prompt := goldenPrompt(t)
	a, b := prompt, prompt[3:]
	alone := func(p []int32) [][]float32 {
		st, err := m.NewState(64, model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		got := forward(t, m, st, p[:5], 5, moe)
		return append(got, forward(t, m, st, p[5:9], 1, moe)...)
	}
	wantA, wantB := alone(a), alone(b)
	sa, _ := m.NewState(64, model.KVF32)
	sb, _ := m.NewState(64, model.KVF32)
	var gotA, gotB [][]float32
	feed := func(ta, tb []int32) {
		rows, err := m.ForwardBatch(context.Background(), []model.Seq{{State: sa, Tokens: ta, All: true}, {State: sb, Tokens: tb, All: true}}, moe)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows[0] {
			gotA = append(gotA, append([]float32(nil), r...))
		}
		for _, r := range rows[1] {
			gotB = append(gotB, append([]float32(nil), r...))
		}
	}
	feed(a[:5], b[:5])
	for i := 5; i < 9; i++ {
		feed(a[i:i+1], b[i:i+1])
	}
	for s, pair := range [][2][][]float32{{gotA, wantA}, {gotB, wantB}} {
		for p := range pair[1] {
			for i := range pair[1][p] {
				if math.Float32bits(pair[0][p][i]) != math.Float32bits(pair[1][p][i]) {
					t.Fatalf("sequence %d position %d logit %d: batched %v, alone %v", s, p, i, pair[0][p][i], pair[1][p][i])
				}
			}
		}
	}
}
