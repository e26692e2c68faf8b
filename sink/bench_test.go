package sink

import (
	"io"
	"testing"
)

// BenchmarkToken: the per-token cost of the sink on the decode path (CSV row
// formatting and write, disabled debug event), per token.
func BenchmarkToken(b *testing.B) {
	s, err := New(Options{CSVWriter: io.Discard, Warmup: -1})
	if err != nil {
		b.Fatal(err)
	}
	m := tok(2, 1<<30)
	b.SetBytes(int64(len(appendRow(nil, &m))))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Step = i + 1
		if err := s.Token(m); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/token")
	s.Close()
}
