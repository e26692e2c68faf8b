package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
)

// embedOf is what the model computes for ids under p, normalised when
// pooled (by norm), for the tests to compare the routes' answers with: on
// a model of its own (the server's may be running a pass or reading its
// engine's meters), opened with the harness's options.
func (h *harness) embedOf(ids []int32, p model.Pooling, norm int) [][]float32 {
	h.t.Helper()
	if h.ref == nil {
		m, err := decode.Open(context.Background(), h.opts)
		if err != nil {
			h.t.Fatal(err)
		}
		h.t.Cleanup(func() { m.Close() })
		h.ref = m
	}
	e, err := h.ref.Embed(context.Background(), ids, p, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if p != model.PoolNone {
		model.Normalize(e.Rows[0], e.Rows[0], norm)
	}
	return e.Rows
}

// postJSON posts body to path and decodes the answer into v, checking the
// status; it returns the raw body.
func (h *harness) postJSON(path, body string, status int, v any) string {
	h.t.Helper()
	got, _, b := h.send(http.MethodPost, path, "", body, "Content-Type", jsonCT)
	if got != status {
		h.t.Fatalf("POST %s %s: status %d, want %d: %s", path, body, got, status, b)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(b), v); err != nil {
			h.t.Fatalf("POST %s: %v: %s", path, err, b)
		}
	}
	return b
}

func sameRows(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: row %d has %d floats, want %d", what, i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("%s: row %d [%d] = %v, want %v", what, i, j, got[i][j], want[i][j])
			}
		}
	}
}

func idsJSON(ids []int32) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

func sumSquares(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s
}

type oaiList struct {
	Model, Object string
	RawUsage      map[string]int `json:"usage"`
	Data          []struct {
		Embedding      json.RawMessage `json:"embedding"`
		Index          int             `json:"index"`
		Object         string          `json:"object"`
		EncodingFormat string          `json:"encoding_format"`
	} `json:"data"`
}

// TestEmbeddingsOff: without --embedding every embeddings route is
// llama-server's 501 not_supported_error naming the flag.
func TestEmbeddingsOff(t *testing.T) {
	h := start(t, nil)
	for _, path := range []string{"/v1/embeddings", "/embeddings", "/embedding"} {
		var r apiError
		h.postJSON(path, `{"input":"hello"}`, http.StatusNotImplemented, &r)
		if r.Error.Type != "not_supported_error" || !strings.Contains(r.Error.Message, "Start it with `--embeddings`") {
			t.Errorf("%s: %+v", path, r.Error)
		}
	}
}

// TestEmbeddingsPoolingNone: pooling none answers /embeddings and
// /embedding with every token's output-norm row, not normalised, the
// model's own bits; /v1/embeddings refuses it with llama-server's 400.
func TestEmbeddingsPoolingNone(t *testing.T) {
	h := start(t, func(o *Options) { o.Embeddings, o.Pooling = true, model.PoolNone })
	var r apiError
	h.postJSON("/v1/embeddings", `{"input":"hello hello hello"}`, http.StatusBadRequest, &r)
	if r.Error.Message != "Pooling type 'none' is not OAI compatible. Please use a different pooling type" || r.Error.Type != "invalid_request_error" {
		t.Errorf("/v1/embeddings with pooling none: %+v", r.Error)
	}
	ids := h.tokensOf("hello hello hello")
	want := h.embedOf(ids, model.PoolNone, 2)
	for _, path := range []string{"/embeddings", "/embedding"} {
		var got []embeddingAnswer
		h.postJSON(path, `{"input":"hello hello hello"}`, 200, &got)
		if len(got) != 1 || got[0].Index != 0 {
			t.Fatalf("%s: %d answers", path, len(got))
		}
		sameRows(t, path, got[0].Embedding, want)
		if len(want) != len(ids) || len(want[0]) != h.m.Engine().Desc().HParams.NEmbd {
			t.Fatalf("%d rows of %d for %d tokens", len(want), len(want[0]), len(ids))
		}
		for i, row := range got[0].Embedding {
			if math.Abs(sumSquares(row)-1) < 1e-3 {
				t.Errorf("%s: row %d is normalised", path, i)
			}
		}
	}
}

