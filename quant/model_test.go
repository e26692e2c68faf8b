package quant_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/quant"
)

func readTensor(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []byte {
	t.Helper()
	fh, err := os.Open(f.Shards[ti.Shard].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, ti.Size)
	if _, err := io.ReadFull(io.NewSectionReader(fh, int64(ti.Offset), int64(ti.Size)), buf); err != nil {
		t.Fatalf("read %s: %v", ti.Name, err)
	}
	return buf
}

// TestModelTensorsMatchLlamaQuantize quantizes every tensor of the F32 golden
// model with Quantize and compares the result with the bytes llama-quantize
// wrote into the quantized golden models (no imatrix): whole tensors, so
// thousands of blocks per type instead of the four rows of quant-vectors.json.
// It also dequantizes every quantized tensor (no error, finite values).
// Under -short or the race detector only the first 8 rows of each tensor are
// compared.
func TestModelTensorsMatchLlamaQuantize(t *testing.T) {
	sample := testing.Short() || quant.RaceEnabled
	dir := filepath.Join("..", "testdata", "golden", "models")
	ref, err := gguf.Open(filepath.Join(dir, "tiny-qwen3moe-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f32 := map[string][]float32{}
	source := func(name string) []float32 {
		if v, ok := f32[name]; ok {
			return v
		}
		ti, ok := ref.Tensor(name)
		if !ok || ti.Type != quant.F32 {
			t.Fatalf("F32 model: tensor %s missing or not F32", name)
		}
		raw := readTensor(t, ref, ti)
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		f32[name] = v
		return v
	}
	checked := map[quant.Type]int{}
	for _, model := range []string{"F16", "Q8_0", "Q4_0", "Q4_K_M", "MXFP4_MOE"} {
		qf, err := gguf.Open(filepath.Join(dir, "tiny-qwen3moe-"+model+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range qf.Tensors {
			ti := &qf.Tensors[i]
			if ti.Type == quant.F32 {
				continue
			}
			want := readTensor(t, qf, ti)
			x := source(ti.Name)
			if rows := 8; sample && uint64(len(want)) > uint64(rows)*ti.RowSize() {
				want = want[:uint64(rows)*ti.RowSize()]
				x = x[:rows*int(ti.Dims[0])]
			}
			got := make([]byte, len(want))
			if err := quant.Quantize(ti.Type, x, got); err != nil {
				t.Errorf("%s %s (%s): %v", model, ti.Name, ti.Type, err)
				continue
			}
			if !bytes.Equal(got, want) {
				bs := ti.Type.TypeSize()
				for b := 0; b*bs < len(got); b++ {
					if !bytes.Equal(got[b*bs:(b+1)*bs], want[b*bs:(b+1)*bs]) {
						t.Errorf("%s %s (%s): block %d of %d differs from llama-quantize", model, ti.Name, ti.Type, b, len(got)/bs)
						break
					}
				}
				continue
			}
			deq := make([]float32, len(x))
			if err := quant.Dequantize(ti.Type, want, deq); err != nil {
				t.Errorf("%s %s: dequantize: %v", model, ti.Name, err)
			}
			for _, v := range deq {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Errorf("%s %s: dequantized value %v", model, ti.Name, v)
					break
				}
			}
			checked[ti.Type] += len(got) / ti.Type.TypeSize()
		}
	}
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.MXFP4} {
		if checked[typ] == 0 {
			t.Errorf("no %s tensor compared", typ)
		}
	}
	t.Logf("blocks compared bit for bit: %v", checked)
}
