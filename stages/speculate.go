package stages

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/pipe-engine/pipe/internal/buf"
	"github.com/pipe-engine/pipe/internal/clock"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/router"
	"github.com/pipe-engine/pipe/warmstart"
)

// speculator is the streamed source's speculation, every read started
// before a router asks for it: the warm start's hot set while the model
// loads (warmStart), a history policy's guess of the next layer (after:
// temporal, popular), the next-layer policy's guess from the next layer's
// router applied early in a decode step, and a prompt pass's guess of the
// next layer's whole routed set (guess). Guesses run on the decode
// goroutine and reach the planner as requests it may drop; none changes
// what is computed.
type speculator struct {
	policy  prefetch.Policy    // nil: no per-layer speculation (--prefetch 0 or no cache)
	n       int                // --prefetch: experts a decode step guesses per layer
	layers  int                // layers of the model
	timings *model.Timings     // where applying a router early is counted (Router)
	clock   clock.Clock        // what timings are read from (the meter's)
	model   model.Model        // the routers' specs
	peeker  model.RouterPeeker // the next-layer policy's early router (nil: another policy)
	prompt  model.RouterPeeker // the early router of prompt passes (--prefetch-prompt)
	warm    bool               // a warm start was started

	// the decode goroutine's scratch
	logits, x, probs []float32
	votes            []int32 // per expert, the prompt tokens whose guess picks it
	slot             [2]struct {
		ids []int
		w   []float32
	}
}

// begin binds the built model's early routers.
func (s *speculator) begin(m model.Model, prompt bool, arch string) error {
	s.model = m
	if pk, ok := m.(model.RouterPeeker); ok && prompt {
		s.prompt = pk
	}
	if _, ok := s.policy.(prefetch.Guesser); ok {
		if s.peeker, ok = m.(model.RouterPeeker); !ok {
			return fmt.Errorf("%w: --prefetch-policy next-layer: architecture %s cannot apply a router early", ErrConfig, arch)
		}
	}
	return nil
}

// after is the layer a history policy speculates for after layer's demand
// (prefetch.Request.SpecLayer; -1: none, also for the next-layer policy,
// whose guess comes as its own request).
func (s *speculator) after(layer int) int {
	if s.policy == nil || s.peeker != nil || layer+1 >= s.layers {
		return -1
	}
	return layer + 1
}

// guess applies layer+1's router to this layer's router input: a decode
// step guesses --prefetch experts with the next-layer policy; a prompt pass
// guesses the next layer's routed set (guessSet); a batch of decode steps
// (decode, several rows) guesses --prefetch experts per token, as each step
// alone would (none at --prefetch 0), not the routed set: a prompt's tokens
// share their experts, a batch's sequences far less, and guessing each
// one's k experts read more wrong guesses than right ones. ok is false
// when there is nothing to guess.
func (s *speculator) guess(step, layer int, routerIn [][]float32, decode bool) (r prefetch.Request, ok bool) {
	next := layer + 1
	if next >= s.layers {
		return r, false
	}
	if len(routerIn) > 1 && decode {
		if s.n == 0 || s.peeker == nil {
			return r, false
		}
		return s.guessSet(step, next, routerIn, s.peeker, s.n)
	}
	if len(routerIn) > 1 {
		return s.guessSet(step, next, routerIn, s.prompt, 0)
	}
	if s.peeker == nil || len(routerIn) != 1 {
		return r, false
	}
	spec := s.model.Router(next)
	if len(s.logits) < spec.NExpert {
		s.logits = make([]float32, spec.NExpert)
	}
	s.probs = buf.Grow(s.probs, max(len(s.probs), router.ScratchLen(spec)))
	t0 := s.clock.Now()
	err := s.peeker.PeekRouter(next, routerIn[0], 1, s.logits)
	spec.K = min(s.n, spec.NExpert)
	// Two guess buffers, by layer parity: the planner copies a guess
	// (Guesser.SetGuess) before it takes the demand request of that layer,
	// which the decode goroutine waits for before it guesses two layers on.
	g := &s.slot[next%2]
	g.ids, g.w = buf.Grow(g.ids, spec.K), buf.Grow(g.w, spec.K)
	if err == nil {
		err = router.Route(spec, s.logits[:spec.NExpert], g.ids, g.w, s.probs)
	}
	s.timings.Router += s.clock.Since(t0)
	if err != nil {
		return r, false
	}
	return prefetch.Request{Step: step, Layer: next, SpecLayer: next, Guess: g.ids}, true
}

