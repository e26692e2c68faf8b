package serve

// embeddings.go: llama-server's embeddings (3f545becc,
// handle_embeddings_impl, send_embedding, format_embeddings_response_oaicompat):
// POST /v1/embeddings in OpenAI's shape and /embedding, /embeddings in
// llama-server's own, with Options.Embeddings (--embedding). The input is
// one prompt or several in every shape of /completion's (nativeprompt.go),
// tokenized with the special tokens; each is fed on a state of its own
// (decode.Model.Embed: the output norm's rows), pooled by Options.Pooling
// and, when pooled, normalised by embd_normalize (default
// Options.EmbdNormalize). The prompts are counted on /metrics as prompt
// tokens and forward passes, as llama-server counts an embedding task.

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/stages"
)

// embeddingsAPI is the embeddings routes.
type embeddingsAPI struct{ parts }

// embeddingsRequest is the body of every embeddings route.
type embeddingsRequest struct {
	Input          *nativePrompt `json:"input"`
	Content        *nativePrompt `json:"content"`
	EncodingFormat *string       `json:"encoding_format"`
	EmbdNormalize  *int          `json:"embd_normalize"`
	Model          *string       `json:"model"`
}

// defaultEmbdNormalize is llama.cpp's embd_normalize default: Euclidean.
var defaultEmbdNormalize = 2

// errEmbeddingsOff is llama-server's answer without --embedding (501).
const errEmbeddingsOff = "This server does not support embeddings. Start it with `--embeddings`"

func (s *embeddingsAPI) oai(x *exchange)    { s.handle(x, true) }
func (s *embeddingsAPI) native(x *exchange) { s.handle(x, false) }

// handle answers an embeddings request, in OpenAI's shape when oai is set
// and the body has "input" (a "content" body is answered natively, as
// llama-server does).
func (s *embeddingsAPI) handle(x *exchange, oai bool) {
	if !s.o.Embeddings {
		s.rq.notSupported(errEmbeddingsOff)(x)
		return
	}
	if oai && s.o.Pooling == model.PoolNone {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error",
			errors.New("Pooling type 'none' is not OAI compatible. Please use a different pooling type"))
		return
	}
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	var r embeddingsRequest
	if err := json.Unmarshal(body, &r); err != nil {
		if errors.Is(err, errNativePrompt) || errors.Is(err, errMultimodal) { // named as the field it is here
			err = badRequest("input: %s", strings.TrimPrefix(err.Error(), "prompt: "))
		} else {
			err = jsonError(err)
		}
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
		return
	}
	prompt := r.Input
	if prompt == nil {
		prompt, oai = r.Content, false
	}
	if prompt == nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", badRequest(`"input" or "content" must be provided`))
		return
	}
	b64 := false
	if f := r.EncodingFormat; f != nil && *f != "float" {
		if *f != "base64" {
			s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", badRequest("The format to return the embeddings in. Can be either float or base64"))
			return
		}
		b64 = true
	}
	prompts, err := s.tokenize(prompt)
	if err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
		return
	}
	norm := cmp.Or(r.EmbdNormalize, s.o.EmbdNormalize, &defaultEmbdNormalize)
	answers := make([]embeddingAnswer, len(prompts))
	for i, ids := range prompts {
		if answers[i], err = s.embed(x.r.Context(), ids, *norm); err != nil {
			s.rq.failGen(x, nil, err)
			return
		}
		answers[i].Index = i
	}
	var v any = answers
	if oai {
		v = s.oaiList(answers, r.Model, b64)
	}
	x.err = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, v)
}

// tokenize is each prompt's tokens (texts with the special tokens, as
// llama-server's tokenize_input_prompts(…, true, true)); an empty one, or
// a token id outside the vocabulary, is a bad request.
func (s *embeddingsAPI) tokenize(p *nativePrompt) ([][]int32, error) {
	tok := s.o.Model.Tokenizer()
	n := int32(tok.NVocab())
	out := make([][]int32, len(p.subs))
	for i, sp := range p.subs {
		var ids []int32
		switch {
		case sp.parts != nil:
			for _, part := range sp.parts {
				if part.isID {
					ids = append(ids, part.id)
				} else {
					ids = tok.AppendEncode(ids, part.text, part.first, true)
				}
			}
		case sp.ids != nil:
			ids = sp.ids
		default:
			ids = tok.Encode(sp.text, true, true)
		}
		if len(ids) == 0 {
			return nil, badRequest("Input content cannot be empty")
		}
		for _, id := range ids {
			if id < 0 || id >= n {
				return nil, badRequest("input[%d]: token %d is not in the vocabulary (0..%d)", i, id, n-1)
			}
		}
		out[i] = ids
	}
	return out, nil
}

