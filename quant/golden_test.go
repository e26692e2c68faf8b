package quant

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// goldenVector is one entry of testdata/golden/quant-vectors.json (README §9):
// llama.cpp's input rows, the bytes llama-quantize wrote for them and ggml's
// dequantization of those bytes.
type goldenVector struct {
	Type           string `json:"type"`
	Tensor         string `json:"tensor"`
	SourceModel    string `json:"source_model"`
	Rows           int    `json:"rows"`
	RowLen         int    `json:"row_len"`
	F32InputB64    string `json:"f32_input_b64"`
	QuantizedB64   string `json:"quantized_b64"`
	QuantizedBytes int    `json:"quantized_bytes"`
	DequantizedB64 string `json:"dequantized_b64"`

	typ         Type
	input       []float32
	quantized   []byte
	dequantized []float32
}

func loadGolden(t testing.TB) []goldenVector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "golden", "quant-vectors.json"))
	if err != nil {
		t.Fatalf("read golden vectors: %v", err)
	}
	var doc struct {
		Format  string         `json:"format"`
		Vectors []goldenVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse golden vectors: %v", err)
	}
	if doc.Format != "quant test vectors v1" || len(doc.Vectors) == 0 {
		t.Fatalf("unexpected golden format %q with %d vectors", doc.Format, len(doc.Vectors))
	}
	for i := range doc.Vectors {
		v := &doc.Vectors[i]
		typ, ok := ParseType(v.Type)
		if !ok {
			t.Fatalf("golden vector %d: unknown type %q", i, v.Type)
		}
		v.typ = typ
		v.input = decodeF32(t, v.F32InputB64)
		v.dequantized = decodeF32(t, v.DequantizedB64)
		v.quantized, err = base64.StdEncoding.DecodeString(v.QuantizedB64)
		if err != nil {
			t.Fatalf("golden %s: quantized: %v", v.Type, err)
		}
		n := v.Rows * v.RowLen
		if len(v.input) != n || len(v.dequantized) != n || len(v.quantized) != v.QuantizedBytes {
			t.Fatalf("golden %s: inconsistent lengths", v.Type)
		}
		if rs, err := typ.RowSize(int64(n)); err != nil || rs != int64(len(v.quantized)) {
			t.Fatalf("golden %s: RowSize(%d)=%d,%v; file has %d bytes", v.Type, n, rs, err, len(v.quantized))
		}
	}
	return doc.Vectors
}

func decodeF32(t testing.TB, s string) []float32 {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("decode f32 base64: %v (len %d)", err, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestGoldenDequantize: Dequantize(llama.cpp's bytes) equals ggml's floats bit
// for bit, for every type in the golden file.
func TestGoldenDequantize(t *testing.T) {
	vecs := loadGolden(t)
	seen := map[Type]bool{}
	for _, v := range vecs {
		t.Run(v.Type, func(t *testing.T) {
			seen[v.typ] = true
			got := make([]float32, len(v.dequantized))
			if err := Dequantize(v.typ, v.quantized, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(v.dequantized[i]) {
					if bad < 5 {
						t.Errorf("element %d: got %v (%#08x), llama.cpp %v (%#08x)", i, got[i], math.Float32bits(got[i]), v.dequantized[i], math.Float32bits(v.dequantized[i]))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d elements differ", bad, len(got))
			}
		})
	}
	for _, want := range []Type{F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4} {
		if !seen[want] {
			t.Errorf("golden file has no vector for %s", want)
		}
	}
}

// TestGoldenQuantize: Quantize(llama.cpp's input rows) equals the bytes
// llama-quantize wrote, byte for byte, for every type we can quantize.
func TestGoldenQuantize(t *testing.T) {
	for _, v := range loadGolden(t) {
		t.Run(v.Type, func(t *testing.T) {
			if !CanQuantize(v.typ) {
				t.Fatalf("no quantizer for %s", v.Type)
			}
			got := make([]byte, len(v.quantized))
			if err := Quantize(v.typ, v.input, got); err != nil {
				t.Fatal(err)
			}
			bs, ts := v.typ.BlockSize(), v.typ.TypeSize()
			bad := 0
			for blk := 0; blk*ts < len(got); blk++ {
				g, w := got[blk*ts:(blk+1)*ts], v.quantized[blk*ts:(blk+1)*ts]
				for i := range g {
					if g[i] != w[i] {
						if bad < 5 {
							t.Errorf("block %d (elements %d..%d) byte %d: got %#02x, llama.cpp %#02x", blk, blk*bs, (blk+1)*bs-1, i, g[i], w[i])
						}
						bad++
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d bytes differ", bad, len(got))
			}
		})
	}
}
