package quality

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// fakeModel's logits at a position are a fixed function of the token there
// and the position, so tests know every number; it records what it was fed.
type fakeModel struct {
	nVocab int
	fed    [][]int32
	froms  []int
	skew   float32 // added to the logit of token (tok+1) % nVocab
}

func (f *fakeModel) Eval(ctx context.Context, tokens []int32, from int, fn func(int, []float32) error) error {
	f.fed = append(f.fed, append([]int32(nil), tokens...))
	f.froms = append(f.froms, from)
	row := make([]float32, f.nVocab)
	for p := from; p < len(tokens); p++ {
		for i := range row {
			row[i] = float32((int(tokens[p])*7+i*3+p)%11) / 4
		}
		row[(int(tokens[p])+1)%f.nVocab] += f.skew
		if err := fn(p, row); err != nil {
			return err
		}
	}
	return nil
}

func text(n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((i*5 + i/3) % vocab)
	}
	return t
}

func TestPerplexityChunksAndBOS(t *testing.T) {
	m := &fakeModel{nVocab: 17}
	toks := text(70, 17)
	var out bytes.Buffer
	res, err := Perplexity(context.Background(), m, toks, Options{NCtx: 16, AddBOS: true, BOS: 3, NVocab: 17, Out: &out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks != 4 || len(m.fed) != 4 { // 70/16 = 4 whole chunks
		t.Fatalf("chunks %d, fed %d, want 4", res.Chunks, len(m.fed))
	}
	for i, fed := range m.fed {
		if fed[0] != 3 || m.froms[i] != 8 {
			t.Errorf("chunk %d: first token %d (want BOS 3), from %d (want 8)", i, fed[0], m.froms[i])
		}
		for j := 1; j < 16; j++ {
			if fed[j] != toks[i*16+j] {
				t.Fatalf("chunk %d position %d: fed %d, text has %d", i, j, fed[j], toks[i*16+j])
			}
		}
	}
	if res.Tokens != 4*7 { // positions 8..14 of each chunk score 9..15
		t.Errorf("scored %d tokens, want 28", res.Tokens)
	}
	// Recompute the mean −log p from the same rows, in float64 throughout.
	var sum float64
	for c := 0; c < 4; c++ {
		for p := 8; p <= 14; p++ {
			row := make([]float64, 17)
			tok := int(m.fed[c][p])
			mx := math.Inf(-1)
			for i := range row {
				row[i] = float64(float32((tok*7+i*3+p)%11) / 4)
				mx = math.Max(mx, row[i])
			}
			var s float64
			for _, v := range row {
				s += math.Exp(v - mx)
			}
			sum += -(row[toks[c*16+p+1]] - mx - math.Log(s))
		}
	}
	want := math.Exp(sum / 28)
	if math.Abs(res.PPL-want) > 1e-7*want { // expf in float32
		t.Errorf("PPL %v, want %v", res.PPL, want)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "[1]") || !strings.HasSuffix(lines[0], fmt.Sprintf("[4]%.4f,", want)) {
		t.Errorf("chunk line %q", lines[0])
	}
	if lines[1] != fmt.Sprintf("Final estimate: PPL = %.4f +/- %.5f", res.PPL, res.PPLErr) || res.PPLErr <= 0 {
		t.Errorf("final line %q (err %v)", lines[1], res.PPLErr)
	}
}

func TestPerplexityNoBOSKeepsFirstToken(t *testing.T) {
	m := &fakeModel{nVocab: 17}
	toks := text(40, 17)
	if _, err := Perplexity(context.Background(), m, toks, Options{NCtx: 16, Chunks: 1, NVocab: 17, Out: &bytes.Buffer{}}, nil); err != nil {
		t.Fatal(err)
	}
	if len(m.fed) != 1 || m.fed[0][0] != toks[0] {
		t.Fatalf("fed %v: want one chunk starting with the text's own first token %d", m.fed, toks[0])
	}
}

func TestUniformLogitsPerplexityIsTheVocabulary(t *testing.T) {
	m := &uniform{n: 50}
	res, err := Perplexity(context.Background(), m, text(64, 50), Options{NCtx: 32, NVocab: 50, Out: &bytes.Buffer{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.PPL-50) > 1e-9 {
		t.Fatalf("PPL of uniform logits %v, want 50", res.PPL)
	}
}

type uniform struct{ n int }

func (u *uniform) Eval(_ context.Context, tokens []int32, from int, fn func(int, []float32) error) error {
	row := make([]float32, u.n)
	for p := from; p < len(tokens); p++ {
		if err := fn(p, row); err != nil {
			return err
		}
	}
	return nil
}

func TestTooShortText(t *testing.T) {
	_, err := Perplexity(context.Background(), &uniform{n: 9}, text(31, 9), Options{NCtx: 16, NVocab: 9, Out: &bytes.Buffer{}}, nil)
	if !errors.Is(err, ErrTooShort) || !strings.Contains(err.Error(), "at least 32 tokens") {
		t.Fatalf("err %v, want ErrTooShort naming 32 tokens", err)
	}
}

func TestEvaluatorErrorNamesTheChunk(t *testing.T) {
	boom := errors.New("boom")
	_, err := Perplexity(context.Background(), failing{boom}, text(64, 9), Options{NCtx: 16, NVocab: 9, Out: &bytes.Buffer{}}, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "chunk 1") {
		t.Fatalf("err %v", err)
	}
}

type failing struct{ err error }

func (f failing) Eval(context.Context, []int32, int, func(int, []float32) error) error { return f.err }

// A base saved by Perplexity and read back by KLDivergence with the same
// model: KL ≈ 0 (only the 16-bit quantization of the log-probabilities), the
// same top token everywhere, the same perplexity; a skewed model diverges.
func TestBaseRoundTripAndKL(t *testing.T) {
	m := &fakeModel{nVocab: 17}
	toks := text(300, 17)
	var base, out bytes.Buffer
	res, err := Perplexity(context.Background(), m, toks, Options{NCtx: 32, NVocab: 17, Out: &out}, &base)
	if err != nil {
		t.Fatal(err)
	}
	per := 32 - 1 - 16
	if want := 20 + 4*res.Chunks*32 + res.Chunks*per*2*rowUint16s(17); base.Len() != want {
		t.Fatalf("base file %d bytes, want %d", base.Len(), want)
	}
	b, err := OpenBase(bytes.NewReader(base.Bytes()), "base")
	if err != nil {
		t.Fatal(err)
	}
	if b.NCtx != 32 || b.NVocab != 17 || b.NChunk != res.Chunks || b.Tokens[33] != toks[33] {
		t.Fatalf("header %d %d %d", b.NCtx, b.NVocab, b.NChunk)
	}
	var kout bytes.Buffer
	kl, err := KLDivergence(context.Background(), &fakeModel{nVocab: 17}, b, Options{NVocab: 17, Out: &kout})
	if err != nil {
		t.Fatal(err)
	}
	if kl.Tokens != res.Tokens || kl.SameTop != 1 || math.Abs(kl.KLD) > 1e-5 || math.Abs(kl.PPL/res.PPL-1) > 1e-6 || math.Abs(kl.PPLBase/kl.PPL-1) > 1e-4 {
		t.Fatalf("self-KL: %+v (ppl %v)", kl, res.PPL)
	}
	if !strings.Contains(kout.String(), "====== KL divergence statistics ======") || !strings.Contains(kout.String(), "Same top p: 100.000 ± 0.000 %") {
		t.Errorf("KL output:\n%s", kout.String())
	}
	b, _ = OpenBase(bytes.NewReader(base.Bytes()), "base")
	skew, err := KLDivergence(context.Background(), &fakeModel{nVocab: 17, skew: 3}, b, Options{NVocab: 17, Out: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if skew.KLD < 0.1 || skew.SameTop > 0.9 {
		t.Fatalf("a skewed model: KLD %v, same top %v", skew.KLD, skew.SameTop)
	}
}

func TestBadBase(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":     nil,
		"magic":     []byte("_logitz_xxxxxxxxxxxxxxxx"),
		"truncated": append([]byte("_logits_"), 32, 0, 0, 0, 17, 0, 0, 0, 2, 0, 0, 0, 1, 2),
		"n_chunk":   append([]byte("_logits_"), 32, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0),
	} {
		if _, err := OpenBase(bytes.NewReader(data), name); !errors.Is(err, ErrBaseFile) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err %v, want ErrBaseFile naming the file", name, err)
		}
	}
	// A base whose rows stop early fails at the chunk that needs them.
	var base bytes.Buffer
	if _, err := Perplexity(context.Background(), &uniform{n: 9}, text(64, 9), Options{NCtx: 16, NVocab: 9, Out: &bytes.Buffer{}}, &base); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBase(bytes.NewReader(base.Bytes()[:base.Len()-10]), "cut")
	if err != nil {
		t.Fatal(err)
	}
	_, err = KLDivergence(context.Background(), &uniform{n: 9}, b, Options{NVocab: 9, Out: &bytes.Buffer{}})
	if !errors.Is(err, ErrBaseFile) || !strings.Contains(err.Error(), "chunk 4") {
		t.Fatalf("err %v, want ErrBaseFile at chunk 4", err)
	}
	b, _ = OpenBase(bytes.NewReader(base.Bytes()), "vocab")
	if _, err := KLDivergence(context.Background(), &uniform{n: 10}, b, Options{NVocab: 10, Out: &bytes.Buffer{}}); !errors.Is(err, ErrBaseFile) {
		t.Fatalf("vocabulary mismatch: err %v", err)
	}
}

func TestNearestIntRoundsHalfToEven(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want int32
	}{{0.5, 0}, {1.5, 2}, {2.5, 2}, {65534.5, 65534}, {65535, 65535}, {3.49, 3}, {-1.5, -2}} {
		if got := nearestInt(c.x); got != c.want {
			t.Errorf("nearestInt(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func TestPercentileAndMedian(t *testing.T) {
	v := []float32{1, 2, 3, 4}
	if got := percentile(v, 0.5); got != 2.5 {
		t.Errorf("percentile 0.5 = %v", got)
	}
	if percentile(v, 0) != 1 || percentile(v, 1) != 4 || median(v) != 2.5 || median(v[:3]) != 2 {
		t.Error("ends or median")
	}
}

// TestNaNBaseRowsRefused: a base file whose rows' scale or min is NaN (or
// infinite) is refused naming the file and the row, not reported as a
// perfect match (issue 35, defect 9).
func TestNaNBaseRowsRefused(t *testing.T) {
	var base bytes.Buffer
	if _, err := Perplexity(context.Background(), &uniform{n: 9}, text(64, 9), Options{NCtx: 16, NVocab: 9, Out: &bytes.Buffer{}}, &base); err != nil {
		t.Fatal(err)
	}
	rows := 20 + 4*4*16 // header and tokens: 4 chunks of 16
	rowBytes := 2 * rowUint16s(9)
	for name, bits := range map[string]uint32{"nan": 0x7fc00000, "inf": 0x7f800000} {
		data := bytes.Clone(base.Bytes())
		for off := rows; off+rowBytes <= len(data); off += rowBytes {
			binary.LittleEndian.PutUint32(data[off:], bits)   // scale
			binary.LittleEndian.PutUint32(data[off+4:], bits) // min
		}
		b, err := OpenBase(bytes.NewReader(data), name+".kld")
		if err != nil {
			t.Fatal(err)
		}
		kl, err := KLDivergence(context.Background(), &uniform{n: 9}, b, Options{NVocab: 9, Out: &bytes.Buffer{}})
		if !errors.Is(err, ErrBaseFile) || !strings.Contains(err.Error(), name+".kld") || !strings.Contains(err.Error(), "row 1 ") {
			t.Fatalf("%s rows: err %v (KLD %v), want ErrBaseFile naming the file and row 1", name, err, kl.KLD)
		}
	}
}
