package metrics

// Stream builds a run's summary token by token, for a run with no end in
// sight (a server): it keeps the running sums and the wall and compute times
// of at most the first Window tokens (the head) and the last Window tokens
// (the tail), so its memory is bounded by the window, not by the run.
//
// While the run has at most window tokens its Summary is exactly
// Summarize's. Beyond that the window fields are computed on what it keeps:
// the "last third" is the last min(⌈n/3⌉, window) tokens (LastThirdTokens
// says how many), the warm-up rule takes its threshold from them and looks
// for the end of the warm-up in the head (failing that, the warm-up is
// everything before those last tokens), and a forced warm-up longer than the
// head counts the steady window from the tail. The sums (mean tok/s, MiB
// read, shares, hit rates, faults) stay exact.
//
// A window of 0 keeps every token's times (16 bytes a token): Summary is
// then always Summarize's. Not safe for concurrent use.
type Stream struct {
	window       int
	t            totals
	headW, headC []float64 // first tokens' wall and compute ms
	tailW, tailC []float64 // ring of the last tokens' (window > 0)
	next         int       // ring position of the oldest tail token
}

// NewStream returns a Stream keeping at most window tokens' times at each
// end of the run (0: every token's).
func NewStream(window int) *Stream {
	return &Stream{window: max(window, 0)}
}

// Add counts one token (tokens come in step order).
func (s *Stream) Add(r Token) {
	s.t.add(r)
	if s.window == 0 || len(s.headW) < s.window {
		s.headW = append(s.headW, r.WallMS)
		s.headC = append(s.headC, r.ComputeMS)
	}
	if s.window == 0 {
		return
	}
	if len(s.tailW) < s.window {
		s.tailW = append(s.tailW, r.WallMS)
		s.tailC = append(s.tailC, r.ComputeMS)
		return
	}
	s.tailW[s.next], s.tailC[s.next] = r.WallMS, r.ComputeMS
	s.next = (s.next + 1) % s.window
}

// Tokens is the number of tokens added.
func (s *Stream) Tokens() int { return s.t.n }

// Retained is the number of per-token times the Stream holds (head and
// tail; at most 2 × window when window > 0).
func (s *Stream) Retained() int { return len(s.headW) + len(s.tailW) }

// Summary is the summary of the tokens added so far.
func (s *Stream) Summary(o Options) Summary {
	if s.window == 0 || s.t.n <= s.window {
		return s.t.summary(s.headW, s.headC, o)
	}
	return s.windowed(o)
}

// ordered returns the tail's times oldest first.
func (s *Stream) ordered() (wall, compute []float64) {
	wall = append(append([]float64(nil), s.tailW[s.next:]...), s.tailW[:s.next]...)
	compute = append(append([]float64(nil), s.tailC[s.next:]...), s.tailC[:s.next]...)
	return wall, compute
}

// windowed is the summary of a run longer than the window.
func (s *Stream) windowed(o Options) Summary {
	sum0 := s.t.base(o)
	n := s.t.n
	tailW, tailC := s.ordered()
	T := len(tailW)
	last := min(thirdOf(n), T)
	lastW := tailW[T-last:]
	first := min(5, len(s.headW)) // a window under 5 tokens holds fewer
	sum0.First5WallMS = sum(s.headW[:first]) / float64(first)
	sum0.LastThirdTokens = last
	sum0.LastThirdTokS = rate(last, sum(lastW))
	sum0.ComputeHeadMS = median(s.headC[:min(5, last)])
	sum0.ComputeTailMS = median(tailC[T-last:])
	w := -1
	if o.Warmup >= 0 {
		w = min(o.Warmup, n-1)
		sum0.WarmupForced = true
	} else {
		thr := Tolerance * median(lastW)
		for i, x := range s.headW {
			if x <= thr && median(s.headW[i:min(i+Window, len(s.headW))]) <= thr {
				w = i
				break
			}
		}
		if w < 0 {
			w = n - last
		}
	}
	sum0.WarmupTokens = w
	switch {
	case w < len(s.headW):
		sum0.SteadyTokS = rate(n-w, s.t.wall-sum(s.headW[:w]))
	case w >= n-T:
		sum0.SteadyTokS = rate(n-w, sum(tailW[T-(n-w):]))
	default: // a forced warm-up between the head and the tail: the tail
		sum0.SteadyTokS = rate(T, sum(tailW))
	}
	return sum0
}
