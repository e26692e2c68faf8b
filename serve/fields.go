package serve

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Request fields pipe serve cannot honour. OpenAI's and llama-server's
// generation requests have many more fields than pipe implements; one that
// would change what is generated, or how, is refused with a 400 that names
// it instead of being ignored with a 200. A field set to its neutral value
// (null, false, "", 0, [], {}, or the value below that means "off") is
// accepted. Fields that change nothing pipe does (user, metadata, store,
// stream_options, cache_prompt, id_slot, timings_per_token, …)
// and fields neither API has are accepted as llama-server accepts them.

// unsupportedField is one refused field and the values that are neutral.
type unsupportedField struct {
	name    string
	why     string
	neutral func(json.RawMessage) bool // the values that change nothing besides null (nil: the empty ones)
}

const (
	toolsWhy    = "the legacy functions API is not supported: use tools and tool_choice"
	samplerWhy  = "pipe's sampler has temperature, top-k, top-p, min-p, the repeat, frequency and presence penalties, logit_bias and min_keep"
	templateWhy = "pipe serve renders chats with the model's template as it is, with the generation prompt"
	reasonWhy   = "pipe serve returns a thinking model's reasoning as part of the content"
	mediaWhy    = "pipe serve runs text models only"
)

var unsupportedFields = []unsupportedField{
	{"functions", toolsWhy, nil},
	{"function_call", toolsWhy, stringIn("none", "auto")},
	{"mirostat", samplerWhy, nil},
	{"typical_p", samplerWhy, numberAtLeast(1)},
	{"top_n_sigma", samplerWhy, numberAtMost(0)},
	{"xtc_probability", samplerWhy, nil},
	{"dynatemp_range", samplerWhy, nil},
	{"dry_multiplier", samplerWhy, nil},
	{"adaptive_target", samplerWhy, numberAtMost(0)},
	{"samplers", "pipe's sampler chain is penalties, top-k, top-p, min-p, temperature, in that order", pipeOrder},
	{"n_indent", "pipe serve has no indentation limit", nil},
	{"t_max_predict_ms", "pipe serve has no time limit on a generation", nil},
	{"t_max_prompt_ms", "pipe serve has no time limit on a prompt", nil},
	{"n_cmpl", "pipe serve generates one completion per request", numberIs(1)},
	{"best_of", "pipe serve generates one completion per request", numberIs(1)},
	{"echo", "pipe serve does not repeat the prompt in the answer", nil},
	{"suffix", "pipe serve has no fill-in-the-middle", nil},
	{"input_prefix", "pipe serve has no fill-in-the-middle", nil},
	{"input_suffix", "pipe serve has no fill-in-the-middle", nil},
	{"input_extra", "pipe serve has no fill-in-the-middle", nil},
	{"lora", "pipe loads no adapters", nil},
	{"chat_template", templateWhy, nil},
	{"reasoning_format", "want none, deepseek, deepseek-legacy or auto", stringIn(ReasoningNone, ReasoningDeepSeek, ReasoningAuto, ReasoningLegacy)},
	{"reasoning_effort", reasonWhy, nil},
	{"reasoning_budget", reasonWhy, numberIs(-1)},
	{"image_data", mediaWhy, nil},
	{"multimodal_data", mediaWhy, nil},
	{"audio", mediaWhy, nil},
	{"modalities", mediaWhy, onlyText},
	{"prediction", "pipe serve has no predicted outputs", nil},
	{"web_search_options", "pipe serve has no web search", nil},
}

// checkFields refuses a request body that sets a field pipe cannot honour
// (the error names it). The body is valid JSON by then, or the field check
// is left to the request's own decoding.
func checkFields(body []byte) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	for _, f := range unsupportedFields {
		v, ok := m[f.name]
		switch {
		case !ok || string(bytes.TrimSpace(v)) == "null":
			continue
		case f.neutral == nil && empty(v), f.neutral != nil && f.neutral(v):
			continue
		}
		return fieldErr(f.name, "%s: not supported: %s", f.name, f.why)
	}
	return nil
}

// empty reports a null, false, "", 0, [] or {}.
func empty(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	switch string(v) {
	case "null", "false", `""`, "[]", "{}":
		return true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return err == nil && f == 0
}

func numberIs(want float64) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var f float64
		return json.Unmarshal(v, &f) == nil && f == want
	}
}

func numberAtLeast(limit float64) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var f float64
		return json.Unmarshal(v, &f) == nil && f >= limit
	}
}

func numberAtMost(limit float64) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var f float64
		return json.Unmarshal(v, &f) == nil && f <= limit
	}
}

func stringIn(ok ...string) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return false
		}
		for _, o := range ok {
			if s == o {
				return true
			}
		}
		return false
	}
}

// onlyText: modalities ["text"] (or none).
func onlyText(v json.RawMessage) bool {
	var ms []string
	return json.Unmarshal(v, &ms) == nil && (len(ms) == 0 || len(ms) == 1 && ms[0] == "text")
}

// llamaSamplers maps llama.cpp's sampler names and chars (common/sampling.cpp)
// to the position of pipe's sampler of that kind in its chain, or -1 for a
// sampler pipe has not (whose parameters are checked as fields of their own).
var llamaSamplers = map[string]int{
	"penalties": 0, "e": 0,
	"top_k": 1, "top-k": 1, "topk": 1, "k": 1,
	"top_p": 2, "top-p": 2, "topp": 2, "nucleus": 2, "p": 2,
	"min_p": 3, "min-p": 3, "minp": 3, "m": 3,
	"temperature": 4, "temp": 4, "t": 4,
	"dry": -1, "d": -1, "typ_p": -1, "typ-p": -1, "typp": -1, "typical_p": -1, "typical-p": -1, "typicalp": -1, "typ": -1, "y": -1,
	"top_n_sigma": -1, "top-n-sigma": -1, "topnsigma": -1, "s": -1, "xtc": -1, "x": -1,
	"adaptive_p": -1, "adaptive-p": -1, "adaptivep": -1, "a": -1,
}

// pipeOrder: a "samplers" list (names, or a string of chars) that names each
// of pipe's samplers once, in pipe's order (llama.cpp's default order is
// such a list); samplers pipe has not may stand anywhere. Anything else
// (infill, an omitted or reordered sampler) would sample differently.
func pipeOrder(v json.RawMessage) bool {
	var names []string
	var chars string
	if json.Unmarshal(v, &chars) == nil {
		for _, c := range chars {
			names = append(names, string(c))
		}
	} else if json.Unmarshal(v, &names) != nil {
		return false
	}
	next := 0
	for _, n := range names {
		pos, ok := llamaSamplers[strings.ToLower(n)]
		switch {
		case !ok:
			return false
		case pos < 0:
		case pos != next:
			return false
		default:
			next++
		}
	}
	return next == 5
}
