package stages

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/router"
)

// Config is everything the engine needs; cmd/pipe fills it from flags.
type Config struct {
	Path        string
	Stream      bool // --moe-stream: routed experts through O_DIRECT and the cache
	Overlap     bool // --overlap
	Threads     int  // -t
	ExpertsUsed int  // --n-expert-used (0: the model's k)
	HugePages   bool // --huge-pages: THP behind the cache slots and anonymous dense weights
	IO          IOConfig
	Cache       CacheConfig
	Prefetch    PrefetchConfig
	Dense       dense.Mode // --dense-weights ("" is anon)
	// Lossy are the cache-aware lossy routing modes (--moe-drop,
	// --moe-substitute, --moe-dynamic-k; the zero value is lossless). They
	// apply to forward passes of one token (decode steps).
	Lossy router.Lossy
	Log   zerolog.Logger
	// LoadProgress, if set, sees the dense weights' load on Open's goroutine
	// (bytes done and total, dense.Options.Progress).
	LoadProgress func(done, total int64)
	// WarmKeys, when set, is asked once (in every mode) when the model is
	// described, for the experts to warm-start, hottest first; when
	// streaming, their reads start before the dense weights load, so the
	// lanes read the hottest experts while the dense weights are read and
	// the model is built (Engine.WarmStarted). nil or an empty answer: no
	// warm start.
	WarmKeys func(d *model.Desc) []cache.Key
}

// IOConfig configures the reader lanes.
type IOConfig struct {
	Lanes     int  // --io-threads
	NoODirect bool // --no-odirect
	// Open, when set, opens the model's files for the reader (tests use it
	// to inject short reads, EIO and EINVAL); nil is the operating system.
	Open reader.OpenFunc
}

// CacheConfig configures the expert cache.
type CacheConfig struct {
	Bytes  int64  // --cache-mb in bytes; 0 = no cache (ignored with Auto)
	Auto   bool   // --cache-mb auto: size from the cgroup limit / MemAvailable
	Ceil   int64  // --cache-ceil-mb in bytes (0 = none)
	Floor  int64  // --cache-floor-mb in bytes: RAM left free by Auto
	Policy string // replacement policy (cache.NewPolicy)
	// KVPositions and KVElemBytes size the KV cache Auto leaves room for.
	KVPositions, KVElemBytes int
}

// PrefetchConfig configures speculative reads.
type PrefetchConfig struct {
	N      int    // --prefetch: speculative experts per layer (0: off)
	Policy string // --prefetch-policy
	Lanes  int    // --prefetch-lanes: lanes serving speculative reads at once (0: all)
	// Prompt (--prefetch-prompt): in a prompt pass, read the experts the next
	// layer's router picks for this layer's router inputs while this layer
	// computes (independent of N and Policy).
	Prompt bool
}

// ErrConfig marks an invalid engine configuration.
var ErrConfig = errors.New("invalid configuration")

// EnsureDefaults sets the fields left zero to their defaults and returns
// cfg: the dense weights anonymous, the speculation policy temporal, a KV
// element of 2 bytes.
func (cfg *Config) EnsureDefaults() *Config {
	cfg.Dense = cmp.Or(cfg.Dense, dense.Anon)
	cfg.Prefetch.Policy = cmp.Or(cfg.Prefetch.Policy, "temporal")
	cfg.Cache.KVElemBytes = cmp.Or(cfg.Cache.KVElemBytes, 2)
	return cfg
}

// MaxThreads bounds -t: 256 or the number of CPUs, whichever is more (each
// thread has its own scratch, so a mistyped -t 100000 would allocate
// without end).
func MaxThreads() int { return max(256, runtime.NumCPU()) }

