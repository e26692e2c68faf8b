package stages

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/prefetch"
)

// checkPolicies validates the policy names even when nothing streams: a typo
// must not be accepted silently because the flag has no effect in this mode.
func checkPolicies(cfg Config, layers int) error {
	layers = max(layers, 1)
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

// kvBytes is the KV cache of positions positions: attention layers ×
// positions × a position's row (K and V, or the latent of latent
// attention: HParams.KVRow) × element size (saturating instead of
// overflowing), plus the recurrent layers' float32 states.
func kvBytes(hp model.HParams, positions, elemBytes int) int64 {
	nRec := hp.RecurrentLayers()
	per := int64(hp.NLayer-nRec) * int64(hp.KVRow()) * int64(max(elemBytes, 2))
	if per > 0 && int64(positions) > (1<<62)/per {
		return 1 << 62
	}
	return per*int64(positions) + int64(nRec)*4*int64(hp.SSM.StateFloats())
}

// checkKV refuses, before allocating it, a KV cache larger than the memory
// available to the process. Without memory information it allows the cache.
func checkKV(hp model.HParams, positions, elemBytes int) error {
	need := kvBytes(hp, positions, elemBytes)
	avail, source, _, err := cache.Available("", "")
	if err != nil || need <= avail {
		return nil
	}
	return fmt.Errorf("%w: the KV cache for a context of %d positions needs %s, more than the %s available (%s): lower -c (the context size)",
		ErrConfig, positions, mib(need), mib(avail), source)
}

// checkBudget is an explicit --cache-mb clamped to all, what every expert of
// the model needs (a larger cache holds nothing more); it refuses one that,
// with the KV cache, exceeds the memory available to the process.
func (r *Resolved) checkBudget(all int64) (int64, error) {
	b := r.Cache.Bytes
	if b == 0 {
		return 0, nil
	}
	if all > 0 && b > all {
		r.Log.Info().Str("event", "cache_budget").Int64("budget_bytes", all).Int64("asked_bytes", b).
			Msgf("--cache-mb %d is more than every expert of the model needs: cache budget %s", b>>20, mib(all))
		b = all
	}
	avail, source, _, err := cache.Available("", "")
	if err != nil || b+r.KVBytes <= avail {
		return b, nil
	}
	return 0, fmt.Errorf("%w: --cache-mb %d: the expert cache (%s) and the KV cache (%s) exceed the %s available (%s): lower --cache-mb or use --cache-mb auto",
		ErrConfig, b>>20, mib(b), mib(r.KVBytes), mib(avail), source)
}

// kvElemBytes is the size of one KV element of type kv.
func kvElemBytes(kv model.KVType) int {
	if kv == model.KVF32 {
		return 4
	}
	return 2
}

// mib formats a byte count in MiB, or GiB from 10 GiB up.
func mib(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// ErrModelChanged: the model file changed under the run (a memory fault on
// its mapping, e.g. it was truncated).
var ErrModelChanged = errors.New("the model file changed during the run")

// faultError turns a recovered memory fault into an error naming the model
// file; any other panic is re-raised.
func (e *Engine) faultError(r any) error {
	if re, ok := r.(runtime.Error); ok {
		if a, ok := re.(interface{ Addr() uintptr }); ok {
			return fmt.Errorf("%s: %w (memory fault at %#x reading its mapping: truncated or rewritten?)", e.cfg.Path, ErrModelChanged, a.Addr())
		}
	}
	panic(r)
}
