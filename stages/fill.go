package stages

import (
	"time"

	"github.com/pipe-engine/pipe/warmstart"
)

// fillKeys are the cache fill's keys (--cache-fill auto): when the budget
// holds every routed expert of the model, every expert that warm (the warm
// start's keys) does not name, layer by layer; nil when the fill is off, there
// is no cache or the budget is short of one expert or more (a fill would
// have to evict).
func (s *streamSource) fillKeys(warm []warmstart.Key) []warmstart.Key {
	n := s.layout.count()
	if s.cfg.Cache.Fill == FillOff || n == 0 || s.cfg.Cache.Bytes/s.cfg.SlotBytes < n {
		return nil
	}
	seen := make(map[warmstart.Key]bool, len(warm))
	for _, k := range warm {
		seen[k] = true
	}
	rest := make([]warmstart.Key, 0, n-int64(len(seen)))
	for l, exps := range s.layout.ranges {
		for e := range exps {
			if k := (warmstart.Key{Layer: l, Expert: e}); !seen[k] {
				rest = append(rest, k)
			}
		}
	}
	return rest
}

// fill reads keys into the cache, once the model is built (begin: the dense
// weights' reads are done), at background priority (prefetch.Planner.Fill:
// after every queued demand and speculative read, on the lanes speculation
// may use, never evicting) and, when every read is done, logs the cache_fill event
// — the experts and bytes it read and how long it took, the resident
// experts and bytes — and closes s.filled. An engine closed first logs
// nothing; a failed read is a warning (a demand read of that expert reports
// it if it matters), and s.filled is closed all the same.
func (s *streamSource) fill(keys []warmstart.Key, inflight int) {
	select { // the dense load's reads first: the fill must not delay the first token
	case <-s.loaded:
	case <-s.life.ctx.Done():
		return
	}
	t0 := time.Now()
	st, err := s.planner.Fill(s.life.ctx, keys, inflight)
	if s.life.ctx.Err() != nil {
		return
	}
	if err != nil {
		s.cfg.Log.Warn().Str("event", "cache_fill_error").Err(err).Msg("cache fill stopped")
	}
	cs := s.cache.Stats()
	s.cfg.Log.Info().Str("event", "cache_fill").Int64("experts", st.Completed).Int64("bytes", st.Bytes).
		Int64("ms", time.Since(t0).Milliseconds()).Int("resident_experts", cs.ResidentEntries).
		Int64("resident_bytes", cs.ResidentBytes).Bool("complete", cs.ResidentEntries == int(s.layout.count())).
		Msg("cache fill done")
	close(s.filled)
}
