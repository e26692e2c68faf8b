package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
)

// exchange is one request as its handler and the request log see it.
type exchange struct {
	id    string
	start time.Time
	w     *recorder
	r     *http.Request
	gen   *outcome // nil unless a generation ran
	err   error    // why the request failed, if it did
}

type handler func(x *exchange)

// recorder remembers the status a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and SetWriteDeadline.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// route wraps h with the Host and Origin checks (guard.go), the method
// check, authentication, the JSON body check, panic recovery and the
// request log event.
func (s *Server) route(method string, auth bool, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := &exchange{id: s.newID(), start: time.Now(), w: &recorder{ResponseWriter: w}, r: r}
		defer s.finish(x)
		// every write has a deadline: this one for the quick answers,
		// writeJSON's and the event stream's own for a generation's
		_ = writeBy(x.w, s.o.WriteTimeout)
		switch {
		case !s.admit(x):
		case auth && !s.guard.authorized(r):
			x.w.Header().Set("WWW-Authenticate", "Bearer")
			s.fail(x, http.StatusUnauthorized, "authentication_error", errors.New("invalid or missing API key (Authorization: Bearer KEY)"))
		case method != "" && r.Method != method:
			x.w.Header().Set("Allow", method)
			s.fail(x, http.StatusMethodNotAllowed, "invalid_request_error", fmt.Errorf("%s %s: use %s", r.Method, r.URL.Path, method))
		case !s.jsonBody(x):
		default:
			h(x)
		}
	})
}

func (s *Server) newID() string {
	return fmt.Sprintf("%s-%d", s.idBase, s.nextID.Add(1))
}

// finish recovers a panic, gives net/http's last flush of the response
// (after the handler returns) its own write deadline, counts the status
// and logs the `request` event. The next request on the connection sets
// its own deadline before it writes (route).
func (s *Server) finish(x *exchange) {
	if p := recover(); p != nil {
		x.err = fmt.Errorf("panic: %v", p)
		if x.w.status == 0 {
			s.fail(x, http.StatusInternalServerError, "server_error", errors.New("internal error"))
		}
	}
	_ = writeBy(x.w, s.o.WriteTimeout)
	status := x.w.status
	if status == 0 {
		status = http.StatusOK
	}
	s.met.request(status)
	ev := s.o.Log.Info()
	if status >= 500 {
		ev = s.o.Log.Error()
	}
	ev = ev.Str("event", "request").Str("id", x.id).Str("method", x.r.Method).Str("path", x.r.URL.Path).
		Int("status", status).Float64("duration_ms", ms(time.Since(x.start)))
	if x.gen != nil {
		logOutcome(ev, x.gen)
	}
	if x.err != nil {
		ev = ev.Str("error", x.err.Error())
	}
	ev.Msg("request")
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// logOutcome adds a generation's fields; fields that do not apply are null.
func logOutcome(ev *zerolog.Event, o *outcome) {
	ev.Int("prompt_tokens", o.promptTokens).Int("cached_tokens", o.cachedTokens).
		Int("completion_tokens", o.genTokens).Float64("queue_ms", ms(o.queue)).
		Float64("prefill_ms", ms(o.prefill))
	if o.ttft > 0 {
		ev.Float64("ttft_ms", ms(o.ttft))
	} else {
		ev.Interface("ttft_ms", nil)
	}
	if v, ok := o.tokS(); ok {
		ev.Float64("tok_s", v)
	} else {
		ev.Interface("tok_s", nil)
	}
	if v, ok := o.eng.HitPct(); ok {
		ev.Float64("cache_hit_pct", v)
	} else {
		ev.Interface("cache_hit_pct", nil)
	}
	if o.eng.Streaming {
		ev.Float64("read_MiB", float64(o.eng.ReadBytes)/(1<<20))
	} else {
		ev.Interface("read_MiB", nil)
	}
	ev.Float64("stall_ms", ms(o.eng.Stall))
	if o.finish != "" {
		ev.Str("finish_reason", o.finish)
	} else {
		ev.Interface("finish_reason", nil)
	}
}

// fail answers with an OpenAI-style error body; param names the request
// field at fault when the error does (fieldError).
func (s *Server) fail(x *exchange, status int, typ string, err error) {
	x.err = err
	_ = writeJSON(x.w, s.o.WriteTimeout, status, apiError{Error: errorBody(status, typ, err)})
}

// failGen answers a failed generation: an error status when nothing was sent
// yet, else an error event on the stream.
func (s *Server) failGen(x *exchange, st *sse, err error) {
	status, typ := http.StatusInternalServerError, "server_error"
	switch {
	case errors.Is(err, ErrRequest) || errors.Is(err, model.ErrContextFull):
		status, typ = http.StatusBadRequest, "invalid_request_error"
	case errors.Is(err, context.Canceled) && x.r.Context().Err() != nil:
		// The client went away or the server is shutting down.
		status, typ = 499, "canceled"
	}
	if st == nil || !st.started {
		s.fail(x, status, typ, err)
		return
	}
	x.err = err
	_ = st.fail(apiError{Error: errorBody(status, typ, err)})
}

// readBody reads a size-limited request body.
func (s *Server) readBody(x *exchange) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(x.w, x.r.Body, s.o.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			s.fail(x, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Errorf("request body over %d bytes", mb.Limit))
		} else {
			s.fail(x, http.StatusBadRequest, "invalid_request_error", fmt.Errorf("reading the body: %w", err))
		}
		return nil, false
	}
	return b, true
}