// Validate reports the first field that no model can run with, naming its
// flag; the checks that need the model are resolve's.
func (cfg *Config) Validate() error {
	switch {
	case cfg.Threads <= 0 || cfg.Threads > MaxThreads():
		return fmt.Errorf("%w: -t %d must be in 1..%d", ErrConfig, cfg.Threads, MaxThreads())
	case cfg.Stream && cfg.IO.Lanes <= 0:
		return fmt.Errorf("%w: --io-threads %d must be positive", ErrConfig, cfg.IO.Lanes)
	case cfg.Cache.Bytes < 0:
		return fmt.Errorf("%w: cache budget %d is negative", ErrConfig, cfg.Cache.Bytes)
	case cfg.Cache.KVPositions < 0:
		return fmt.Errorf("%w: KV positions %d is negative", ErrConfig, cfg.Cache.KVPositions)
	}
	if err := cfg.Dense.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := cfg.Lossy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Resolved is the configuration an Engine runs with, worked out once by
// resolve when the model is described, before anything is allocated, and
// read by every consumer (the engine's stages, decode's load event; see
// Engine.Config). It is Config with its defaults applied and the cache
// budget in bytes — --cache-mb auto sized from the memory available, an
// explicit budget clamped to what every expert needs, 0 when nothing
// streams — with the model-dependent sizes it was derived from. Nothing
// edits it after resolve.
type Resolved struct {
	Config
	K          int   // experts used per token (--n-expert-used, else the model's)
	SlotBytes  int64 // one cache slot: the largest expert span, aligned
	WorkingSet int64 // one token's experts in slots (Σ layers k × slot)
	KVBytes    int64 // the KV cache of Cache.KVPositions positions
}

// resolve checks cfg, with its defaults applied and validated (Open does
// both before it opens the file), against the model d whose experts l lays
// out — the policy names, the KV cache and the expert-cache budget against
// the memory available — and sizes the budget. It logs the budget it chose
// and a budget under one token's working set.
func resolve(cfg Config, d *model.Desc, l expertLayout) (Resolved, error) {
	hp := d.HParams
	r := Resolved{Config: cfg, K: cmp.Or(cfg.ExpertsUsed, hp.NExpertUsed), SlotBytes: l.slotBytes}
	r.WorkingSet = cache.TokenWorkingSet(hp.NLayer, r.K, r.SlotBytes)
	r.KVBytes = kvBytes(hp, cfg.Cache.KVPositions, cfg.Cache.KVElemBytes)
	if err := checkPolicies(cfg, hp.NLayer); err != nil {
		return Resolved{}, err
	}
	if cfg.Cache.KVPositions > 0 {
		if err := checkKV(hp, cfg.Cache.KVPositions, cfg.Cache.KVElemBytes); err != nil {
			return Resolved{}, err
		}
	}
	if !cfg.Stream {
		r.Cache.Bytes = 0 // no expert cache
		return r, errors.Join(r.checkMemory(d), r.checkLossy())
	}
	var err error
	if all := l.count() * l.slotBytes; cfg.Cache.Auto {
		r.Cache.Bytes, err = r.autoBudget(d, all)
	} else {
		r.Cache.Bytes, err = r.checkBudget(all)
	}
	if err != nil {
		return Resolved{}, err
	}
	if err := r.checkMemory(d); err != nil {
		return Resolved{}, err
	}
	if b := r.Cache.Bytes; b > 0 && b < r.WorkingSet {
		r.Log.Warn().Str("event", "cache_cliff").Int64("budget_bytes", b).
			Int64("working_set_bytes", r.WorkingSet).Msg(cache.CliffWarning(b, r.WorkingSet))
	}
	return r, r.checkLossy()
}

// checkLossy refuses a cache-aware lossy mode without an expert cache:
// every expert would count as missed, and drop and substitute would stop
// being cache-aware (BigMoeOnEdge refuses the same).
func (r *Resolved) checkLossy() error {
	if r.Lossy.NeedsCache() && r.Cache.Bytes == 0 {
		return fmt.Errorf("%w: --moe-drop and --moe-substitute need the expert cache (--moe-stream on and --cache-mb above 0)", ErrConfig)
	}
	return nil
}
