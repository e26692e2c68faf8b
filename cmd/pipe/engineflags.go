package main

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/alecthomas/kong"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/internal/size"
	"github.com/pipe-engine/pipe/router"
	"github.com/pipe-engine/pipe/stages"
)

// EngineFlags are the pipeline's flags: experts per token, streaming, the
// expert cache, prefetch and dense weights (shared by the commands that load
// a model). Their defaults are stages.Config's (engineVars).
type EngineFlags struct {
	NExpertUsed int `name:"n-expert-used" help:"Override the experts used per token (k); lossy, deterministic. 0 = the model's." default:"0"`

	MoeStream     string  `name:"moe-stream" help:"Stream routed experts with O_DIRECT into a bounded cache: true (also bare --moe-stream) or false (whole-file mmap, like llama.cpp). Streaming is faster also when the model fits in memory: --cache-mb auto then gives a cache holding every expert." default:"${moe_stream}"`
	IOThreads     int     `name:"io-threads" help:"Reader lanes for expert reads (0 = the default)." default:"${io_threads}"`
	NoODirect     bool    `name:"no-odirect" help:"Use buffered pread instead of O_DIRECT."`
	CacheMB       string  `name:"cache-mb" help:"Expert cache budget: MiB, a size with a unit (6G, 512M), 'auto' (from the cgroup limit or MemAvailable, minus dense weights, KV and --cache-floor-mb; at most every expert) or 0 (no cache)." default:"${cache_mb}"`
	CacheCeilMB   int64   `name:"cache-ceil-mb" help:"Upper bound for --cache-mb auto, in MiB (0 = none)." default:"0"`
	CacheFloor    int64   `name:"cache-floor-mb" help:"RAM in MiB that --cache-mb auto leaves free." default:"${cache_floor_mb}"`
	CacheFill     string  `name:"cache-fill" help:"auto: when the cache budget holds every routed expert, the --prefetch-lanes lanes read the experts no run has asked for yet in the background once the model is loaded (after the warm start's; demand reads and prefetch go first, nothing is evicted), so decode finds every expert resident; the log's cache_fill event says when it is done. off: an expert is read when first routed to." enum:"auto,off" default:"${cache_fill}"`
	CachePolicy   string  `name:"cache-policy" help:"Expert cache replacement policy: layer (no LRU cliff below one token's working set; best in replay of real traces), layer+admit (layer that leaves a miss colder than its victim uncached; +0.1–0.8 hit points in replay below one token's working set, none above), lru, lfu or random." default:"${cache_policy}"`
	Overlap       bool    `help:"Compute resident experts while the lanes read the rest (--overlap=false waits for the whole layer, for A/B)." default:"${overlap}" negatable:""`
	Prefetch      int     `help:"Speculative expert reads per layer for the next layer (0 = off)." default:"0"`
	PrefetchLanes int     `name:"prefetch-lanes" help:"Reader lanes that may serve speculative reads at once (0 = all): reads in flight share the disk, so fewer leaves demand reads more of it." default:"${prefetch_lanes}"`
	HugePages     bool    `name:"huge-pages" help:"Ask for transparent huge pages behind the expert cache and anonymous dense weights: O_DIRECT reads into them need far fewer device segments (false for A/B)." default:"${huge_pages}" negatable:""`
	PrefetchProm  bool    `name:"prefetch-prompt" help:"In a prompt pass, read the experts the next layer's router picks for this layer's inputs while this layer computes (wrong guesses are withdrawn or stay cached; false for A/B)." default:"${prefetch_prompt}" negatable:""`
	PrefetchPol   string  `name:"prefetch-policy" help:"Speculative prefetch policy: next-layer (the next layer's router applied early), temporal (last token's experts) or popular." default:"${prefetch_policy}"`
	MoeDrop       float32 `name:"moe-drop" help:"Lossy (off at 0): a decode step does not read a routed expert that is not cached and whose router weight is below F × the uniform share 1/k; the top expert is never dropped and the kept weights are scaled to the routing's total (BigMoeOnEdge's --drop-cold-experts). 0..1; needs the expert cache." default:"0" placeholder:"F"`
	MoeSubst      float32 `name:"moe-substitute" help:"Lossy (off at 0): a decode step raises every cached expert's router logit by λ × the token's logit range and takes the top k again, so a cached expert scored within that margin replaces a missed one; weights are the router's own (BigMoeOnEdge's --expert-substitute). Needs the expert cache." default:"0" placeholder:"λ"`
	MoeDynK       float32 `name:"moe-dynamic-k" help:"Lossy (off at 0): per decode step and layer, only the fewest experts whose router weights reach P of the routing's total (at least one, at most k), the kept weights scaled to the total. 0..1." default:"0" placeholder:"P"`
	Dense         string  `name:"dense-weights" help:"Dense (non-expert) weights: anon (O_DIRECT into anonymous memory), warm (mmap, swept once at load) or mmap (lazy)." enum:"anon,warm,mmap" default:"${dense_weights}"`
}

