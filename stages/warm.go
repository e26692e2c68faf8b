package stages

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
)

// ModelID identifies the model file for its hot set (see ModelIDOf).
func (e *Engine) ModelID() (cache.ModelID, error) { return ModelIDOf(e.desc.File) }

// ModelIDOf identifies a model file for its hot set: the total size of its
// shards and the SHA-256 of the first shard's header (metadata and tensor
// infos, the bytes before the data section).
func ModelIDOf(f *gguf.File) (cache.ModelID, error) {
	var id cache.ModelID
	for _, sh := range f.Shards {
		id.Size += int64(sh.Size)
	}
	r, err := os.Open(f.Path)
	if err != nil {
		return id, fmt.Errorf("model id: %w", err)
	}
	defer r.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, r, int64(f.DataOffset)); err != nil {
		return id, fmt.Errorf("model id: %s header: %w", f.Path, err)
	}
	id.HeaderSHA = hex.EncodeToString(h.Sum(nil))
	return id, nil
}

// ExpertShapeOf is the number of experts of every layer of d (0 for a layer
// without routed experts), the shape of the model's hot set.
func ExpertShapeOf(d *model.Desc) []int {
	s := make([]int, len(d.Experts))
	for i, exps := range d.Experts {
		s[i] = len(exps)
	}
	return s
}

// warmStart starts reading keys (hottest first; Config.WarmKeys) into the
// expert cache in the background, as speculative reads that never delay a
// demand read, never evict and never exceed the budget
// (prefetch.Planner.Warm, which reads them layer by layer ahead of the
// layer being computed); the goroutine belongs to the engine and ends with
// it. Open calls it before the dense weights load. It does nothing without
// keys or when the cache cannot spare a slot beyond one token's experts of
// a layer. Only the hottest keys that fit in the cache are read; at most 2 ×
// lanes + 2 warm reads are in flight, and never more than half the slots
// left after those k.
func (e *Engine) warmStart(keys []cache.Key) {
	if e.io == nil || len(keys) == 0 {
		return
	}
	slots := int(e.cfg.Cache.Bytes / e.layout.slotBytes)
	inflight := min(2*e.io.lanes.N()+2, (slots-e.cfg.K)/2)
	if inflight < 1 {
		return
	}
	keys = keys[:min(len(keys), slots)]
	e.io.warm = true
	e.life.Go(func() error {
		st, err := e.io.planner.Warm(e.life.ctx, keys, inflight)
		if err != nil {
			// A failed speculative read is not the run's failure: a demand
			// read of the same expert reports it if it matters.
			e.cfg.Log.Warn().Str("event", "warm_start_error").Err(err).Msg("warm start stopped")
		}
		e.cfg.Log.Debug().Str("event", "warm_start_offered").Int64("reads", st.Issued).Bool("cache_full", st.Full).Msg("warm start: every read offered")
		return nil
	})
}

// WarmStarted reports whether Open started a warm start.
func (e *Engine) WarmStarted() bool { return e.io != nil && e.io.warm }

// WarmStats are the warm start's counters (ok is false when not streaming).
func (e *Engine) WarmStats() (prefetch.WarmStats, bool) {
	if e.io == nil {
		return prefetch.WarmStats{}, false
	}
	return e.io.planner.WarmStats(), true
}
