package stages

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/clock"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/router"
	"github.com/pipe-engine/pipe/warmstart"
)

// StreamMode is --moe-stream: where routed experts come from.
type StreamMode string

const (
	// StreamOn streams routed experts with O_DIRECT into the expert cache
	// (the default: it decodes faster than the mmap also when the model
	// fits in memory, see README).
	StreamOn StreamMode = "true"
	// StreamOff maps the whole file, as llama.cpp does.
	StreamOff StreamMode = "false"
)

// Sentinels of the fields whose zero value is their default.
const (
	NoCache  = -1 // CacheConfig.Bytes: no expert cache (--cache-mb 0)
	NoFloor  = -1 // CacheConfig.Floor: --cache-mb auto leaves no RAM free
	AllLanes = -1 // PrefetchConfig.Lanes: speculative reads on every lane
)

// MaxLanes bounds --io-threads.
const MaxLanes = 256

// Config is what the user chose, as cmd/pipe's flags give it. A zero field
// is its default: EnsureDefaults, the one place defaults are written, fills
// them in (the flags read their defaults from it), Validate checks the
// result, and resolve works out the Resolved configuration from it, the
// model and the caller's Inputs. Nothing else edits it.
type Config struct {
	Path        string
	Stream      StreamMode // --moe-stream
	NoOverlap   bool       // --overlap=false: a layer's experts are computed once all are read
	Threads     int        // -t
	ExpertsUsed int        // --n-expert-used (0: the model's k)
	NoHugePages bool       // --huge-pages=false: no THP behind the cache slots and anonymous dense weights
	IO          IOConfig
	Cache       CacheConfig
	Prefetch    PrefetchConfig
	Dense       dense.Mode // --dense-weights
	// Lossy are the cache-aware lossy routing modes (--moe-drop,
	// --moe-substitute, --moe-dynamic-k; the zero value is lossless). They
	// apply to forward passes of one token (decode steps).
	Lossy router.Lossy
	Log   zerolog.Logger
}

// Streams reports whether routed experts are streamed (--moe-stream).
func (cfg Config) Streams() bool { return cfg.Stream != StreamOff }

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
	// Bytes is --cache-mb in bytes: 0 is auto (sized from the cgroup limit
	// or MemAvailable), NoCache none.
	Bytes  int64
	Ceil   int64  // --cache-ceil-mb in bytes (0 = none)
	Floor  int64  // --cache-floor-mb in bytes: RAM left free by auto (NoFloor: none)
	Policy string // replacement policy (cache.NewPolicy)
	Fill   FillMode
}

// FillMode is --cache-fill: whether the expert cache is filled in the
// background when it holds every routed expert of the model.
type FillMode string

const (
	// FillAuto (the default): when the cache's budget holds every routed
	// expert, idle reader lanes read the experts no run has asked for yet
	// (after the warm start's), at background priority, never evicting —
	// decode then finds every expert resident, as an engine that loaded
	// the whole file. A smaller budget fills nothing.
	FillAuto FillMode = "auto"
	// FillOff reads an expert only when a run routes to it (or a warm
	// start or prefetch guesses it).
	FillOff FillMode = "off"
)

// PrefetchConfig configures speculative reads.
type PrefetchConfig struct {
	N      int    // --prefetch: speculative experts per layer (0: off)
	Policy string // --prefetch-policy
	Lanes  int    // --prefetch-lanes: lanes serving speculative reads at once (AllLanes: all)
	// NoPrompt (--prefetch-prompt=false): a prompt pass does not read the
	// experts the next layer's router picks for this layer's router inputs
	// while this layer computes (independent of N and Policy).
	NoPrompt bool
}

// Inputs are the caller's choices that are not the user's: they enter
// resolve beside Config and are part of Resolved.
type Inputs struct {
	// KVPositions and KVElemBytes size the KV cache the auto budget leaves
	// room for (decode: -c or the run's estimate, --kv-type).
	KVPositions, KVElemBytes int
	// AutoBytes, when above 0, is the budget --cache-mb auto stands for
	// instead of one sized from the memory available (the demo model's:
	// smaller than its experts, so it streams and evicts).
	AutoBytes int64
	// LoadProgress, if set, sees the dense weights' load on Open's goroutine
	// (bytes done and total, dense.Options.Progress).
	LoadProgress func(done, total int64)
	// WarmKeys, when set, is asked once (in every mode) when the model is
	// described, for the experts to warm-start, hottest first; when
	// streaming, their reads start before the dense weights load, so the
	// lanes read the hottest experts while the dense weights are read and
	// the model is built (Engine.WarmStarted). nil or an empty answer: no
	// warm start.
	WarmKeys func(d *model.Desc) []warmstart.Key

	// onWarm, if set, is called after every change of the warm start's
	// statistics (prefetch.Planner.OnWarm): the package's tests wait on it
	// for the warm reads instead of polling Engine.Metrics.
	onWarm func()
	// clock, if set, is what the stall and compute accounting and a step's
	// wall time are read from (the model's sections, the FFN stage, the
	// meter) instead of the wall clock: the package's tests set a fake
	// one and check the accounting exactly.
	clock clock.Clock
}

