package stages

import (
	"fmt"

	"github.com/pipe-engine/pipe/cache"
)

// k is the experts used per token.
func (e *Engine) k() int {
	if e.cfg.ExpertsUsed > 0 {
		return e.cfg.ExpertsUsed
	}
	return e.desc.HParams.NExpertUsed
}

// resolveBudget turns --cache-mb auto into bytes and logs the cliff guard.
func (e *Engine) resolveBudget() error {
	d, cc := e.desc, &e.cfg.Cache
	if cc.Auto {
		// Dense bytes are subtracted in every mode: with warm/mmap they are
		// page-cache pages, but a cgroup charges those too, and a cache that
		// takes their room pushes them out to refault during compute (the
		// seed note's Regime 2).
		a, err := cache.AutoBudget(cache.AutoOptions{
			DenseBytes: d.DenseBytes, KVBytes: e.kvBytes(),
			OverheadBytes: int64(max(e.k(), cache.DefaultTransientSlots))*e.layout.slotBytes + 64<<20,
			FloorBytes:    cc.Floor, CeilBytes: cc.Ceil, SlotBytes: e.layout.slotBytes,
			AllBytes: e.layout.count() * e.layout.slotBytes,
		})
		if err != nil {
			return fmt.Errorf("--cache-mb auto: %w", err)
		}
		cc.Bytes = a.Budget
		e.cfg.Log.Info().Str("event", "cache_budget").Int64("budget_bytes", a.Budget).Int64("available_bytes", a.Available).
			Str("source", a.Source).Msg(a.Explain)
	}
	e.layout.workingSet = cache.TokenWorkingSet(d.HParams.NLayer, e.k(), e.layout.slotBytes)
	if cc.Bytes > 0 && cc.Bytes < e.layout.workingSet {
		e.cfg.Log.Warn().Str("event", "cache_cliff").Int64("budget_bytes", cc.Bytes).
			Int64("working_set_bytes", e.layout.workingSet).Msg(cache.CliffWarning(cc.Bytes, e.layout.workingSet))
	}
	return nil
}

// kvBytes is the KV cache the run will allocate: layers × K and V ×
// positions × KV width × element size.
func (e *Engine) kvBytes() int64 {
	return e.kvBytesFor(e.cfg.Cache.KVPositions, e.cfg.Cache.KVElemBytes)
}

// Budget is the expert cache budget in bytes (resolved when auto).
func (e *Engine) Budget() int64 { return e.cfg.Cache.Bytes }

// WorkingSet is one token's expert bytes in cache slots (Σ layers k × slot).
func (e *Engine) WorkingSet() int64 { return e.layout.workingSet }
