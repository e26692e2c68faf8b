package stages

import (
	"fmt"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/model"
)

// autoBudget sizes --cache-mb auto from mem, the memory available, and
// logs it.
func (r *Resolved) autoBudget(d *model.Desc, all int64, mem memory) (int64, error) {
	if mem.err != nil {
		return 0, fmt.Errorf("--cache-mb auto: %w", mem.err)
	}
	// Dense bytes are subtracted in every mode: with warm/mmap they are
	// page-cache pages, but a cgroup charges those too, and a cache that
	// takes their room pushes them out to refault during compute (the
	// seed note's Regime 2).
	a := cache.AutoBudget(mem.Memory, cache.AutoOptions{
		DenseBytes: d.DenseBytes, KVBytes: r.KVBytes,
		OverheadBytes: int64(max(r.K, cache.DefaultTransientSlots))*r.SlotBytes + 64<<20,
		FloorBytes:    r.Cache.Floor, CeilBytes: r.Cache.Ceil, SlotBytes: r.SlotBytes,
		AllBytes: all,
	})
	r.Log.Info().Str("event", "cache_budget").Int64("budget_bytes", a.Budget).Int64("available_bytes", a.Available).
		Str("source", a.Source).Msg(a.Explain)
	return a.Budget, nil
}
