package gguf

import (
	"bufio"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/quant"
)

const goldenDir = "../testdata/golden/models/"

type manifest struct {
	Arch    string `json:"arch"`
	NVocab  int    `json:"n_vocab"`
	Tensors []struct {
		Name string   `json:"name"`
		Ne   []uint64 `json:"ggml_ne"`
	} `json:"tensors"`
}

// quantLog reads the tensor → output type table of a llama-quantize log.
func quantLog(t *testing.T, path string) map[string]quant.Type {
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
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[2]
		if m[3] != "" {
			name = m[3]
		}
		tt, ok := typeNamed(strings.ToUpper(name))
		if !ok {
			t.Fatalf("%s: unknown type %q", path, name)
		}
		out[m[1]] = tt
	}
	return out
}

func TestGoldenModels(t *testing.T) {
	models := []struct{ file, manifest, log string }{
		{"tiny-qwen3moe-F32.gguf", "tiny-qwen3moe.manifest.json", ""},
		{"tiny-qwen3moe-F16.gguf", "tiny-qwen3moe.manifest.json", "quantize-tiny-qwen3moe-F16.log"},
		{"tiny-qwen3moe-Q8_0.gguf", "tiny-qwen3moe.manifest.json", "quantize-tiny-qwen3moe-Q8_0.log"},
		{"tiny-qwen3moe-Q4_0.gguf", "tiny-qwen3moe.manifest.json", "quantize-tiny-qwen3moe-Q4_0.log"},
		{"tiny-qwen3moe-Q4_K_M.gguf", "tiny-qwen3moe.manifest.json", "quantize-tiny-qwen3moe-Q4_K_M.log"},
		{"tiny-qwen3moe-MXFP4_MOE.gguf", "tiny-qwen3moe.manifest.json", "quantize-tiny-qwen3moe-MXFP4_MOE.log"},
		{"tiny-gptoss-Q8_0.gguf", "tiny-gptoss.manifest.json", "quantize-tiny-gptoss-Q8_0.log"},
		{"tiny-gptoss-Q4_K_M.gguf", "tiny-gptoss.manifest.json", "quantize-tiny-gptoss-Q4_K_M.log"},
		{"tiny-gptoss-MXFP4_MOE.gguf", "tiny-gptoss.manifest.json", "quantize-tiny-gptoss-MXFP4_MOE.log"},
	}
	for _, m := range models {
		t.Run(m.file, func(t *testing.T) {
			f, err := Open(goldenDir + m.file)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(goldenDir + m.manifest)
			if err != nil {
				t.Fatal(err)
			}
			var man manifest
			if err := json.Unmarshal(raw, &man); err != nil {
				t.Fatal(err)
			}
			if f.Version != 3 || f.Alignment != 32 || len(f.Shards) != 1 {
				t.Errorf("version %d alignment %d shards %d", f.Version, f.Alignment, len(f.Shards))
			}
			if got := f.Architecture(); got != man.Arch {
				t.Errorf("architecture %q, manifest says %q", got, man.Arch)
			}
			if toks, err := f.GetStrings("tokenizer.ggml.tokens"); err != nil || len(toks) != man.NVocab {
				t.Errorf("tokens: %d, %v; manifest n_vocab %d", len(toks), err, man.NVocab)
			}
			if len(f.Tensors) != len(man.Tensors) {
				t.Fatalf("%d tensors, manifest lists %d", len(f.Tensors), len(man.Tensors))
			}
			for _, mt := range man.Tensors {
				ti, ok := f.Tensor(mt.Name)
				if !ok {
					t.Errorf("tensor %s missing", mt.Name)
					continue
				}
				if !reflect.DeepEqual(ti.Dims, mt.Ne) {
					t.Errorf("%s: dims %v, manifest %v", mt.Name, ti.Dims, mt.Ne)
				}
			}
			if m.log != "" {
				types := quantLog(t, "../testdata/golden/logs/"+m.log)
				if len(types) != len(f.Tensors) {
					t.Errorf("log lists %d tensors, file has %d", len(types), len(f.Tensors))
				}
				for name, want := range types {
					if ti, ok := f.Tensor(name); !ok || ti.Type != want {
						t.Errorf("%s: type %v, log says %v", name, ti.Type, want)
					}
				}
			} else {
				for _, ti := range f.Tensors {
					if ti.Type != quant.F32 {
						t.Errorf("%s: %v in the F32 model", ti.Name, ti.Type)
					}
				}
			}
			// Tensor data is contiguous in file order, each padded to 32.
			st, _ := os.Stat(goldenDir + m.file)
			next := f.DataOffset
			for _, ti := range f.Tensors {
				if ti.Offset != next {
					t.Errorf("%s at %d, expected %d", ti.Name, ti.Offset, next)
				}
				next = alignUp(ti.Offset+ti.Size, 32)
			}
			if next != uint64(st.Size()) {
				t.Errorf("tensors end at %d, file is %d bytes", next, st.Size())
			}
		})
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