// ErrConfig marks an invalid engine configuration.
var ErrConfig = errors.New("invalid configuration")

// EnsureDefaults sets the fields left zero to their defaults and returns
// cfg. It is the only place the defaults are written: cmd/pipe's flags
// read theirs from a Config it filled.
func (cfg *Config) EnsureDefaults() *Config {
	cfg.Stream = cmp.Or(cfg.Stream, StreamOn)
	cfg.Threads = cmp.Or(cfg.Threads, runtime.NumCPU())
	cfg.IO.Lanes = cmp.Or(cfg.IO.Lanes, 4)
	cfg.Cache.Floor = cmp.Or(cfg.Cache.Floor, 512<<20)
	cfg.Cache.Policy = cmp.Or(cfg.Cache.Policy, "layer")
	cfg.Cache.Fill = cmp.Or(cfg.Cache.Fill, FillAuto)
	cfg.Prefetch.Policy = cmp.Or(cfg.Prefetch.Policy, "next-layer")
	cfg.Prefetch.Lanes = cmp.Or(cfg.Prefetch.Lanes, 1)
	cfg.Dense = cmp.Or(cfg.Dense, dense.Anon)
	return cfg
}

// MaxThreads bounds -t: 256 or the number of CPUs, whichever is more (each
// thread has its own scratch, so a mistyped -t 100000 would allocate
// without end).
func MaxThreads() int { return max(256, runtime.NumCPU()) }

// Validate reports the first field that no model can run with, naming its
// flag; the checks that need the model are resolve's. It is the one check
// of a Config: the flags do not repeat it.
func (cfg *Config) Validate() error {
	switch {
	case cfg.Stream != StreamOn && cfg.Stream != StreamOff:
		return fmt.Errorf("%w: --moe-stream %q: want true or false (auto, which always streamed, is gone: true is the default)", ErrConfig, cfg.Stream)
	case cfg.Threads <= 0 || cfg.Threads > MaxThreads():
		return fmt.Errorf("%w: -t %d must be in 1..%d", ErrConfig, cfg.Threads, MaxThreads())
	case cfg.IO.Lanes <= 0 || cfg.IO.Lanes > MaxLanes:
		return fmt.Errorf("%w: --io-threads %d must be in 1..%d", ErrConfig, cfg.IO.Lanes, MaxLanes)
	case cfg.ExpertsUsed < 0:
		return fmt.Errorf("%w: --n-expert-used %d must be >= 0", ErrConfig, cfg.ExpertsUsed)
	case cfg.Cache.Bytes < NoCache:
		return fmt.Errorf("%w: cache budget %d is negative", ErrConfig, cfg.Cache.Bytes)
	case cfg.Cache.Ceil < 0 || cfg.Cache.Floor < NoFloor:
		return fmt.Errorf("%w: --cache-ceil-mb and --cache-floor-mb must be >= 0", ErrConfig)
	case cfg.Cache.Fill != FillAuto && cfg.Cache.Fill != FillOff:
		return fmt.Errorf("%w: --cache-fill %q: want auto or off", ErrConfig, cfg.Cache.Fill)
	case cfg.Prefetch.N < 0:
		return fmt.Errorf("%w: --prefetch %d must be >= 0", ErrConfig, cfg.Prefetch.N)
	case cfg.Prefetch.Lanes < AllLanes:
		return fmt.Errorf("%w: --prefetch-lanes %d must be >= 0", ErrConfig, cfg.Prefetch.Lanes)
	}
	if err := cfg.Dense.Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := cfg.Lossy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return cfg.checkPolicies()
}

// checkPolicies validates the policy names (Validate), also when nothing
// streams: a typo must not be accepted silently because the flag has no
// effect in this mode. A name does not depend on the model: one layer
// stands for its layers.
func (cfg *Config) checkPolicies() error {
	const layers = 1
	if name := cfg.Cache.Policy; name != "" {
		if _, err := cache.NewPolicy(name, cache.PolicyOptions{Layers: layers, Seed: 1}); err != nil {
			return fmt.Errorf("%w: --cache-policy: %w", ErrConfig, err)
		}
	}
	if name := cfg.Prefetch.Policy; name != "" {
		if _, err := prefetch.NewPolicy(name, layers); err != nil {
			return fmt.Errorf("%w: --prefetch-policy: %w", ErrConfig, err)
		}
	}
	return nil
}

