package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// benchText is a mixed corpus: the vocab test inputs (English, code, CJK,
// other scripts, emoji, whitespace runs) repeated to about 64 KiB.
func benchText(tb testing.TB) string {
	raw, err := os.ReadFile("testdata/qwen3-vocab.gguf.inp")
	if err != nil {
		tb.Fatal(err)
	}
	s := strings.ReplaceAll(string(raw), "\n__ggml_vocab_test__\n", "\n")
	return strings.Repeat(s, 64<<10/len(s)+1)
}

func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"qwen3", "gptoss"} {
		b.Run(name, func(b *testing.B) {
			tk := load(b, "testdata/"+name+"-vocab.gguf")
			n := len(tk.Encode(text, false, false))
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				tk.Encode(text, false, false)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

func BenchmarkDecodeStream(b *testing.B) {
	text := benchText(b)
	tk := qwen3(b)
	ids := tk.Encode(text, false, false)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		st := tk.NewStream(true)
		for _, id := range ids {
			st.Add(id)
		}
		st.Flush()
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkNew(b *testing.B) {
	for _, name := range []string{"qwen3", "gptoss"} {
		b.Run(name, func(b *testing.B) {
			f := load(b, "testdata/"+name+"-vocab.gguf") // warm the file cache
			_ = f
			cfg := loadConfig(b, "testdata/"+name+"-vocab.gguf")
			for b.Loop() {
				if _, err := New(cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
