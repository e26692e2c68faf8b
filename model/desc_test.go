package model

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

const goldenModels = "../testdata/golden/models/"

// errStandIn is what the stand-in architectures below return.
var errStandIn = errors.New("stand-in architecture")

// The architectures register themselves from their own packages, which
// this package's tests cannot import; these stand-ins make Describe treat
// their files as registered (required hyper-parameters enforced).
func init() {
	for _, a := range []string{"qwen3moe", "gpt-oss", "gemma4"} {
		RegisterFamily(standInArch(a))
	}
}

// standInArch is a Family that reads the common keys only and builds
// nothing.
type standInArch string

func (a standInArch) Arch() string                                 { return string(a) }
func (standInArch) ReadHParams(*MetaReader, *HParams) (any, error) { return nil, nil }
func (standInArch) New(*Desc, DenseSource, Options) (Model, error) { return nil, errStandIn }
func (standInArch) StateBytes(d *Desc, positions, elemBytes int) int64 {
	return EstimateStateBytes(&d.HParams, positions, elemBytes)
}
func (standInArch) InspectRows(*Desc) []InspectRow { return nil }
func (standInArch) TokenWork(d *Desc, positions int) TokenWork {
	return AttentionOnly{}.TokenWork(d, positions)
}

func openGolden(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(goldenModels + name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDescribeGoldenHParams(t *testing.T) {
	q := openGolden(t, "tiny-qwen3moe-Q4_K_M.gguf")
	d, err := Describe(q)
	if err != nil {
		t.Fatal(err)
	}
	want := HParams{NLayer: 4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64, HeadDimV: 64, NExpert: 8, NExpertUsed: 2,
		NFFExp: 256, NFF: 512, NCtxTrain: 512, NVocab: 482, NRot: 64, RMSEps: 1e-6, RopeFreqBase: 1e6}
	if fmt.Sprint(d.HParams) != fmt.Sprint(want) {
		t.Errorf("qwen3moe hparams\n got %+v\nwant %+v", d.HParams, want)
	}
	if d.Arch != "qwen3moe" || !d.Supported || d.Name != "tiny-random-qwen3moe" {
		t.Errorf("arch %q supported %v name %q", d.Arch, d.Supported, d.Name)
	}

	g := openGolden(t, "tiny-gptoss-MXFP4_MOE.gguf")
	d, err = Describe(g)
	if err != nil {
		t.Fatal(err)
	}
	want = HParams{NLayer: 4, NEmbd: 256, NHead: 4, NHeadKV: 2, HeadDim: 64, HeadDimV: 64, NExpert: 8, NExpertUsed: 4,
		NFFExp: 256, NFF: 256, NCtxTrain: 131072, NVocab: 487, NRot: 64, RMSEps: 1e-5, RopeFreqBase: 150000,
		RopeScaleLinear: 32, RopeScalingType: "yarn", RopeScalingOrigCtx: 4096, SlidingWindow: 16}
	if fmt.Sprint(d.HParams) != fmt.Sprint(want) {
		t.Errorf("gpt-oss hparams\n got %+v\nwant %+v", d.HParams, want)
	}
	if d.Arch != "gpt-oss" || !d.Supported {
		t.Errorf("arch %q supported %v", d.Arch, d.Supported)
	}
}

// checkSplit verifies a Desc against numbers computed independently from the
// tensor table: every expert slice is the e-th equal part of its tensor, the
// parts tile the tensor, the dense ranges are exactly the rest of the data.
func checkSplit(t *testing.T, d *Desc) {
	t.Helper()
	f := d.File
	var expertIvs []splitIv
	var expertTotal, denseTensors int64
	for _, ti := range f.Tensors {
		_, _, isExp := IsExpertTensor(ti.Name)
		if isExp {
			expertTotal += int64(ti.Size)
			expertIvs = append(expertIvs, splitIv{int64(ti.Shard), int64(ti.Offset), int64(ti.Offset + ti.Size)})
		} else {
			denseTensors += int64(ti.Size)
		}
	}
	if d.ExpertTotalBytes != expertTotal || d.DenseTensorBytes != denseTensors {
		t.Errorf("expert %d dense %d, independent sums %d %d", d.ExpertTotalBytes, d.DenseTensorBytes, expertTotal, denseTensors)
	}
	checkExpertSlices(t, d)
	checkTiling(t, d, expertIvs)
}

// splitIv is a byte interval of one shard.
type splitIv struct{ shard, off, end int64 }

// checkExpertSlices: every expert slice is the e-th equal part of its
// tensor, and the per-layer and working-set sums agree.
func checkExpertSlices(t *testing.T, d *Desc) {
	t.Helper()
	f := d.File
	var ws int64
	for l, experts := range d.Experts {
		if len(experts) == 0 {
			if d.ExpertBytes[l] != 0 {
				t.Errorf("layer %d: no experts but %d bytes", l, d.ExpertBytes[l])
			}
			continue
		}
		var perExpert int64
		for p := Proj(0); p < numProj; p++ {
			ti, ok := f.Tensor(p.TensorName(l))
			if !ok {
				continue
			}
			n := int64(ti.Dims[2])
			rs, err := ti.Type.RowSize(int64(ti.Dims[0]))
			if err != nil {
				t.Fatal(err)
			}
			part := rs * int64(ti.Dims[1])
			if part*n != int64(ti.Size) {
				t.Fatalf("%s: %d × %d != %d", ti.Name, part, n, ti.Size)
			}
			perExpert += part
			for e := int64(0); e < n; e++ {
				s, ok := experts[e].Get(p)
				if !ok {
					t.Fatalf("layer %d expert %d: no %v slice", l, e, p)
				}
				want := Range{Shard: ti.Shard, Off: int64(ti.Offset) + e*part, Len: part}
				if s.Range != want || s.Tensor != ti.Name || s.Type != ti.Type || s.Cols != int(ti.Dims[0]) || s.Rows != int(ti.Dims[1]) {
					t.Errorf("layer %d expert %d %v: %+v, want %+v", l, e, p, s, want)
				}
			}
		}
		if d.ExpertBytes[l] != perExpert {
			t.Errorf("layer %d: ExpertBytes %d, want %d", l, d.ExpertBytes[l], perExpert)
		}
		for e := range experts {
			if experts[e].Bytes() != perExpert {
				t.Errorf("layer %d expert %d: %d bytes", l, e, experts[e].Bytes())
			}
		}
		ws += int64(d.HParams.NExpertUsed) * perExpert
	}
	if d.WorkingSet != ws {
		t.Errorf("working set %d, want %d", d.WorkingSet, ws)
	}
}

// checkTiling: the dense ranges and the expert tensors tile each shard's
// data, disjoint, and the dense ranges are merged.
func checkTiling(t *testing.T, d *Desc, expertIvs []splitIv) {
	t.Helper()
	f := d.File
	// Dense ∪ expert tensors = each shard's [data offset, last tensor end), disjoint.
	var all []splitIv
	for _, r := range d.Dense {
		if r.Len <= 0 {
			t.Errorf("empty dense range %+v", r)
		}
		all = append(all, splitIv{int64(r.Shard), r.Off, r.End()})
	}
	all = append(all, expertIvs...)
	sort.Slice(all, func(a, b int) bool {
		if all[a].shard != all[b].shard {
			return all[a].shard < all[b].shard
		}
		return all[a].off < all[b].off
	})
	var denseSum int64
	for _, r := range d.Dense {
		denseSum += r.Len
	}
	if denseSum != d.DenseBytes {
		t.Errorf("DenseBytes %d, Σ ranges %d", d.DenseBytes, denseSum)
	}
	for s := range f.Shards {
		var end int64
		for _, ti := range f.Tensors {
			if ti.Shard == s && int64(ti.Offset+ti.Size) > end {
				end = int64(ti.Offset + ti.Size)
			}
		}
		cur := int64(f.Shards[s].DataOffset)
		for _, x := range all {
			if x.shard != int64(s) {
				continue
			}
			if x.off != cur {
				t.Errorf("shard %d: gap or overlap at %d (next range starts at %d)", s, cur, x.off)
			}
			cur = x.end
		}
		if end > 0 && cur != end {
			t.Errorf("shard %d: ranges end at %d, tensors at %d", s, cur, end)
		}
	}
	// Each dense range is merged: no two touch.
	for i := 1; i < len(d.Dense); i++ {
		a, b := d.Dense[i-1], d.Dense[i]
		if a.Shard == b.Shard && a.End() >= b.Off {
			t.Errorf("dense ranges %+v and %+v not merged or out of order", a, b)
		}
	}
}

func TestDescribeGoldenSplit(t *testing.T) {
	files, _ := filepath.Glob(goldenModels + "*.gguf")
	if len(files) < 9 {
		t.Fatalf("found %d golden models", len(files))
	}
	for _, p := range files {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Describe(f)
			if err != nil {
				t.Fatal(err)
			}
			// every family's file: block_count blocks, the first
			// leading_dense_block_count of them dense (and, where MoE
			// blocks interleave with others as in nemotron_h_moe, every
			// block before the first MoE one), and as many expert slices
			// per expert as the first MoE block has *_exps tensors
			layers, first := d.HParams.NLayer, d.HParams.MoE.LeadingDense
			expertTensors := func(l int) int {
				n := 0
				for name := range d.Tensors {
					if strings.HasPrefix(name, fmt.Sprintf("blk.%d.", l)) && strings.HasSuffix(name, "_exps.weight") {
						n++
					}
				}
				return n
			}
			for first < layers-1 && expertTensors(first) == 0 {
				first++
			}
			tensors := expertTensors(first)
			if layers < 3 || tensors < 2 {
				t.Fatalf("%d blocks, %d expert tensors in block %d", layers, tensors, first)
			}
			if len(d.Experts) != layers || d.Experts[first] == nil || len(d.Experts[first][0]) != tensors {
				t.Fatalf("%d layers, layer %d experts %v", len(d.Experts), first, d.Experts[first])
			}
			for l := 0; l < first; l++ {
				if d.Experts[l] != nil || d.ExpertBytes[l] != 0 {
					t.Errorf("dense layer %d has experts %v", l, d.Experts[l])
				}
			}
			checkSplit(t, d)
			if d.Tensors["token_embd.weight"] == nil {
				t.Error("tensor map lacks token_embd.weight")
			}
		})
	}
	// A hand-checked figure: Q4_K_M layers 0-1 have Q4_K down, 2-3 Q6_K.
	d, err := Describe(openGolden(t, "tiny-qwen3moe-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(d.ExpertBytes) != "[110592 110592 127488 127488]" || d.WorkingSet != 2*(2*110592+2*127488) {
		t.Errorf("expert bytes %v, working set %d", d.ExpertBytes, d.WorkingSet)
	}
}

// headerOnly writes a model's header with the Writer and decodes it as if the
// (absent) tensor data followed, so real-sized shapes can be described
// without writing gigabytes.
func headerOnly(t *testing.T, arch string, kv map[string]any, tensors map[string]struct {
	t    quant.Type
	dims []uint64
}) *gguf.File {
	t.Helper()
	var buf bytes.Buffer
	w := gguf.NewWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.AddKV("general.architecture", arch))
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		must(w.AddKV(arch+"."+k, kv[k]))
	}
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		must(w.AddTensor(n, tensors[n].t, tensors[n].dims))
	}
	must(w.WriteHeader())
	var data int64 // the data section as the Writer lays it out: each tensor padded to the alignment
	for _, n := range names {
		data += (tensorBytes(t, tensors[n].t, tensors[n].dims) + gguf.DefaultAlignment - 1) &^ (gguf.DefaultAlignment - 1)
	}
	f, err := gguf.Decode(arch, bytes.NewReader(buf.Bytes()), int64(buf.Len())+data)
	must(err)
	return f
}

