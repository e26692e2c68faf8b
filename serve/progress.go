package serve

import "time"

// return_progress, as llama-server's: a streamed request that sets it
// (/completion, /v1/completions, /v1/chat/completions) gets
// prompt_progress events ({total, cache, processed, time_ms}, with the
// timings so far) before its text — one as the prompt pass starts
// (processed = cache: the reused tokens) and one when it is over
// (processed = total). llama-server reports after each --batch-size batch
// of the prompt; pipe feeds the uncached prompt as one pass (its layers
// stream through it once), so there are two.

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

// reportProgress sends job j's prompt progress through em when the request
// asked for it (return_progress, streamed) and em can: the pass's start, or
// (done) its end, timed from since.
func reportProgress(j *job, em emitter, o *outcome, done bool, since time.Time) error {
	pe, ok := em.(progressEmitter)
	if !ok || !j.progress || !j.stream {
		return nil
	}
	p := promptProgress{Total: o.promptTokens, Cache: o.cachedTokens, Processed: o.cachedTokens}
	t := timings{CacheN: o.cachedTokens}
	if done {
		p.Processed, p.TimeMs = p.Total, ms(time.Since(since))
		t.PromptN, t.PromptMs = p.Total-p.Cache, p.TimeMs
		if t.PromptN > 0 && p.TimeMs > 0 {
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
