package replay

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
)

const goodHeader = `# route_trace v1
# model=/data/my model.gguf arch=qwen3moe n_layer=2 n_expert=4 n_expert_used=2
# layer=0 expert_bytes=100 dense_bytes=7
# layer=1 expert_bytes=200 dense_bytes=8
turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
`

func TestReadGood(t *testing.T) {
	tr, err := Read(strings.NewReader(goodHeader + "0,0,0,1,1,3,0.25,1,0\r\n\n0,1,5,0,0,2,1e-3,0,100\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := tr.Header
	if h.Model != "/data/my model.gguf" || h.Arch != "qwen3moe" || h.NLayer != 2 || h.NExpert != 4 || h.NExpertUsed != 2 ||
		h.Layers[1] != (LayerInfo{200, 8}) || h.WorkingSet() != 2*300 {
		t.Errorf("header = %+v", h)
	}
	want := []Row{
		{Turn: 0, Phase: 0, Step: 0, Layer: 1, Slot: 1, Expert: 3, Weight: 0.25, Resident: true},
		{Turn: 0, Phase: 1, Step: 5, Layer: 0, Slot: 0, Expert: 2, Weight: 1e-3, ExpertBytes: 100},
	}
	if len(tr.Rows) != 2 || tr.Rows[0] != want[0] || tr.Rows[1] != want[1] {
		t.Errorf("rows = %+v, want %+v", tr.Rows, want)
	}
}

// TestReadMalformed: every error wraps ErrMalformed and names the line.
func TestReadMalformed(t *testing.T) {
	row := "0,1,0,0,0,1,0.5,0,100\n"
	cases := []struct{ name, in, line string }{
		{"empty", "", "empty input"},
		{"magic", "# route_trace v2\n", "line 1:"},
		{"no model line", "# route_trace v1\n# layer=0 expert_bytes=1\n" + Columns + "\n", "line 3:"},
		{"bad n_layer", strings.Replace(goodHeader, "n_layer=2", "n_layer=two", 1), "line 2: n_layer"},
		{"k > n", strings.Replace(goodHeader, "n_expert_used=2", "n_expert_used=9", 1), "line 2:"},
		{"missing layer", strings.Replace(goodHeader, "# layer=1 expert_bytes=200 dense_bytes=8\n", "", 1), "line 4:"},
		{"dup layer", strings.Replace(goodHeader, "# layer=1 ", "# layer=0 ", 1), "line 4: layer 0 described twice"},
		{"bad expert_bytes", strings.Replace(goodHeader, "expert_bytes=200", "expert_bytes=-2", 1), "line 4: expert_bytes"},
		{"columns", strings.Replace(goodHeader, "residency", "resident", 1), "line 5: CSV header"},
		{"no csv header", "# route_trace v1\n# model=x arch=y n_layer=1 n_expert=2 n_expert_used=1\n# layer=0 expert_bytes=1\n", "line 3: end of input"},
		{"fields", goodHeader + row + "0,1,0,0,0,1,0.5,0\n", "line 7: 8 fields"},
		{"layer range", goodHeader + "0,1,0,2,0,1,0.5,0,100\n", "line 6: layer=\"2\""},
		{"expert range", goodHeader + row + row + "0,1,0,0,0,4,0.5,0,100\n", "line 8: expert=\"4\""},
		{"negative step", goodHeader + "0,1,-1,0,0,1,0.5,0,100\n", "line 6: step"},
		{"phase", goodHeader + "0,2,0,0,0,1,0.5,0,100\n", "line 6: phase"},
		{"weight", goodHeader + "0,1,0,0,0,1,heavy,0,100\n", "line 6: weight"},
		{"residency", goodHeader + "0,1,0,0,0,1,0.5,yes,100\n", "line 6: residency"},
		{"bytes", goodHeader + "0,1,0,0,0,1,0.5,0,1.5\n", "line 6: expert_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.line) {
				t.Errorf("err = %v, want ErrMalformed mentioning %q", err, c.line)
			}
		})
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n > 0 {
		n := copy(p, goodHeader[:min(len(p), f.n)])
		f.n -= n
		return n, nil
	}
	return 0, io.ErrUnexpectedEOF
}

func TestReadIOError(t *testing.T) {
	_, err := Read(&failingReader{n: 40})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("err = %v, want the reader's error", err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	hdr := Header{Model: "/m/qwen.gguf", Arch: "qwen3moe", NLayer: 2, NExpert: 8, NExpertUsed: 2,
		Layers: []LayerInfo{{100, 10}, {300, 30}}}
	var buf bytes.Buffer
	w := NewTraceWriter(&buf, hdr)
	steps := []struct {
		phase, step, layer int
		experts            []int
		weights            []float32
		resident           []bool
	}{
		{0, 0, 0, []int{1, 2}, []float32{0.7, 0.3}, []bool{false, false}},
		{0, 1, 0, []int{2, 3}, []float32{0.6, 0.4}, []bool{false, false}}, // 2 already read in this prefill batch
		{0, 0, 1, []int{5, 6}, []float32{0.5, 0.5}, []bool{false, true}},
		{1, 2, 0, []int{2, 7}, []float32{0.9, 0.1}, []bool{true, false}},
		{1, 2, 1, []int{5, 4}, []float32{float32(math.Pi), 1e-7}, []bool{false, false}},
	}
	for _, s := range steps {
		if err := w.Route(0, s.phase, s.step, s.layer, s.experts, s.weights, s.resident); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if tr.Header.Model != hdr.Model || tr.Header.NExpert != 8 || tr.Header.Layers[1] != hdr.Layers[1] {
		t.Errorf("header %+v, want %+v", tr.Header, hdr)
	}
	var i int
	wantBytes := []int64{100, 100, 0, 100, 300, 0, 0, 100, 300, 300}
	for _, s := range steps {
		for j, e := range s.experts {
			r := tr.Rows[i]
			if r.Phase != s.phase || r.Step != s.step || r.Layer != s.layer || r.Slot != j || r.Expert != e ||
				r.Weight != s.weights[j] || r.Resident != s.resident[j] || r.ExpertBytes != wantBytes[i] {
				t.Errorf("row %d = %+v, want %+v slot %d expert %d bytes %d", i, r, s, j, e, wantBytes[i])
			}
			i++
		}
	}
	if len(tr.Rows) != i {
		t.Errorf("%d rows, want %d", len(tr.Rows), i)
	}
}

func TestWriterErrors(t *testing.T) {
	hdr := Header{Model: "m", Arch: "a", NLayer: 1, NExpert: 4, NExpertUsed: 1, Layers: []LayerInfo{{1, 1}}}
	w := NewTraceWriter(io.Discard, hdr)
	for _, c := range []struct {
		name                       string
		phase, step, layer, expert int
		nw                         int
	}{
		{"phase", 2, 0, 0, 0, 1}, {"layer", 1, 0, 1, 0, 1}, {"expert", 1, 0, 0, 4, 1}, {"lengths", 1, 0, 0, 0, 2}, {"step", 1, -1, 0, 0, 1},
	} {
		if err := w.Route(0, c.phase, c.step, c.layer, []int{c.expert}, make([]float32, c.nw), []bool{false}); !errors.Is(err, ErrWriter) {
			t.Errorf("%s: err = %v, want ErrWriter", c.name, err)
		}
	}
	bad := hdr
	bad.Layers = nil
	if err := NewTraceWriter(io.Discard, bad).Close(); !errors.Is(err, ErrWriter) {
		t.Errorf("header without layers: err = %v, want ErrWriter", err)
	}
	bad = hdr
	bad.Model = "a=b"
	if err := NewTraceWriter(io.Discard, bad).Close(); !errors.Is(err, ErrWriter) {
		t.Errorf("model with '=': err = %v, want ErrWriter", err)
	}
}

// TestRealTracesRoundTrip: reading a real trace, writing it back through
// the writer and reading again gives the same rows (expert_bytes aside,
// which the writer derives) and the same header.
func TestRealTracesRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen", "gemma"} {
		f, err := os.Open("testdata/" + name + ".route.csv")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := Read(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := NewTraceWriter(&buf, tr.Header)
		rows := tr.Rows
		for i := 0; i < len(rows); {
			j := i
			for j < len(rows) && rows[j].Turn == rows[i].Turn && rows[j].Phase == rows[i].Phase && rows[j].Step == rows[i].Step && rows[j].Layer == rows[i].Layer {
				j++
			}
			var ex []int
			var ws []float32
			var rs []bool
			for _, r := range rows[i:j] {
				ex, ws, rs = append(ex, r.Expert), append(ws, r.Weight), append(rs, r.Resident)
			}
			if err := w.Route(rows[i].Turn, rows[i].Phase, rows[i].Step, rows[i].Layer, ex, ws, rs); err != nil {
				t.Fatal(err)
			}
			i = j
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		back, err := Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.Rows) != len(rows) || back.Header.Arch != tr.Header.Arch || len(back.Header.Layers) != len(tr.Header.Layers) {
			t.Fatalf("%s: %d rows back, want %d", name, len(back.Rows), len(rows))
		}
		var diffBytes int
		for i := range rows {
			a, b := rows[i], back.Rows[i]
			if a.ExpertBytes != b.ExpertBytes {
				diffBytes++
			}
			a.ExpertBytes, b.ExpertBytes = 0, 0
			if a != b {
				t.Fatalf("%s row %d: %+v back as %+v", name, i, a, b)
			}
		}
		// The recorder's expert_bytes follow the same rule as the writer's.
		if diffBytes != 0 {
			t.Errorf("%s: %d rows with different expert_bytes", name, diffBytes)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(goodHeader + "0,0,0,1,1,3,0.25,1,0\n")
	f.Add(goodHeader + "0,1,0,0,0,1,0.5,0\n")
	f.Add("# route_trace v1\n# layer=0 expert_bytes=1\n")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := Read(strings.NewReader(s))
		if err != nil {
			return
		}
		// Whatever parses must compile and replay without error, and its
		// locality figures are fractions.
		if l := tr.Locality(PhaseAll); l.PrevHit < 0 || l.PrevHit > 1 || l.PopularHit < 0 || l.PopularHit > 1 {
			t.Fatalf("locality %+v", l)
		}
		seq := Compile(tr)
		for _, p := range []string{"lru", "layer"} {
			if _, err := Simulate(seq, mustPolicy(t, p, seq), 1000, CountAll); err != nil {
				t.Fatal(err)
			}
		}
	})
}