func (s *Server) chat(x *exchange)       { s.complete(x, true) }
func (s *Server) completion(x *exchange) { s.complete(x, false) }

func (s *Server) complete(x *exchange, chat bool) {
	body, ok := s.readBody(x)
	if !ok {
		return
	}
	parse, prefix := parseCompletion, "cmpl-"
	if chat {
		parse, prefix = parseChat, "chatcmpl-"
	}
	j, err := parse(body, s.o.Sampling)
	if !s.admitJob(x, &j, err) {
		return
	}
	sh := shape{chat: chat, id: prefix + x.id, model: s.o.ModelID, created: time.Now().Unix(), fp: s.o.Fingerprint, pf: s.probFormat(&j)}
	if j.verbose {
		sh.verbose = func(o *outcome, content string) *nativeFinal {
			f := s.final(&j, o, content, nil)
			return &f
		}
	}
	var em emitter = &collector{sh: sh, w: x.w, timeout: s.o.WriteTimeout}
	var st *sse
	if j.stream {
		st = &sse{sh: sh, w: x.w, rc: http.NewResponseController(x.w), timeout: s.o.WriteTimeout}
		em = st
	}
	x.gen = &outcome{}
	if err := s.generate(x.r.Context(), &j, em, x.start, x.gen); err != nil {
		s.failGen(x, st, err)
	}
}

// admitJob finishes a parsed request (err: the parse's) before it queues:
// it sizes and tokenizes it, checks its model and names its tenant; a
// request that fails is answered here and admitJob returns false.
func (s *Server) admitJob(x *exchange, j *job, err error) bool {
	if err == nil {
		err = s.prepare(x.r.Context(), j)
	}
	if err != nil {
		s.failGen(x, nil, err)
		return false
	}
	j.who = tenantOf(x.r, j.cacheKey)
	return true
}

func (s *Server) models(x *exchange) {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{"list", []entry{{ID: s.o.ModelID, Object: "model", Created: s.created, OwnedBy: "pipe"}}})
}

func (s *Server) health(x *exchange) {
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) metrics(x *exchange) {
	// rendered first: the meters' lock is not held while a client reads
	var b bytes.Buffer
	if x.err = s.met.write(&b); x.err != nil {
		s.fail(x, http.StatusInternalServerError, "server_error", x.err)
		return
	}
	x.w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, x.err = x.w.Write(b.Bytes())
}

// notSupported answers an endpoint the server was started without, as
// llama-server does (501, not_supported_error).
func (s *Server) notSupported(msg string) handler {
	return func(x *exchange) {
		s.fail(x, http.StatusNotImplemented, "not_supported_error", errors.New(msg))
	}
}

func (s *Server) notFound(x *exchange) {
	s.fail(x, http.StatusNotFound, "invalid_request_error", fmt.Errorf("no route %s %s", x.r.Method, x.r.URL.Path))
}
