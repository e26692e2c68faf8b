package grammar

import (
	"math"
	"os"
	"sync"
	"testing"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/tokenizer"
)

const qwenVocab = "../../tokenizer/testdata/qwen3-vocab.gguf"

var qwen struct {
	once sync.Once
	tk   *tokenizer.Tokenizer
	v    *Vocab
	err  error
}

// qwen3 loads the Qwen3 tokenizer (151,669 tokens) and its Vocab once.
func qwen3(tb testing.TB) (*tokenizer.Tokenizer, *Vocab) {
	tb.Helper()
	qwen.once.Do(func() {
		f, err := gguf.Open(qwenVocab)
		if err != nil {
			qwen.err = err
			return
		}
		cfg, err := tokenizer.FromGGUF(f)
		if err != nil {
			qwen.err = err
			return
		}
		qwen.tk, qwen.err = tokenizer.New(cfg)
		if qwen.err == nil {
			qwen.v = VocabOf(qwen.tk)
		}
	})
	if qwen.err != nil {
		if os.IsNotExist(qwen.err) && os.Getenv("CI") != "true" {
			tb.Skipf("no Qwen3 vocabulary: %v", qwen.err)
		}
		tb.Fatal(qwen.err)
	}
	return qwen.tk, qwen.v
}

// benchDoc is a JSON answer as a model would write it.
const benchDoc = `{"name": "Ada Lovelace", "born": 1815, "tags": ["mathematics", "poetry", "engines"], "notes": {"analytical_engine": true, "score": -12.5e3, "empty": null, "quote": "That brain of mine is something more than merely mortal; as time will show."}}`

// benchSchema is a JSON schema benchDoc satisfies.
const benchSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "minLength": 1, "maxLength": 64},
	"born": {"type": "integer", "minimum": 0},
	"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
	"notes": {"type": "object", "properties": {
		"analytical_engine": {"type": "boolean"}, "score": {"type": "number"},
		"empty": {"type": "null"}, "quote": {"type": "string"}},
		"required": ["analytical_engine", "score", "empty", "quote"]}},
	"required": ["name", "born", "tags", "notes"]}`

func schemaGrammar(tb testing.TB) string {
	src, err := FromJSONSchema([]byte(benchSchema))
	if err != nil {
		tb.Fatal(err)
	}
	return src
}

// runDoc masks and accepts every token of doc with a fresh Matcher over a
// 151,936-wide logits row (the Qwen3 models' padded vocabulary).
func runDoc(tb testing.TB, g *Grammar, v *Vocab, ids []int32) {
	mt := NewMatcher(g, v)
	logits := make([]float32, 151936)
	for _, id := range ids {
		clear(logits)
		if err := mt.Apply(logits); err != nil {
			tb.Fatal(err)
		}
		if math.IsInf(float64(logits[id]), -1) {
			tb.Fatalf("token %d (%q) of the document masked", id, v.piece(id))
		}
		if err := mt.Accept(id); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestQwenJSONDocument: every token of a JSON document, tokenized by the
// Qwen3 tokenizer, passes the JSON grammar's and a schema grammar's mask over the full vocabulary,
// and the grammar is complete after it.
func TestQwenJSONDocument(t *testing.T) {
	tk, v := qwen3(t)
	g, err := Parse(JSONGrammar)
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode(benchDoc, false, false)
	runDoc(t, g, v, ids)
	gs, err := Parse(schemaGrammar(t))
	if err != nil {
		t.Fatal(err)
	}
	runDoc(t, gs, v, ids)
}

// BenchmarkGrammarMask is the cost per generated token of the JSON grammar
// and of a JSON-schema grammar (benchSchema)
// over the Qwen3 vocabulary: a fresh Matcher per document (no warm caches
// carried over), mask + accept for each of its tokens.
func BenchmarkGrammarMask(b *testing.B) {
	tk, v := qwen3(b)
	for _, c := range []struct{ name, src string }{{"json", JSONGrammar}, {"schema", schemaGrammar(b)}} {
		b.Run(c.name, func(b *testing.B) {
			g, err := Parse(c.src)
			if err != nil {
				b.Fatal(err)
			}
			ids := tk.Encode(benchDoc, false, false)
			cpu0 := cpuTime()
			for b.Loop() {
				runDoc(b, g, v, ids)
			}
			n := float64(b.N * len(ids))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n/1e6, "ms/token")
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/n/1e6, "cpu-ms/token")
		})
	}
}