// engineVars are the kong variables the EngineFlags' defaults read: the
// defaults of stages.Config (EnsureDefaults), as the flags spell them.
func engineVars() kong.Vars {
	var d stages.Config
	d.EnsureDefaults()
	return kong.Vars{
		"moe_stream":      string(d.Stream),
		"io_threads":      strconv.Itoa(d.IO.Lanes),
		"cache_mb":        cacheFlag(d.Cache.Bytes),
		"cache_floor_mb":  strconv.FormatInt(d.Cache.Floor>>20, 10),
		"cache_policy":    d.Cache.Policy,
		"cache_fill":      string(d.Cache.Fill),
		"overlap":         strconv.FormatBool(!d.NoOverlap),
		"prefetch_lanes":  strconv.Itoa(d.Prefetch.Lanes),
		"huge_pages":      strconv.FormatBool(!d.NoHugePages),
		"prefetch_prompt": strconv.FormatBool(!d.Prefetch.NoPrompt),
		"prefetch_policy": d.Prefetch.Policy,
		"dense_weights":   string(d.Dense),
	}
}

// cacheFlag spells a CacheConfig.Bytes as --cache-mb does.
func cacheFlag(b int64) string {
	switch b {
	case 0:
		return "auto"
	case stages.NoCache:
		return "0"
	}
	return strconv.FormatInt(b>>20, 10)
}

// config is the engine configuration of a model at path with -t threads
// (0: stages.Config's default). It maps the flags' spellings of "none" and "all" onto the
// Config's: --cache-mb 0 is NoCache, --cache-floor-mb 0 NoFloor,
// --prefetch-lanes 0 AllLanes.
func (f *EngineFlags) config(path string, threads int, log zerolog.Logger) (stages.Config, error) {
	cfg := stages.Config{
		Path: path, Stream: stages.StreamMode(f.MoeStream), NoOverlap: !f.Overlap, Threads: threads,
		ExpertsUsed: f.NExpertUsed, NoHugePages: !f.HugePages,
		IO:       stages.IOConfig{Lanes: f.IOThreads, NoODirect: f.NoODirect},
		Cache:    stages.CacheConfig{Ceil: f.CacheCeilMB << 20, Floor: f.CacheFloor << 20, Policy: f.CachePolicy, Fill: stages.FillMode(f.CacheFill)},
		Prefetch: stages.PrefetchConfig{N: f.Prefetch, Policy: f.PrefetchPol, Lanes: f.PrefetchLanes, NoPrompt: !f.PrefetchProm},
		Dense:    dense.Mode(f.Dense), Log: log,
		Lossy: router.Lossy{Drop: f.MoeDrop, Substitute: f.MoeSubst, DynamicK: f.MoeDynK},
	}
	if f.CacheFloor == 0 {
		cfg.Cache.Floor = stages.NoFloor
	}
	if f.PrefetchLanes == 0 {
		cfg.Prefetch.Lanes = stages.AllLanes
	}
	if f.CacheMB != "auto" {
		b, err := parseCacheSize(f.CacheMB)
		if err != nil {
			return cfg, err
		}
		cfg.Cache.Bytes = cmp.Or(b, stages.NoCache)
	}
	return cfg, nil
}

// check checks the flags with -t threads before anything is opened: their
// configuration with its defaults through stages.Config.Validate, the one
// check of the engine's flags (stages.Open runs it again for every library
// caller).
func (f *EngineFlags) check(threads int) error {
	cfg, err := f.config("", threads, zerolog.Nop())
	if err != nil {
		return err
	}
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return fmt.Errorf("%w: %w", errFlag, err)
	}
	return nil
}

// parseCacheSize reads --cache-mb: a plain number is MiB (0 = no cache); a
// number with a unit (K, M, G, T; e.g. 512M, 6G, 1.5G) is that size.
func parseCacheSize(s string) (int64, error) {
	b, err := size.ParseMiB(s)
	if err != nil {
		return 0, fmt.Errorf("%w: --cache-mb: %w (or auto)", errFlag, err)
	}
	return b, nil
}