// TestEmbeddingsOAI: /v1/embeddings in OpenAI's shape for every input shape
// (a string, strings, token ids, ids and text mixed, several of those), on
// one session and on two batched slots (Batch.Exclusive): one entry per
// prompt in order, each the pooled row normalised (Euclidean by default,
// a request's embd_normalize wins), usage the prompt tokens, the request's
// model echoed; base64 carries the same float32s; a body with "content"
// instead of "input" is answered in llama-server's shape.
func TestEmbeddingsOAI(t *testing.T) {
	for _, c := range []struct {
		p        model.Pooling
		parallel int
	}{{model.PoolMean, 1}, {model.PoolLast, 2}, {model.PoolCLS, 1}} {
		t.Run(fmt.Sprintf("%v/np%d", c.p, c.parallel), func(t *testing.T) {
			h := start(t, func(o *Options) { o.Embeddings, o.Pooling, o.Parallel = true, c.p, c.parallel })
			a, b := h.tokensOf("I believe the meaning of life is"), h.tokensOf("This is a test")
			mixed := append(append([]int32{12, 34}, h.tokensOf("string")...), 56)
			wantA, wantB, wantM := h.embedOf(a, c.p, 2)[0], h.embedOf(b, c.p, 2)[0], h.embedOf(mixed, c.p, 2)[0]
			if math.Abs(sumSquares(wantA)-1) > 1e-5 {
				t.Fatalf("normalised row has squares summing to %v", sumSquares(wantA))
			}
			for _, in := range []struct {
				input string
				want  [][]float32
				n     int
			}{
				{`"I believe the meaning of life is"`, [][]float32{wantA}, len(a)},
				{`["I believe the meaning of life is","This is a test"]`, [][]float32{wantA, wantB}, len(a) + len(b)},
				{idsJSON(a), [][]float32{wantA}, len(a)},
				{`[12,34,"string",56]`, [][]float32{wantM}, len(mixed)},
				{`[` + idsJSON(b) + `,[12,34,"string",56],"I believe the meaning of life is"]`, [][]float32{wantB, wantM, wantA}, len(b) + len(mixed) + len(a)},
			} {
				var l oaiList
				h.postJSON("/v1/embeddings", `{"model":"text-embedding-3-small","input":`+in.input+`}`, 200, &l)
				if l.Object != "list" || l.Model != "text-embedding-3-small" || l.RawUsage["prompt_tokens"] != in.n || l.RawUsage["total_tokens"] != in.n {
					t.Errorf("input %s: object %q model %q usage %v, want %d tokens", in.input, l.Object, l.Model, l.RawUsage, in.n)
				}
				if len(l.Data) != len(in.want) {
					t.Fatalf("input %s: %d entries, want %d", in.input, len(l.Data), len(in.want))
				}
				for i, d := range l.Data {
					var row []float32
					if err := json.Unmarshal(d.Embedding, &row); err != nil || d.Index != i || d.Object != "embedding" {
						t.Fatalf("input %s entry %d: %s %v", in.input, i, d.Embedding, err)
					}
					sameRows(t, in.input, [][]float32{row}, [][]float32{in.want[i]})
				}
			}
			var l oaiList
			h.postJSON("/v1/embeddings", `{"input":"This is a test","encoding_format":"base64"}`, 200, &l)
			var s string
			if err := json.Unmarshal(l.Data[0].Embedding, &s); err != nil || l.Data[0].EncodingFormat != "base64" || l.Model != "tiny" {
				t.Fatalf("base64: %s %q %q %v", l.Data[0].Embedding, l.Data[0].EncodingFormat, l.Model, err)
			}
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw) != 4*len(wantB) {
				t.Fatalf("base64: %d bytes, %v", len(raw), err)
			}
			for i, w := range wantB {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != w {
					t.Fatalf("base64 float %d: %v, want %v", i, got, w)
				}
			}
			var native []embeddingAnswer // "content" is answered in llama-server's own shape
			h.postJSON("/v1/embeddings", `{"content":"This is a test"}`, 200, &native)
			if len(native) != 1 {
				t.Fatalf("content: %d answers", len(native))
			}
			sameRows(t, "content", native[0].Embedding, [][]float32{wantB})
			h.postJSON("/v1/embeddings", `{"input":"This is a test","embd_normalize":-1}`, 200, &l)
			var row []float32
			_ = json.Unmarshal(l.Data[0].Embedding, &row)
			sameRows(t, "embd_normalize -1", [][]float32{row}, h.embedOf(b, c.p, -1))
		})
	}
}