// tensorBytes is the size of a tensor of type tt and shape dims.
func tensorBytes(t *testing.T, tt quant.Type, dims []uint64) int64 {
	t.Helper()
	n, err := tt.RowSize(int64(dims[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dims[1:] {
		n *= int64(d)
	}
	return n
}

type tspec = struct {
	t    quant.Type
	dims []uint64
}

// TestDescribeRealShapes checks the per-expert sizes of real models against the
// figures in the design brief (from the traces' preambles).
func TestDescribeRealShapes(t *testing.T) {
	t.Run("Qwen3-30B-A3B", func(t *testing.T) {
		ts := map[string]tspec{"token_embd.weight": {quant.Q4_K, []uint64{2048, 151936}}}
		for l := 0; l < 48; l++ {
			ts[fmt.Sprintf("blk.%d.ffn_gate_exps.weight", l)] = tspec{quant.Q4_K, []uint64{2048, 768, 128}}
			ts[fmt.Sprintf("blk.%d.ffn_up_exps.weight", l)] = tspec{quant.Q4_K, []uint64{2048, 768, 128}}
			ts[fmt.Sprintf("blk.%d.ffn_down_exps.weight", l)] = tspec{quant.Q6_K, []uint64{768, 2048, 128}}
			ts[fmt.Sprintf("blk.%d.attn_q.weight", l)] = tspec{quant.Q4_K, []uint64{2048, 4096}}
		}
		f := headerOnly(t, "qwen3moe", map[string]any{"block_count": uint32(48), "embedding_length": uint32(2048),
			"attention.head_count": uint32(32), "attention.head_count_kv": uint32(4), "attention.key_length": uint32(128),
			"expert_count": uint32(128), "expert_used_count": uint32(8), "expert_feed_forward_length": uint32(768)}, ts)
		d, err := Describe(f)
		if err != nil {
			t.Fatal(err)
		}
		if d.ExpertBytes[0] != 3059712 {
			t.Errorf("bytes per expert %d, brief says 3,059,712", d.ExpertBytes[0])
		}
		if d.WorkingSet != 48*8*3059712 || d.HParams.NVocab != 151936 {
			t.Errorf("working set %d, vocab %d", d.WorkingSet, d.HParams.NVocab)
		}
		checkSplit(t, d)
	})
	t.Run("gpt-oss-120b", func(t *testing.T) {
		ts := map[string]tspec{}
		for l := 0; l < 36; l++ {
			for _, p := range []string{"gate", "up", "down"} {
				ts[fmt.Sprintf("blk.%d.ffn_%s_exps.weight", l, p)] = tspec{quant.MXFP4, []uint64{2880, 2880, 128}}
				ts[fmt.Sprintf("blk.%d.ffn_%s_exps.bias", l, p)] = tspec{quant.F32, []uint64{2880, 128}}
			}
		}
		f := headerOnly(t, "gpt-oss", map[string]any{"block_count": uint32(36), "embedding_length": uint32(2880),
			"attention.head_count": uint32(64), "attention.head_count_kv": uint32(8),
			"expert_count": uint32(128), "expert_used_count": uint32(4)}, ts)
		d, err := Describe(f)
		if err != nil {
			t.Fatal(err)
		}
		if d.ExpertBytes[0] != 13219200 {
			t.Errorf("bytes per expert %d, brief says 13,219,200", d.ExpertBytes[0])
		}
		checkSplit(t, d)
	})
	t.Run("gemma4 fused gate_up", func(t *testing.T) {
		ts := map[string]tspec{}
		for l := 0; l < 3; l++ {
			ts[fmt.Sprintf("blk.%d.ffn_gate_up_exps.weight", l)] = tspec{quant.Q4_K, []uint64{2816, 2 * 704, 128}}
			ts[fmt.Sprintf("blk.%d.ffn_down_exps.weight", l)] = tspec{quant.Q5_K, []uint64{768, 2816, 128}}
			ts[fmt.Sprintf("blk.%d.ffn_up.weight", l)] = tspec{quant.Q4_K, []uint64{2816, 2112}}
		}
		f := headerOnly(t, "gemma4", map[string]any{"block_count": uint32(3), "embedding_length": uint32(2816),
			"attention.head_count": uint32(16), "attention.head_count_kv": []int32{8, 8, 2},
			"attention.sliding_window_pattern": []bool{true, true, false}, "final_logit_softcapping": float32(30),
			"expert_count": uint32(128), "expert_used_count": uint32(8)}, ts)
		d, err := Describe(f)
		if err != nil {
			t.Fatal(err)
		}
		s := d.Experts[1][5]
		if len(s) != 2 || s[0].Proj != ProjGateUp || s[1].Proj != ProjDown {
			t.Errorf("expert slices %+v", s)
		}
		if d.HParams.NHeadKV != 8 || fmt.Sprint(d.HParams.HeadCountKVLayers) != "[8 8 2]" ||
			fmt.Sprint(d.HParams.SlidingWindowPattern) != "[true true false]" || d.HParams.FinalLogitSoftcap != 30 {
			t.Errorf("hparams %+v", d.HParams)
		}
		if !d.Supported {
			t.Errorf("supported %v", d.Supported)
		}
		checkSplit(t, d)
	})
}

// TestDescribeSplitFile: a model split in shards keeps each range in its shard.
func TestDescribeSplitFile(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "m")
	rng := rand.New(rand.NewSource(1))
	shards := [][]struct {
		name string
		tt   quant.Type
		dims []uint64
	}{
		{{"token_embd.weight", quant.Q8_0, []uint64{64, 10}}, {"blk.0.ffn_gate_exps.weight", quant.Q4_0, []uint64{64, 32, 4}}},
		{{"blk.0.ffn_up_exps.weight", quant.Q4_0, []uint64{64, 32, 4}}, {"blk.0.attn_q.weight", quant.F16, []uint64{64, 64}}},
		{{"blk.0.ffn_down_exps.weight", quant.Q8_0, []uint64{32, 64, 4}}, {"output_norm.weight", quant.F32, []uint64{64}}},
	}
	for i, ts := range shards {
		fh, err := os.Create(gguf.SplitPath(prefix, i, len(shards)))
		if err != nil {
			t.Fatal(err)
		}
		w := gguf.NewWriter(fh)
		if i == 0 {
			for k, v := range map[string]any{"general.architecture": "qwen3moe", "qwen3moe.block_count": uint32(1),
				"qwen3moe.embedding_length": uint32(64), "qwen3moe.attention.head_count": uint32(2),
				"qwen3moe.expert_count": uint32(4), "qwen3moe.expert_used_count": uint32(2)} {
				if err := w.AddKV(k, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		_ = w.AddKV("split.no", uint16(i))
		_ = w.AddKV("split.count", uint16(len(shards)))
		_ = w.AddKV("split.tensors.count", int32(6))
		for _, x := range ts {
			if err := w.AddTensor(x.name, x.tt, x.dims); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteHeader(); err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			b := make([]byte, tensorBytes(t, x.tt, x.dims))
			rng.Read(b)
			if err := w.WriteTensor(x.name, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	f, err := gguf.Open(gguf.SplitPath(prefix, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	checkSplit(t, d)
	e := d.Experts[0][3]
	if e[0].Shard != 0 || e[1].Shard != 1 || e[2].Shard != 2 || e[2].Proj != ProjDown {
		t.Errorf("expert 3 slices %+v", e)
	}
	shardsSeen := map[int]bool{}
	for _, r := range d.Dense {
		shardsSeen[r.Shard] = true
	}
	if len(shardsSeen) != 3 {
		t.Errorf("dense ranges %+v should cover the 3 shards", d.Dense)
	}
}

func TestDescribeErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"block_count": uint32(2), "embedding_length": uint32(64), "attention.head_count": uint32(2),
			"expert_count": uint32(4), "expert_used_count": uint32(2)}
	}
	experts := func(layers int, n uint64) map[string]tspec {
		ts := map[string]tspec{}
		for l := 0; l < layers; l++ {
			for _, p := range []string{"gate", "up", "down"} {
				ts[fmt.Sprintf("blk.%d.ffn_%s_exps.weight", l, p)] = tspec{quant.Q8_0, []uint64{64, 32, n}}
			}
		}
		return ts
	}
	cases := []struct {
		name string
		kv   func(map[string]any)
		ts   func(map[string]tspec)
	}{
		{"missing block_count", func(m map[string]any) { delete(m, "block_count") }, nil},
		{"missing expert_count", func(m map[string]any) { delete(m, "expert_count") }, nil},
		{"k > n_expert", func(m map[string]any) { m["expert_used_count"] = uint32(5) }, nil},
		{"k = 0", func(m map[string]any) { m["expert_used_count"] = uint32(0) }, nil},
		{"negative count", func(m map[string]any) { m["block_count"] = int32(-1) }, nil},
		{"huge block_count", func(m map[string]any) { m["block_count"] = uint64(1) << 40 }, nil},
		{"string head_count", func(m map[string]any) { m["attention.head_count"] = "2" }, nil},
		{"kv heads > heads", func(m map[string]any) { m["attention.head_count_kv"] = uint32(4) }, nil},
		{"kv heads do not divide heads", func(m map[string]any) {
			m["attention.head_count"], m["attention.head_count_kv"] = uint32(4), uint32(3)
		}, nil},
		{"expert count mismatch", nil, func(ts map[string]tspec) {
			ts["blk.0.ffn_up_exps.weight"] = tspec{quant.Q8_0, []uint64{64, 32, 3}}
		}},
		{"layer beyond block_count", nil, func(ts map[string]tspec) {
			ts["blk.7.ffn_up_exps.weight"] = tspec{quant.Q8_0, []uint64{64, 32, 4}}
		}},
		{"missing down", nil, func(ts map[string]tspec) { delete(ts, "blk.1.ffn_down_exps.weight") }},
		{"gate without up", nil, func(ts map[string]tspec) { delete(ts, "blk.1.ffn_up_exps.weight") }},
		{"gate_up beside gate", nil, func(ts map[string]tspec) {
			ts["blk.1.ffn_gate_up_exps.weight"] = tspec{quant.Q8_0, []uint64{64, 64, 4}}
		}},
		{"NaN epsilon", func(m map[string]any) { m["attention.layer_norm_rms_epsilon"] = float32(math.NaN()) }, nil},
		{"+Inf epsilon", func(m map[string]any) { m["attention.layer_norm_rms_epsilon"] = float32(math.Inf(1)) }, nil},
		{"negative epsilon", func(m map[string]any) { m["attention.layer_norm_rms_epsilon"] = float32(-1e-6) }, nil},
		{"epsilon beyond float32", func(m map[string]any) { m["attention.layer_norm_rms_epsilon"] = float64(1e300) }, nil},
		{"-Inf rope base", func(m map[string]any) { m["rope.freq_base"] = float32(math.Inf(-1)) }, nil},
		{"negative rope base", func(m map[string]any) { m["rope.freq_base"] = float32(-10000) }, nil},
		{"zero rope base", func(m map[string]any) { m["rope.freq_base"] = float32(0) }, nil},
		{"zero swa rope base", func(m map[string]any) { m["rope.freq_base_swa"] = float64(0) }, nil},
		{"Inf rope scale", func(m map[string]any) { m["rope.scaling.factor"] = float32(math.Inf(1)) }, nil},
		{"NaN softcap", func(m map[string]any) { m["final_logit_softcapping"] = float32(math.NaN()) }, nil},
		{"2-D expert tensor", nil, func(ts map[string]tspec) {
			ts["blk.0.ffn_gate_exps.weight"] = tspec{quant.Q8_0, []uint64{64, 128}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kv, ts := base(), experts(2, 4)
			if c.kv != nil {
				c.kv(kv)
			}
			if c.ts != nil {
				c.ts(ts)
			}
			d, err := Describe(headerOnly(t, "qwen3moe", kv, ts))
			if !errors.Is(err, ErrBadModel) {
				t.Fatalf("err = %v (desc %v), want ErrBadModel", err, d != nil)
			}
		})
	}
	// An unknown architecture is described, not refused.
	d, err := Describe(headerOnly(t, "mystery", map[string]any{}, experts(3, 5)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Supported || d.HParams.NLayer != 3 || len(d.Experts[2]) != 5 {
		t.Errorf("unknown arch: supported %v layers %d", d.Supported, d.HParams.NLayer)
	}
	checkSplit(t, d)
	// An ungated layer (up and down, nemotron_h_moe's squared-ReLU
	// experts) is sliced as up, down.
	ts := experts(2, 4)
	delete(ts, "blk.1.ffn_gate_exps.weight")
	d, err = Describe(headerOnly(t, "mystery", map[string]any{}, ts))
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Experts[1][3]; len(s) != 2 || s[0].Proj != ProjUp || s[1].Proj != ProjDown || len(d.Experts[0][0]) != 3 {
		t.Errorf("ungated layer 1 sliced as %v (gated layer 0 as %v)", s, d.Experts[0][0])
	}
	checkSplit(t, d)
	if _, err := Describe(nil); !errors.Is(err, ErrBadModel) {
		t.Errorf("nil file: %v", err)
	}
}

func TestIsExpertTensor(t *testing.T) {
	cases := []struct {
		name  string
		layer int
		p     Proj
		ok    bool
	}{
		{"blk.0.ffn_gate_exps.weight", 0, ProjGate, true},
		{"blk.12.ffn_up_exps.weight", 12, ProjUp, true},
		{"blk.3.ffn_gate_up_exps.weight", 3, ProjGateUp, true},
		{"blk.47.ffn_down_exps.weight", 47, ProjDown, true},
		{"blk.0.ffn_down_exps.bias", 0, 0, false},
		{"blk.0.ffn_down_shexp.weight", 0, 0, false},
		{"blk.0.ffn_down.weight", 0, 0, false},
		{"blk.01.ffn_up_exps.weight", 0, 0, false},
		{"blk.-1.ffn_up_exps.weight", 0, 0, false},
		{"blk..ffn_up_exps.weight", 0, 0, false},
		{"token_embd.weight", 0, 0, false},
	}
	for _, c := range cases {
		l, p, ok := IsExpertTensor(c.name)
		if ok != c.ok || (ok && (l != c.layer || p != c.p)) {
			t.Errorf("%s: %d %v %v", c.name, l, p, ok)
		}
	}
}