// guessSet guesses, during a prompt pass, which experts layer next will
// route: next's router applied to every token's router input of the layer
// being computed, each token's top k counted as votes, the experts with any
// vote most voted first. The planner reads them while this layer computes
// and the next one runs its attention — the time a prompt pass otherwise
// leaves the disk idle, as next's routing is not known before its attention
// — and withdraws the wrong guesses no lane has started once next is routed
// (Planner.Settle).
//
// pk is the early router (nil: no guess); k, when above 0, is how many of
// its top experts each token votes for (a batch of decode steps; else the
// router's k: a prompt pass, whose guesses every lane may read —
// prefetch.Request.AnyLane).
func (s *speculator) guessSet(step, next int, routerIn [][]float32, pk model.RouterPeeker, k int) (r prefetch.Request, ok bool) {
	if pk == nil {
		return r, false
	}
	spec := s.model.Router(next)
	if k > 0 {
		spec.K = min(k, spec.NExpert)
	}
	n, width := len(routerIn), len(routerIn[0])
	s.x = buf.Grow(s.x, n*width)
	for t, row := range routerIn {
		copy(s.x[t*width:(t+1)*width], row)
	}
	s.logits = buf.Grow(s.logits, n*spec.NExpert)
	s.probs = buf.Grow(s.probs, max(len(s.probs), router.ScratchLen(spec)))
	t0 := s.clock.Now()
	defer func() { s.timings.Router += s.clock.Since(t0) }()
	if pk.PeekRouter(next, s.x, n, s.logits) != nil {
		return r, false // no router to apply early (a layer without experts): nothing to guess
	}
	g := &s.slot[next%2]
	g.ids, g.w = buf.Grow(g.ids, spec.K), buf.Grow(g.w, spec.K)
	s.votes = buf.Grow(s.votes, spec.NExpert)
	clear(s.votes)
	for t := range n {
		if router.Route(spec, s.logits[t*spec.NExpert:(t+1)*spec.NExpert], g.ids, g.w, s.probs) != nil {
			return r, false
		}
		for _, x := range g.ids {
			s.votes[x]++
		}
	}
	set := g.ids[:0]
	for x, v := range s.votes {
		if v > 0 {
			set = append(set, x)
		}
	}
	slices.SortStableFunc(set, func(a, b int) int { return cmp.Compare(s.votes[b], s.votes[a]) })
	g.ids = set
	return prefetch.Request{Step: step, Layer: next, SpecLayer: next, Set: set, AnyLane: k == 0}, true
}

// warmStart starts reading keys (hottest first; Inputs.WarmKeys) into the
// expert cache in the background, as reads that never delay a demand read
// or a guess, never evict and never exceed the budget
// (prefetch.Planner.Warm, which reads them layer by layer ahead of the
// layer being computed), and then, when the budget holds every routed
// expert (--cache-fill auto), the cache fill: every other expert, at
// background priority (fill); the goroutine belongs to the engine and ends
// with it. Open calls it before the dense weights load. It does nothing
// without keys or a fill, or when the cache cannot spare a slot beyond one
// token's experts of a layer. Only the hottest keys that fit in the cache
// are read; at most 2 × lanes + 2 warm or fill reads are in flight, and
// never more than half the slots left after those k.
func (s *streamSource) warmStart(keys []warmstart.Key) {
	if s.cfg.Cache.Bytes <= 0 || s.cfg.SlotBytes <= 0 {
		return
	}
	slots := int(s.cfg.Cache.Bytes / s.cfg.SlotBytes)
	inflight := min(2*s.lanes.N()+2, (slots-s.cfg.K)/2)
	keys = keys[:min(len(keys), slots)]
	rest := s.fillKeys(keys)
	if inflight < 1 || len(keys)+len(rest) == 0 {
		return
	}
	s.spec.warm = len(keys) > 0
	if rest != nil {
		s.filled = make(chan struct{})
	}
	s.life.Go(func() error {
		if len(keys) > 0 {
			st, err := s.planner.Warm(s.life.ctx, keys, inflight)
			if err != nil {
				// A failed speculative read is not the run's failure: a demand
				// read of the same expert reports it if it matters.
				s.cfg.Log.Warn().Str("event", "warm_start_error").Err(err).Msg("warm start stopped")
			}
			s.cfg.Log.Debug().Str("event", "warm_start_offered").Int64("reads", st.Issued).Bool("cache_full", st.Full).Msg("warm start: every read offered")
		}
		if rest != nil {
			s.fill(rest, inflight)
		}
		return nil
	})
}
