package serve

// llamametrics.go: llama-server's Prometheus names on /metrics, beside
// pipe's own, computed from the same meters (llama-server's
// server_task_result_metrics::to_metrics): its counters, then its gauges.
// n_decode_total counts the forward passes (a prompt pass is one, as a
// llama_decode call is) and n_busy_slots_per_decode their mean number of
// slots (1 with one slot; a batched pass's slots with --parallel); the
// speculative-decoding counters are 0: pipe drafts no tokens.

// writeLlama writes the llamacpp: series; m.mu is held.
func (m *meters) writeLlama(p *promWriter) {
	type item struct {
		name, help string
		v          float64
	}
	rate := func(n int64, secs float64) float64 {
		if secs <= 0 {
			return 0
		}
		return float64(n) / secs
	}
	fed := m.promptTokens - m.cachedTokens
	for _, kind := range []struct {
		typ   string
		items []item
	}{
		{"counter", []item{
			{"prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", float64(fed)},
			{"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", float64(m.cachedTokens)},
			{"prompt_seconds_total", "Total time spent processing prompts", m.prefillSeconds},
			{"tokens_predicted_total", "Number of generation tokens processed", float64(m.genTokens)},
			{"tokens_predicted_seconds_total", "Total time spent generating tokens", m.decodeSeconds},
			{"n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", float64(m.nDecode)},
			{"n_tokens_max", "Largest observed sequence length (prompt + generation)", float64(m.seqMax)},
			{"spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", 0},
			{"spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", 0},
			{"spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", 0},
		}},
		{"gauge", []item{
			{"prompt_tokens_seconds", "Average prompt throughput in tokens/s", rate(fed, m.prefillSeconds)},
			{"predicted_tokens_seconds", "Average generation throughput in tokens/s", rate(m.genTokens, m.decodeSeconds)},
			{"requests_processing", "Number of requests processing", float64(m.busy)},
			{"requests_deferred", "Number of requests deferred", float64(m.queued)},
			{"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", float64(m.nBusy) / float64(max(m.nDecode, 1))},
		}},
	} {
		for _, it := range kind.items {
			p.metric("llamacpp:"+it.name, kind.typ, it.help, it.v)
		}
	}
}
