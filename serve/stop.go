package serve

import "strings"

// stopper applies a request's stop sequences to streamed text: it holds back
// the tail that could still begin a stop sequence, so no part of a stop
// sequence is ever sent, and reports when one is complete.
type stopper struct {
	stops   []string
	pending string
	word    string // the stop sequence that ended the text
}

// add takes the next piece of generated text and returns the text that is
// safe to send and whether a stop sequence completed (then out is everything
// before it and generation must end).
func (s *stopper) add(text string) (out string, stopped bool) {
	s.pending += text
	if len(s.stops) == 0 {
		out, s.pending = s.pending, ""
		return out, false
	}
	first := -1
	for _, st := range s.stops {
		if i := strings.Index(s.pending, st); i >= 0 && (first < 0 || i < first) {
			first, s.word = i, st
		}
	}
	if first >= 0 {
		out, s.pending = s.pending[:first], ""
		return out, true
	}
	keep := 0
	for _, st := range s.stops {
		keep = max(keep, overlap(s.pending, st))
	}
	cut := len(s.pending) - keep
	out, s.pending = s.pending[:cut], s.pending[cut:]
	return out, false
}

// flush returns the held-back text at the end of a generation.
func (s *stopper) flush() string {
	out := s.pending
	s.pending = ""
	return out
}

// overlap is the length of the longest suffix of text that is a proper
// prefix of stop.
func overlap(text, stop string) int {
	for n := min(len(text), len(stop)-1); n > 0; n-- {
		if strings.HasSuffix(text, stop[:n]) {
			return n
		}
	}
	return 0
}
