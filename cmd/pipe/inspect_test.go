package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/quant"
)

const goldenRoot = "../../testdata/golden/"

type goldenManifest struct {
	Arch string `json:"arch"`
	Args struct {
		NExpertUsed int `json:"n_expert_used"`
		NLayer      int `json:"n_layer"`
	} `json:"args"`
	Tensors []struct {
		Name string  `json:"name"`
		Ne   []int64 `json:"ggml_ne"`
	} `json:"tensors"`
}

// logTypes reads the output type of every tensor from a llama-quantize log.
func logTypes(t *testing.T, path string) map[string]quant.Type {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	re := regexp.MustCompile(`^\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[.*\], type =\s+(\w+)(?:, converting to (\w+))?`)
	out := map[string]quant.Type{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			name := m[2]
			if m[3] != "" {
				name = m[3]
			}
			tt, ok := typeNamed(strings.ToUpper(name))
			if !ok {
				t.Fatalf("unknown type %q in %s", name, path)
			}
			out[m[1]] = tt
		}
	}
	return out
}

// logManifest builds the manifest of a model set that ships without one
// (tiny-gemma4 and later) from llama-quantize's log of one of its quantized
// files (the first by name): the source
// file's metadata (architecture, block_count, expert_used_count) and every
// tensor's shape, as llama.cpp read them.
func logManifest(t *testing.T, set string) goldenManifest {
	t.Helper()
	logs, _ := filepath.Glob(goldenRoot + "logs/quantize-" + set + "-*.log")
	if len(logs) == 0 {
		t.Fatalf("%s: no manifest and no quantize log", set)
	}
	raw, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	kv := regexp.MustCompile(`- kv\s+\d+:\s+(\S+)\s+\S+\s+= (\S+)`)
	tensor := regexp.MustCompile(`^\[\s*\d+/\s*\d+\]\s+(\S+)\s+- \[\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\]`)
	var man goldenManifest
	for _, line := range strings.Split(string(raw), "\n") {
		if m := kv.FindStringSubmatch(line); m != nil {
			switch {
			case m[1] == "general.architecture":
				man.Arch = m[2]
			case strings.HasSuffix(m[1], ".block_count"):
				man.Args.NLayer, _ = strconv.Atoi(m[2])
			case strings.HasSuffix(m[1], ".expert_used_count"):
				man.Args.NExpertUsed, _ = strconv.Atoi(m[2])
			}
		}
		if m := tensor.FindStringSubmatch(line); m != nil {
			var ne []int64
			for _, d := range m[2:] {
				v, _ := strconv.ParseInt(d, 10, 64)
				ne = append(ne, v)
			}
			for len(ne) > 1 && ne[len(ne)-1] == 1 {
				ne = ne[:len(ne)-1]
			}
			man.Tensors = append(man.Tensors, struct {
				Name string  `json:"name"`
				Ne   []int64 `json:"ggml_ne"`
			}{m[1], ne})
		}
	}
	if man.Arch == "" || man.Args.NLayer == 0 || len(man.Tensors) == 0 {
		t.Fatalf("%s: no manifest in the quantize log", set)
	}
	return man
}

var expertName = regexp.MustCompile(`^blk\.(\d+)\.ffn_(gate|up|down|gate_up)_exps\.weight$`)

func inspectRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

