package stages

import (
	"context"
	"fmt"
	"testing"

	"github.com/pipe-engine/pipe/dense"
)

// TestOutputInvariance is the determinism invariant: the logits of a prompt
// and 12 greedy steps are bit-identical whatever the I/O settings — every
// configuration below against the whole-file mmap. The tiny F32 qwen3moe
// model has 4 layers × top-2 of 8 experts of ~0.8 MB each, so one token's
// working set is ~6.3 MB and all experts ~25 MB: a 3 MiB cache is below the
// working set (the LRU cliff), 12 MiB about half the experts, 30 MiB all of
// them (the cache fill, --cache-fill auto, then reads every expert in the
// background, unless it is off). The gemma4 files (3 layers × top-2 of 8
// experts of 0.75 MB at F32: a 4.5 MB working set, 18 MB in all) run the
// same settings: per-layer
// geometry, the dense MLP beside the experts (and qwen2moe's shared expert,
// both run while the stage waits for reads) and the router on the attention
// output (what next-layer prefetch peeks with) must not change a bit either.
// cmd/pipe keeps a smoke test of the same invariant through the CLI.
func TestOutputInvariance(t *testing.T) {
	// qwen2moe: a shared expert (with its scale row) computed while the
	// routed experts' reads are waited for (model.SideWork), as gemma4's
	// dense MLP is
	models := []string{"tiny-qwen3moe-F32", "tiny-qwen3moe-Q4_K_M", "tiny-gemma4-F32", "tiny-gemma4-Q4_K_M", "tiny-qwen2moe-Q4_K_M"}
	if testing.Short() {
		models = []string{"tiny-qwen3moe-Q4_K_M", "tiny-gemma4-Q4_K_M", "tiny-qwen2moe-Q4_K_M"}
	}
	const mib = 1 << 20
	pf := func(n int, policy string, lanes int) PrefetchConfig {
		return PrefetchConfig{N: n, Policy: policy, Lanes: lanes, NoPrompt: true}
	}
	configs := []struct {
		name string
		mod  func(*Config)
	}{
		{"lanes 1", func(c *Config) { c.IO.Lanes = 1 }},
		{"lanes 2", func(c *Config) { c.IO.Lanes = 2 }},
		{"lanes 8", func(c *Config) { c.IO.Lanes = 8 }},
		{"cache 0", func(c *Config) { c.Cache.Bytes = NoCache }},
		{"cache 3", func(c *Config) { c.Cache.Bytes = 3 * mib }},
		{"cache 12", func(c *Config) { c.Cache.Bytes = 12 * mib }},
		{"cache 30 no overlap", func(c *Config) { c.Cache.Bytes = 30 * mib; c.NoOverlap = true }},
		{"cache 3 no overlap lanes 1", func(c *Config) { c.Cache.Bytes = 3 * mib; c.NoOverlap = true; c.IO.Lanes = 1 }},
		{"lru cache 3", func(c *Config) { c.Cache.Bytes = 3 * mib; c.Cache.Policy = "lru" }},
		{"threads 1", func(c *Config) { c.Threads = 1 }},
		{"threads 3", func(c *Config) { c.Threads = 3 }},
		{"dense warm", func(c *Config) { c.Dense = dense.Warm }},
		{"dense mmap threads 1", func(c *Config) { c.Dense = dense.Mmap; c.Threads = 1 }},
		{"prefetch 2", func(c *Config) { c.Cache.Bytes = 12 * mib; c.Prefetch = pf(2, "next-layer", 1) }},
		{"prefetch 2 temporal", func(c *Config) { c.Cache.Bytes = 12 * mib; c.Prefetch = pf(2, "temporal", 1) }},
		{"cache 3 prefetch 8 lanes 1", func(c *Config) { c.Cache.Bytes = 3 * mib; c.Prefetch = pf(8, "next-layer", 1); c.IO.Lanes = 1 }},
		{"prefetch 4 popular", func(c *Config) { c.Cache.Bytes = 12 * mib; c.Prefetch = pf(4, "popular", 1) }},
		{"prefetch 8 on all lanes", func(c *Config) { c.Cache.Bytes = 12 * mib; c.Prefetch = pf(8, "next-layer", AllLanes); c.IO.Lanes = 4 }},
		{"cache 3 no huge pages prefetch 8", func(c *Config) { c.Cache.Bytes = 3 * mib; c.NoHugePages = true; c.Prefetch = pf(8, "next-layer", 2) }},
		{"prompt prefetch", func(c *Config) { c.Cache.Bytes = 12 * mib; c.Prefetch.NoPrompt = false }},
		{"cache 3 prompt prefetch lanes 1", func(c *Config) { c.Cache.Bytes = 3 * mib; c.Prefetch.NoPrompt = false; c.IO.Lanes = 1 }},
		{"cache 0 prompt prefetch", func(c *Config) { c.Cache.Bytes = NoCache; c.Prefetch.NoPrompt = false }},
		{"prompt prefetch and prefetch 8", func(c *Config) {
			c.Cache.Bytes = 12 * mib
			c.Prefetch = pf(8, "next-layer", AllLanes)
			c.Prefetch.NoPrompt = false
		}},
		{"cache 30 fill off", func(c *Config) { c.Cache.Bytes = 30 * mib; c.Cache.Fill = FillOff }},
		{"cache 30 fill lanes 1 prefetch 8 prompt prefetch", func(c *Config) {
			c.Cache.Bytes = 30 * mib // every expert: the cache fill runs beside the demand and speculative reads
			c.IO.Lanes = 1
			c.Prefetch = pf(8, "next-layer", AllLanes)
			c.Prefetch.NoPrompt = false
		}},
		{"buffered reads", func(c *Config) { c.IO.NoODirect = true }},
		{"mmap threads 1", func(c *Config) { c.Stream = StreamOff; c.Threads = 1 }},
		{"mmap lazy dense", func(c *Config) { c.Stream = StreamOff; c.Dense = dense.Mmap }},
	}
	for _, m := range models {
		base := baseCfg()
		base.Path = fmt.Sprintf("../testdata/golden/models/%s.gguf", m)
		base.Cache = CacheConfig{Bytes: 20 * mib, Policy: "layer"}
		base.NoHugePages = false
		ref := base
		ref.Stream = StreamOff
		want, err := decode(context.Background(), t, ref, 12)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range configs {
			t.Run(m+"/"+c.name, func(t *testing.T) {
				cfg := base
				c.mod(&cfg)
				got, err := decode(context.Background(), t, cfg, 12)
				if err != nil {
					t.Fatal(err)
				}
				if !sameBits(got, want) {
					t.Fatal("logits differ from the whole-file mmap")
				}
			})
		}
	}
}
