package serve

import "time"

// return_progress, as llama-server's: a streamed request that sets it
// (/completion, /v1/completions, /v1/chat/completions) gets
// prompt_progress events ({total, cache, processed, time_ms}, with the
// timings so far) before its text — one as the prompt pass starts
// (processed = cache: the reused tokens; with --parallel, once the request
// has its slot), then one after each --batch-size (-b) batch of the
// uncached prompt (processed = cache + the tokens fed), the last at
// processed = total. With --parallel a slot feeds its prompt in -ub chunks
// beside the decoding slots; an event follows each chunk that crosses a -b
// boundary.

// promptProgress is llama-server's prompt_progress object.
type promptProgress struct {
	Total     int     `json:"total"`
	Cache     int     `json:"cache"`
	Processed int     `json:"processed"`
	TimeMs    float64 `json:"time_ms"`
}

// progressEmitter is an emitter that can send prompt_progress events.
type progressEmitter interface {
	progress(p promptProgress, t timings) error
}

// progressReport sends job j's prompt progress through em when the
// request asked for it (return_progress, streamed) and em can, timed from
// since.
type progressReport struct {
	j     *job
	em    emitter
	o     *outcome
	since time.Time
	last  int  // the processed count last sent
	sent  bool // an event was sent
}

// report sends processed (the prompt tokens in the slot: the reused ones
// and those fed so far) unless it was the last one sent: the pass's start
// (processed = cache), each -b batch, its end (processed = total).
func (r *progressReport) report(processed int) error {
	pe, ok := r.em.(progressEmitter)
	if !ok || !r.j.progress || !r.j.stream || (r.sent && processed == r.last) {
		return nil
	}
	r.sent, r.last = true, processed
	o := r.o
	p := promptProgress{Total: o.promptTokens, Cache: o.cachedTokens, Processed: processed}
	t := timings{CacheN: o.cachedTokens}
	if processed > o.cachedTokens {
		p.TimeMs = ms(time.Since(r.since))
		t.PromptN, t.PromptMs = processed-p.Cache, p.TimeMs
		if p.TimeMs > 0 {
			t.PromptPerTokenMs, t.PromptPerSecond = p.TimeMs/float64(t.PromptN), float64(t.PromptN)*1e3/p.TimeMs
		}
	}
	return pe.progress(p, t)
}

// nativeProgress is /completion's prompt_progress event.
type nativeProgress struct {
	Index           int            `json:"index"`
	Content         string         `json:"content"`
	Tokens          []int32        `json:"tokens"`
	Stop            bool           `json:"stop"`
	IDSlot          int            `json:"id_slot"`
	TokensPredicted int            `json:"tokens_predicted"`
	TokensEvaluated int            `json:"tokens_evaluated"`
	Timings         timings        `json:"timings"`
	PromptProgress  promptProgress `json:"prompt_progress"`
}

func (n *native) progress(p promptProgress, t timings) error {
	if n.stream == nil {
		return nil
	}
	return n.stream.event(nativeProgress{Index: n.index, Tokens: []int32{}, IDSlot: n.o.slot, TokensEvaluated: p.Total,
		Timings: t, PromptProgress: p})
}

// progress is an OpenAI stream's prompt_progress chunk, as llama-server's:
// a chat's carries the first delta (role, content null), a completion's
// empty text; both carry the timings so far.
func (e *sse) progress(p promptProgress, t timings) error {
	c := choice{}
	if e.sh.chat {
		c.Delta = roleDelta{Role: "assistant"}
	} else {
		empty := ""
		c.Text = &empty
	}
	r := e.sh.response(true, c)
	r.Timings, r.PromptProgress = &t, &p
	return e.event(r)
}

// progress passes a prompt_progress event through the reasoning split.
func (e *thinkEmitter) progress(p promptProgress, t timings) error {
	if pe, ok := e.inner.(progressEmitter); ok {
		return pe.progress(p, t)
	}
	return nil
}