// TestInspectGolden runs `pipe inspect --json` on every golden model and
// checks the architecture, tensor count and the expert/dense split against
// numbers computed from the manifest (shapes) and the llama-quantize log
// (types) alone — not from the GGUF parser. With -short (the race pass;
// the arm64 runs do not select it) one file per architecture: inspect is
// the same sequential code for every file of one, and all 43 took 199 s
// under -race at load 37.
func TestInspectGolden(t *testing.T) {
	models, _ := filepath.Glob(goldenRoot + "models/*.gguf")
	if len(models) < 9 {
		t.Fatalf("found %d golden models", len(models))
	}
	seen := map[string]bool{}
	for _, path := range models {
		base := strings.TrimSuffix(filepath.Base(path), ".gguf")
		arch := base[:strings.LastIndex(base, "-")] // tiny-qwen3moe
		first := !seen[arch]
		seen[arch] = true
		t.Run(base, func(t *testing.T) {
			if testing.Short() && !first {
				t.Skip("short: one file per architecture")
			}
			var man goldenManifest
			if raw, err := os.ReadFile(goldenRoot + "models/" + arch + ".manifest.json"); err == nil {
				if err := json.Unmarshal(raw, &man); err != nil {
					t.Fatal(err)
				}
			} else if errors.Is(err, fs.ErrNotExist) {
				man = logManifest(t, arch)
			} else {
				t.Fatal(err)
			}
			types := map[string]quant.Type{}
			if strings.HasSuffix(base, "-F32") {
				for _, mt := range man.Tensors {
					types[mt.Name] = quant.F32
				}
			} else {
				types = logTypes(t, goldenRoot+"logs/quantize-"+base+".log")
			}
			expertTotal, denseTensor, perLayer, ws := expectedSplit(t, man, types)

			out, errOut, code := inspectRun(t, "inspect", "--json", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var rep struct {
				Arch             string `json:"architecture"`
				Runnable         bool   `json:"runnable"`
				NTensors         int    `json:"n_tensors"`
				Tensors          []struct{ Name, Type string }
				DenseTensorBytes int64   `json:"dense_tensor_bytes"`
				DenseBytes       int64   `json:"dense_bytes"`
				ExpertBytes      int64   `json:"expert_bytes"`
				PerLayer         []int64 `json:"one_expert_bytes_per_layer"`
				WorkingSet       int64   `json:"working_set_bytes"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("bad JSON: %v\n%s", err, out)
			}
			wantArch := map[string]string{"tiny-qwen3moe": "qwen3moe", "tiny-gptoss": "gpt-oss", "tiny-gemma4": "gemma4", "tiny-qwen35moe": "qwen35moe",
				"tiny-qwen2moe": "qwen2moe", "tiny-olmoe": "olmoe", "tiny-deepseek2": "deepseek2", "tiny-deepseek2-lite": "deepseek2", "tiny-lfm2moe": "lfm2moe"}[arch]
			if wantArch == "" { // a later set: the architecture llama.cpp read (its quantize log)
				wantArch = man.Arch
			}
			if rep.Arch != wantArch || rep.Arch != man.Arch {
				t.Errorf("architecture %q, want %q", rep.Arch, wantArch)
			}
			if rep.NTensors != len(man.Tensors) || len(rep.Tensors) != len(man.Tensors) {
				t.Errorf("%d tensors (%d rows), manifest has %d", rep.NTensors, len(rep.Tensors), len(man.Tensors))
			}
			for _, tr := range rep.Tensors {
				if types[tr.Name].String() != tr.Type {
					t.Errorf("%s: type %s, log says %v", tr.Name, tr.Type, types[tr.Name])
				}
			}
			if rep.ExpertBytes != expertTotal || rep.DenseTensorBytes != denseTensor {
				t.Errorf("expert %d dense %d, want %d %d", rep.ExpertBytes, rep.DenseTensorBytes, expertTotal, denseTensor)
			}
			// Dense ranges add only alignment padding (< 32 bytes per tensor).
			if pad := rep.DenseBytes - denseTensor; pad < 0 || pad >= int64(32*len(man.Tensors)) {
				t.Errorf("dense bytes %d vs dense tensors %d", rep.DenseBytes, denseTensor)
			}
			if len(rep.PerLayer) != len(perLayer) {
				t.Fatalf("per-layer %v, want %v", rep.PerLayer, perLayer)
			}
			for l := range perLayer {
				if rep.PerLayer[l] != perLayer[l] {
					t.Errorf("layer %d: one expert %d bytes, want %d", l, rep.PerLayer[l], perLayer[l])
				}
			}
			if rep.WorkingSet != ws {
				t.Errorf("working set %d, want %d", rep.WorkingSet, ws)
			}
			if !rep.Runnable {
				t.Errorf("%s reported not runnable", wantArch)
			}
		})
	}
}

// expectedSplit is the expert/dense split of the manifest's tensors typed
// by types, computed without the GGUF parser: every expert's bytes, the
// dense tensors', one expert's per layer and one token's working set.
func expectedSplit(t *testing.T, man goldenManifest, types map[string]quant.Type) (expertTotal, denseTensor int64, perLayer []int64, ws int64) {
	t.Helper()
	perLayer = make([]int64, man.Args.NLayer)
	for _, mt := range man.Tensors {
		tt, ok := types[mt.Name]
		if !ok {
			t.Fatalf("no type for %s", mt.Name)
		}
		rs, err := tt.RowSize(mt.Ne[0])
		if err != nil {
			t.Fatal(err)
		}
		size := rs
		for _, d := range mt.Ne[1:] {
			size *= d
		}
		if m := expertName.FindStringSubmatch(mt.Name); m != nil {
			expertTotal += size
			l, _ := strconv.Atoi(m[1])
			perLayer[l] += size / mt.Ne[2]
		} else {
			denseTensor += size
		}
	}
	for _, b := range perLayer {
		ws += int64(man.Args.NExpertUsed) * b
	}
	return expertTotal, denseTensor, perLayer, ws
}

// TestInspectDeepSeek2: a model with a dense first layer shows it as such
// in the per-layer expert bytes (the MoE layers' figures beside it), its
// shared experts, gating and latent attention geometry, and marks only
// the routed experts' tensors as streamed.
func TestInspectDeepSeek2(t *testing.T) {
	out, errOut, code := inspectRun(t, "inspect", goldenRoot+"models/tiny-deepseek2-F32.gguf")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"deepseek2 (runnable)",
		"dense layers / shared experts  1 leading / 1",
		"gating                         func 2, norm true, scale 2.5, groups 2 of 4",
		"latent attention               kv_lora_rank 64, q_lora_rank 128, head k/v 64 / 32, n_rot 32",
		"one expert per layer:   dense, 393216 ×3 bytes", // 3 × 256×128 floats
		"blk.1.ffn_up_exps.weight *",
		"expert bytes:           18874368 (18.00 MiB) in 3 layers",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, dense := range []string{"blk.0.ffn_up.weight ", "blk.1.ffn_up_shexp.weight ", "blk.1.attn_k_b.weight "} {
		if !strings.Contains(out, dense) || strings.Contains(out, dense+"*") {
			t.Errorf("%s is not listed as a dense tensor:\n%s", dense, out)
		}
	}
}

func TestInspectText(t *testing.T) {
	out, errOut, code := inspectRun(t, "inspect", goldenRoot+"models/tiny-gptoss-MXFP4_MOE.gguf")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"architecture:  gpt-oss (",
		"gpt-oss (runnable)", // model/gptoss is registered (cmd/pipe/run.go)
		"rope scaling",
		"yarn ×32 from 4096",
		"blk.3.ffn_down_exps.weight *",
		"MXFP4",
		"[256, 256, 8]",
		"dense bytes:",
		"expert bytes:           3342336",
		"one expert per layer:   104448 ×4 bytes",
		"one-token working set:  1671168",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = inspectRun(t, "inspect", "--no-tensors", goldenRoot+"models/tiny-qwen3moe-Q4_K_M.gguf")
	if code != 0 || strings.Contains(out, "blk.0.attn_q.weight") || !strings.Contains(out, "qwen3moe (runnable)") {
		t.Errorf("--no-tensors output (exit %d):\n%s", code, out)
	}
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(corrupt, []byte("GGUF\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.gguf")
	if err := os.WriteFile(junk, []byte("not a model at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"inspect", filepath.Join(dir, "missing.gguf")}, []string{"missing.gguf", "no such file"}},
		{[]string{"inspect", corrupt}, []string{"bad.gguf", "header.version", "v1"}},
		{[]string{"inspect", "--json", junk}, []string{"junk.gguf", "magic", "corrupt"}},
	}
	for _, c := range cases {
		out, errOut, code := inspectRun(t, c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", c.args)
		}
		if out != "" {
			t.Errorf("%v: stdout %q", c.args, out)
		}
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "pipe: ") {
			t.Errorf("%v: stderr is not one line: %q", c.args, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errOut, w)
			}
		}
	}
	if _, _, code := inspectRun(t, "inspect"); code == 0 {
		t.Error("inspect without a file: exit 0")
	}
}

// TestInspectSplit: given any shard, inspect reports the whole split model.
func TestInspectSplit(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "m")
	shards := [][]struct {
		name string
		tt   quant.Type
		dims []uint64
	}{
		{{"token_embd.weight", quant.Q8_0, []uint64{64, 10}}, {"blk.0.ffn_gate_exps.weight", quant.Q4_0, []uint64{64, 32, 4}}},
		{{"blk.0.ffn_up_exps.weight", quant.Q4_0, []uint64{64, 32, 4}}, {"blk.0.ffn_down_exps.weight", quant.Q8_0, []uint64{32, 64, 4}}},
	}
	for i, ts := range shards {
		fh, err := os.Create(gguf.SplitPath(prefix, i, len(shards)))
		if err != nil {
			t.Fatal(err)
		}
		w := gguf.NewWriter(fh)
		kvs := []gguf.KV{}
		add := func(k string, v any) {
			val, err := gguf.NewValue(v)
			if err != nil {
				t.Fatal(err)
			}
			kvs = append(kvs, gguf.KV{Key: k, Value: val})
		}
		if i == 0 {
			add("general.architecture", "qwen3moe")
			add("qwen3moe.block_count", uint32(1))
			add("qwen3moe.embedding_length", uint32(64))
			add("qwen3moe.attention.head_count", uint32(2))
			add("qwen3moe.expert_count", uint32(4))
			add("qwen3moe.expert_used_count", uint32(2))
		}
		add("split.no", uint16(i))
		add("split.count", uint16(len(shards)))
		add("split.tensors.count", int32(4))
		for _, kv := range kvs {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range ts {
			if err := w.AddTensor(x.name, x.tt, x.dims); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteHeader(); err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			n, err := x.tt.RowSize(int64(x.dims[0]))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range x.dims[1:] {
				n *= int64(d)
			}
			if err := w.WriteTensor(x.name, make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	out, errOut, code := inspectRun(t, "inspect", "--json", gguf.SplitPath(prefix, 1, 2))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Shards     []string `json:"shards"`
		NTensors   int      `json:"n_tensors"`
		Experts    int64    `json:"expert_bytes"`
		PerLayer   []int64  `json:"one_expert_bytes_per_layer"`
		WorkingSet int64    `json:"working_set_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// One expert: gate and up are 32 rows of 64 Q4_0 (36 bytes/row), down 64 rows of 32 Q8_0 (34 bytes/row).
	one := int64(32*36 + 32*36 + 64*34)
	if len(rep.Shards) != 2 || rep.NTensors != 4 || rep.Experts != 4*one || len(rep.PerLayer) != 1 || rep.PerLayer[0] != one || rep.WorkingSet != 2*one {
		t.Errorf("split report %+v, one expert = %d", rep, one)
	}
}

// typeNamed is the quant type ggml names name (quant.Type's String).
func typeNamed(name string) (quant.Type, bool) {
	for t := range quant.Type(256) {
		if tr, ok := t.Traits(); ok && tr.Name == name {
			return t, true
		}
	}
	return 0, false
}

// TestInspectEscapesFileText: text from the file (general.name, the
// architecture, tensor names) reaches the terminal with its control
// characters escaped, so a file cannot send escape sequences (issue 35,
// defect 10).
func TestInspectEscapesFileText(t *testing.T) {
	f, err := gguf.Open(goldenRoot + "models/tiny-gptoss-MXFP4_MOE.gguf")
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.Describe(f)
	if err != nil {
		t.Fatal(err)
	}
	rep := buildInspectReport(f, d, true)
	const evil = "evil\x1b]0;pwned\x07\x1b[2J\r\n\x9b31m\xff\u009b"
	rep.Name, rep.Arch, rep.Tensors[0].Name = evil, evil, evil
	rep.HParams.RopeScalingType = evil
	var out bytes.Buffer
	if err := writeInspectText(&out, rep, d); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"\x1b", "\x07", "\r", "\x9b", "\xff", "\u009b"} {
		if strings.Contains(out.String(), c) {
			t.Errorf("output holds %q:\n%q", c, out.String())
		}
	}
	if want := `evil\x1b]0;pwned\x07\x1b[2J\x0d\x0a\x9b31m\xff\u009b`; strings.Count(out.String(), want) != 4 {
		t.Errorf("want %s four times (name, architecture, tensor, rope scaling):\n%s", want, out.String())
	}
}
