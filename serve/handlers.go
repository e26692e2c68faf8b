package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
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

// requests is the plumbing every route shares: the Host, Origin and body
// checks (guard.go), the method and API key checks, reading a body, the
// error answers and the request log with its status count.
type requests struct {
	o      *Options
	met    *meters
	guard  guard // who may talk to the server (guard.go)
	idBase string
	nextID atomic.Uint64
}

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
func (s *requests) route(method string, auth bool, h handler) http.Handler {
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

func (s *requests) newID() string {
	return fmt.Sprintf("%s-%d", s.idBase, s.nextID.Add(1))
}

// finish recovers a panic, gives net/http's last flush of the response
// (after the handler returns) its own write deadline, counts the status
// and logs the `request` event. The next request on the connection sets
// its own deadline before it writes (route).
func (s *requests) finish(x *exchange) {
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
func (s *requests) fail(x *exchange, status int, typ string, err error) {
	x.err = err
	_ = writeJSON(x.w, s.o.WriteTimeout, status, apiError{Error: errorBody(status, typ, err)})
}

// failGen answers a failed generation: an error status when nothing was sent
// yet, else an error event on the stream.
func (s *requests) failGen(x *exchange, st *sse, err error) {
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
func (s *requests) readBody(x *exchange) ([]byte, bool) {
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

// notSupported answers an endpoint the server was started without, as
// llama-server does (501, not_supported_error).
func (s *requests) notSupported(msg string) handler {
	return func(x *exchange) {
		s.fail(x, http.StatusNotImplemented, "not_supported_error", errors.New(msg))
	}
}

func (s *requests) notFound(x *exchange) {
	s.fail(x, http.StatusNotFound, "invalid_request_error", fmt.Errorf("no route %s %s", x.r.Method, x.r.URL.Path))
}