// embeddingAnswer is one prompt's answer in llama-server's own shape
// (server_task_result_embd::to_json_non_oaicompat): every token's row with
// pooling none, else the one pooled row.
type embeddingAnswer struct {
	Index     int         `json:"index"`
	Embedding [][]float32 `json:"embedding"`
	tokens    int
}

// errTooLarge is llama-server's server error for a prompt that its pooling
// needs in one pass (every pooling but last) and that is longer than a
// pass (-ub).
type errTooLarge struct{ n, ubatch int }

func (e *errTooLarge) Error() string {
	return fmt.Sprintf("input (%d tokens) is too large to process. increase the physical batch size (current batch size: %d)", e.n, e.ubatch)
}

// embed computes one prompt's embedding in the decode slot (or, with
// --parallel, between two passes of the batch) and counts it on /metrics.
// As llama-server's slot: a pooling other than last needs the prompt in one
// pass (-ub) and within a slot's context; last's may take several passes
// but must leave a position free.
func (s *embeddingsAPI) embed(ctx context.Context, ids []int32, norm int) (embeddingAnswer, error) {
	ub, nCtx, n := cmp.Or(s.o.Ubatch, stages.PrefillChunk), s.gen.nCtx, len(ids)
	switch {
	case s.o.Pooling != model.PoolLast && n > ub:
		return embeddingAnswer{}, &errTooLarge{n: n, ubatch: ub}
	case s.o.Pooling != model.PoolLast && n > nCtx:
		return embeddingAnswer{}, &contextError{prompt: n, nCtx: nCtx,
			text: fmt.Sprintf("input (%d tokens) is larger than the max context size (%d tokens). skipping", n, nCtx)}
	case s.o.Pooling == model.PoolLast && n >= nCtx:
		return embeddingAnswer{}, &contextError{prompt: n, nCtx: nCtx}
	}
	var e decode.Embedding
	run := func() (err error) {
		e, err = s.o.Model.Embed(ctx, ids, s.o.Pooling, ub)
		return err
	}
	var err error
	if s.gen.batch != nil {
		err = s.gen.batch.b.Exclusive(ctx, run)
	} else {
		err = s.gen.slot.exclusive(ctx, run)
	}
	if err != nil {
		return embeddingAnswer{}, err
	}
	s.gen.met.embedding(n, e.Passes, e.Prefill)
	if s.o.Pooling != model.PoolNone {
		model.Normalize(e.Rows[0], e.Rows[0], norm)
	}
	return embeddingAnswer{Embedding: e.Rows, tokens: n}, nil
}

// exclusive runs f holding the decode slot (as a generation does).
func (s *decodeSlot) exclusive(ctx context.Context, f func() error) error {
	release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return f()
}

// oaiEmbedding is one entry of OpenAI's list: the pooled row, or its
// float32 bytes (little-endian) in base64.
type oaiEmbedding struct {
	Embedding      any    `json:"embedding"`
	Index          int    `json:"index"`
	Object         string `json:"object"`
	EncodingFormat string `json:"encoding_format,omitempty"`
}

type oaiEmbeddingList struct {
	Model  string         `json:"model"`
	Object string         `json:"object"`
	Usage  embeddingUsage `json:"usage"`
	Data   []oaiEmbedding `json:"data"`
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// oaiList is format_embeddings_response_oaicompat: the request's model
// name (else the served one), the entries, and the prompt tokens summed.
func (s *embeddingsAPI) oaiList(answers []embeddingAnswer, name *string, b64 bool) oaiEmbeddingList {
	l := oaiEmbeddingList{Model: s.o.ModelID, Object: "list", Data: make([]oaiEmbedding, len(answers))}
	if name != nil {
		l.Model = *name
	}
	for i, a := range answers {
		d := oaiEmbedding{Embedding: a.Embedding[0], Index: i, Object: "embedding"}
		if b64 {
			buf := make([]byte, 4*len(a.Embedding[0]))
			for k, v := range a.Embedding[0] {
				binary.LittleEndian.PutUint32(buf[4*k:], math.Float32bits(v))
			}
			d.Embedding, d.EncodingFormat = base64.StdEncoding.EncodeToString(buf), "base64"
		}
		l.Data[i] = d
		l.Usage.PromptTokens += a.tokens
	}
	l.Usage.TotalTokens = l.Usage.PromptTokens
	return l
}

// embedding counts an embedding's prompt on /metrics: its tokens, passes
// and time, as a prompt pass that generates nothing.
func (m *meters) embedding(tokens, passes int, prefill time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promptTokens += int64(tokens)
	m.seqMax = max(m.seqMax, tokens)
	m.prefillSeconds += prefill.Seconds()
	m.nDecode += int64(passes)
	m.nBusy += int64(passes)
}