// Validate reports an input no engine can run with.
func (in *Inputs) Validate() error {
	if in.KVPositions < 0 || in.KVElemBytes < 0 || in.AutoBytes < 0 {
		return fmt.Errorf("%w: KV positions %d, KV element bytes %d and auto budget %d must be >= 0",
			ErrConfig, in.KVPositions, in.KVElemBytes, in.AutoBytes)
	}
	return nil
}

// Resolved is the configuration an Engine runs with, worked out once by
// resolve when the model is described, before anything is allocated, and
// read by every consumer (the engine's stages, decode's load event; see
// Engine.Config). It is Config with its defaults applied and the cache
// budget in bytes — --cache-mb auto sized from the memory available (or
// Inputs.AutoBytes), an explicit budget clamped to what every expert needs,
// 0 for none and when nothing streams — and the floor's NoFloor as 0, with
// the caller's Inputs and the model-dependent sizes it was derived from.
// Nothing edits it after resolve.
type Resolved struct {
	Config
	Inputs
	K          int   // experts used per token (--n-expert-used, else the model's)
	SlotBytes  int64 // one cache slot: the largest expert span, aligned
	WorkingSet int64 // one token's experts in slots (Σ layers k × slot)
	KVBytes    int64 // the KV cache of Inputs.KVPositions positions
}

// plan is what Open works out before it allocates anything: the model's
// description, its experts' layout and the configuration resolved against
// them.
type plan struct {
	desc   *model.Desc
	layout expertLayout
	cfg    Resolved
}

// prepare is Open's one resolve step: cfg with its defaults
// (EnsureDefaults) is validated with the caller's inputs, the model file at
// cfg.Path is described (a registered architecture: Desc.Supported), the
// family asked once for one sequence's state (stateOf) and the experts laid
// out, and the configuration is resolved against these answers and the
// memory available (resolve), which asks the model nothing more.
func prepare(cfg Config, in Inputs) (plan, error) {
	if err := errors.Join(cfg.EnsureDefaults().Validate(), in.Validate()); err != nil {
		return plan{}, err
	}
	f, err := gguf.Open(cfg.Path)
	if err != nil {
		return plan{}, err
	}
	d, err := model.Describe(f)
	if err != nil {
		return plan{}, err
	}
	if !d.Supported { // Describe asked model.Runnable
		return plan{}, fmt.Errorf("%s: %w: %q (pipe runs: %v)", cfg.Path, model.ErrUnsupportedArch, d.Arch, model.Architectures())
	}
	st := stateOf(d, in.KVPositions, in.KVElemBytes)
	l := newLayout(d)
	r, err := resolve(cfg, in, d, l, st, readMemory())
	return plan{desc: d, layout: l, cfg: r}, err
}

// resolve checks cfg, with its defaults applied and validated (prepare does
// both before it opens the file), and the caller's inputs in against the
// model d whose experts l lays out and whose sequence state st takes — the
// KV cache and the expert-cache budget against mem, the memory available;
// all three asked once by the caller and passed down — and sizes the
// budget. It logs the budget it chose and a budget under one
// token's working set.
func resolve(cfg Config, in Inputs, d *model.Desc, l expertLayout, st stateSize, mem memory) (Resolved, error) {
	hp := d.HParams
	r := Resolved{Config: cfg, Inputs: in, K: cmp.Or(cfg.ExpertsUsed, hp.NExpertUsed), SlotBytes: l.slotBytes}
	r.Cache.Floor = max(cfg.Cache.Floor, 0)
	r.WorkingSet = cache.TokenWorkingSet(hp.NLayer, r.K, r.SlotBytes)
	r.KVBytes = st.kv
	if r.KVPositions > 0 {
		if err := kvFits(st, r.KVPositions, mem); err != nil {
			return Resolved{}, err
		}
	}
	if !cfg.Streams() || cfg.Cache.Bytes == NoCache {
		r.Cache.Bytes = 0 // no expert cache
		return r, errors.Join(r.checkMemory(d, mem), r.checkLossy())
	}
	var err error
	switch all := l.count() * l.slotBytes; {
	case cfg.Cache.Bytes > 0:
		r.Cache.Bytes, err = r.checkBudget(cfg.Cache.Bytes, all)
	case in.AutoBytes > 0:
		r.Cache.Bytes, err = r.checkBudget(in.AutoBytes, all)
	default:
		r.Cache.Bytes, err = r.autoBudget(d, all, mem)
	}
	if err != nil {
		return Resolved{}, err
	}
	if err := r.checkMemory(d, mem); err != nil {
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
