package serve

import (
	"bytes"
	"net/http"
	"strconv"
)

// infoAPI is the routes that describe the server rather than generate:
// GET /health, /metrics, /props and /slots, and the chat page (page.go).
type infoAPI struct {
	parts
	met  *meters
	nCtx int // the session's context
}

func (s *infoAPI) health(x *exchange) {
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *infoAPI) metrics(x *exchange) {
	// rendered first: the meters' lock is not held while a client reads
	var b bytes.Buffer
	if x.err = s.met.write(&b); x.err != nil {
		s.rq.fail(x, http.StatusInternalServerError, "server_error", x.err)
		return
	}
	h := x.w.Header()
	h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	// llama-server's header: the server's start, in seconds since the epoch
	h.Set("Process-Start-Time-Unix", strconv.FormatInt(s.met.start.Unix(), 10))
	_, x.err = x.w.Write(b.Bytes())
}

// props is GET /props: the server's defaults and model, as llama-server's.
func (s *infoAPI) props(x *exchange) {
	tok := s.o.Model.Tokenizer()
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]any{
		"default_generation_settings": map[string]any{"params": s.gen.settings(nil, s.o.MaxTokens), "n_ctx": s.nCtx},
		"total_slots":                 s.gen.totalSlots(),
		"model_alias":                 s.o.ModelID,
		"model_path":                  s.o.ModelPath,
		"modalities":                  map[string]bool{"vision": false, "video": false, "audio": false},
		"endpoint_slots":              !s.o.NoSlots,
		"endpoint_props":              false,
		"endpoint_metrics":            !s.o.NoMetrics,
		"chat_template":               tok.ChatTemplate(),
		"bos_token":                   tok.TokenText(tok.BOS()),
		"eos_token":                   tok.TokenText(tok.EOS()),
		"build_info":                  s.o.Version,
		"is_sleeping":                 false,
	})
}

// slots is GET /slots: the decode slots, as llama-server's array.
func (s *infoAPI) slots(x *exchange) {
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, s.gen.slotsInfo())
}