// TestEmbeddingsErrors: llama-server's answers to what it refuses — no
// input, an unknown encoding_format, an empty prompt, a token outside the
// vocabulary (pipe's), a prompt longer than a pass for a pooling that needs
// it in one (500 "too large") and one that fills the context for last
// pooling (exceed_context_size_error).
func TestEmbeddingsErrors(t *testing.T) {
	h := start(t, func(o *Options) { o.Embeddings, o.Pooling, o.Ubatch = true, model.PoolMean, 8 })
	long := `"` + strings.Repeat("This is a test ", 10) + `"`
	for _, c := range []struct {
		body, msg string
		status    int
	}{
		{`{"text":"x"}`, `"input" or "content" must be provided`, 400},
		{`{"input":"x","encoding_format":"int8"}`, "Can be either float or base64", 400},
		{`{"input":""}`, "Input content cannot be empty", 400},
		{`{"input":[1,999999]}`, "not in the vocabulary", 400},
		{`{"input":{"x":1}}`, "bad request: input: want a string, an array of token ids", 400},
		{`{"input":` + long + `}`, "is too large to process. increase the physical batch size (current batch size: 8)", 500},
	} {
		var r apiError
		h.postJSON("/v1/embeddings", c.body, c.status, &r)
		if !strings.Contains(r.Error.Message, c.msg) {
			t.Errorf("%s: %q, want %q", c.body, r.Error.Message, c.msg)
		}
	}
	h2 := start(t, func(o *Options) { o.Embeddings, o.Pooling, o.Ctx = true, model.PoolLast, 16 })
	var r apiError
	h2.postJSON("/v1/embeddings", `{"input":`+long+`}`, 400, &r)
	if r.Error.Type != "exceed_context_size_error" || !strings.Contains(r.Error.Message, "exceeds the available context size (16 tokens)") {
		t.Errorf("last pooling over the context: %+v", r.Error)
	}
}

// TestMetricsEmbeddingPromptIsCounted: as llama.cpp's
// test_metrics_embedding_prompt_is_counted — an embedding's prompt counts
// in prompt_tokens_total and its passes in n_decode_total, and nothing is
// predicted.
func TestMetricsEmbeddingPromptIsCounted(t *testing.T) {
	h := start(t, func(o *Options) { o.Embeddings, o.Pooling = true, model.PoolMean })
	n := len(h.tokensOf("hello world")) + len(h.tokensOf("goodbye world"))
	h.postJSON("/v1/embeddings", `{"input":["hello world","goodbye world"]}`, 200, nil)
	met := h.metrics(t)
	if v := metricValue(t, met, "llamacpp:prompt_tokens_total"); v != float64(n) {
		t.Errorf("prompt_tokens_total %v, want %d", v, n)
	}
	if v := metricValue(t, met, "llamacpp:n_decode_total"); v != 2 {
		t.Errorf("n_decode_total %v, want 2 (one pass per prompt)", v)
	}
	if v := metricValue(t, met, "llamacpp:tokens_predicted_total"); v != 0 {
		t.Errorf("tokens_predicted_total %v, want 0", v)
	}
}
