package cache

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Key names one routed expert: expert Expert of layer Layer.
type Key struct{ Layer, Expert int }

// String renders k as "L<layer>/E<expert>" for logs and errors.
func (k Key) String() string { return fmt.Sprintf("L%d/E%d", k.Layer, k.Expert) }

// less orders keys by layer, then expert: the policies' final tie-break.
func (k Key) less(o Key) bool {
	if k.Layer != o.Layer {
		return k.Layer < o.Layer
	}
	return k.Expert < o.Expert
}

// Policy decides which resident expert leaves the cache.
//
// A Policy is not safe for concurrent use; the cache calls it under its lock.
// The call protocol is: Batch at the start of every lookup batch (one decode
// (token, layer), or one prefill layer), then for every key looked up in the
// batch either OnHit (it was resident; also for a repeat inside the batch) or
// OnAdmit (it became resident), and, whenever the cache needs room (after the
// batch in replay, before a miss's read in the engine's slot arena), Victim
// followed by OnEvict for the key the cache actually removed. OnEvict is also
// called when the cache drops a key for its own reasons. Victim never returns
// a key for which eligible returns false (pinned, or touched in the current
// batch); it returns ok=false when no resident key is eligible. Every
// policy's victim order is total (its last tie-break is the key or the
// admission order), so the victim is a function of the call history alone
// ("random": and of the seed) and a replay or bench repeats exactly.
//
// Registered policies (NewPolicy): "lru"; "lfu" (in-cache counts, LRU among
// equals); "random" (seeded); "belady" (offline optimum, replay only);
// "layer" (LayerMix, the recommended default: no cliff below one token's
// working set, and above it ahead of LRU on the real traces); "layer+admit"
// (the same with admission: see Admitter); "layer-lrfu" and "layer-lru"
// (Layered: one decay rate; pure recency in layer time).
type Policy interface {
	Name() string
	Batch(step, layer int)                      // a new lookup batch starts (one decode (token, layer))
	OnHit(k Key)                                // k was looked up and is resident
	OnAdmit(k Key, bytes int64)                 // k became resident
	OnEvict(k Key)                              // k left the cache
	Victim(eligible func(Key) bool) (Key, bool) // choose a resident key to evict among eligible ones
}

// Admitter is a Policy that decides admission as well as the victim (as
// TinyLFU's admission filter does in ristretto): when a missed key k would
// take the slot of victim (the key Victim just chose), Admit reports whether
// k is worth it. A refused key is read and used without becoming resident
// (OnAdmit is not called); OnRefuse lets the policy count the lookup so that
// a key that keeps coming back is eventually admitted. Which policies admit
// selectively is part of their name ("layer+admit").
type Admitter interface {
	Policy
	Admit(k, victim Key) bool
	OnRefuse(k Key)
}

// PolicyOptions configures NewPolicy. The zero value is valid for every
// online policy.
type PolicyOptions struct {
	// Seed seeds the "random" policy; the same seed gives the same victims.
	Seed int64
	// Layers is the model's layer count. Layer-aware policies learn it from
	// the Batch calls when it is 0.
	Layers int
	// Future is the key of every OnHit and OnAdmit call the policy will
	// receive, in order (replay.Sequence.Future builds it). Only "belady"
	// uses it and requires it (it is an offline, replay-only policy).
	Future []Key
}

// ErrUnknownPolicy is returned by NewPolicy for a name it does not know.
var ErrUnknownPolicy = errors.New("cache: unknown policy")

// ErrPolicyOptions is returned by NewPolicy when the options do not suit the policy.
var ErrPolicyOptions = errors.New("cache: bad policy options")

type policyCtor func(PolicyOptions) (Policy, error)

var policies = map[string]policyCtor{
	"lru":    func(PolicyOptions) (Policy, error) { return NewLRU(), nil },
	"lfu":    func(PolicyOptions) (Policy, error) { return NewLFU(), nil },
	"random": func(o PolicyOptions) (Policy, error) { return NewRandom(o.Seed), nil },
	"belady": func(o PolicyOptions) (Policy, error) {
		if o.Future == nil {
			return nil, fmt.Errorf("%w: belady is offline: it needs PolicyOptions.Future (replay only)", ErrPolicyOptions)
		}
		return NewBelady(o.Future), nil
	},
}

// Parameters of the "layer" policy (LayerMix), chosen by replaying the real
// Qwen3-30B-A3B and Gemma-4-26B-A4B traces (package replay): a fast estimate
// halving every layer visit, weight 0.3, mixed with a slow one of half-life
// 1/0.03 ≈ 33 visits. The neighbourhood (fast 0.5–2, slow 0.01–0.06, weight
// 0.2–0.3) is flat within ±0.5 points of hit rate.
const (
	LayerFast   = 1.0
	LayerSlow   = 0.03
	LayerWeight = 0.3
	// LayerLRFUDecay is the single decay rate of "layer-lrfu".
	LayerLRFUDecay = 0.1
)

func init() {
	policies["layer"] = func(o PolicyOptions) (Policy, error) {
		return NewLayerMix("layer", LayerFast, LayerSlow, LayerWeight, true, o.Layers), nil
	}
	policies["layer+admit"] = func(o PolicyOptions) (Policy, error) {
		p := NewLayerMix("layer+admit", LayerFast, LayerSlow, LayerWeight, true, o.Layers)
		p.admit = true
		return p, nil
	}
	policies["layer-lrfu"] = func(o PolicyOptions) (Policy, error) {
		return NewLayered("layer-lrfu", LayerLRFUDecay, true, true, o.Layers), nil
	}
	policies["layer-lru"] = func(o PolicyOptions) (Policy, error) {
		return NewLayered("layer-lru", math.Inf(1), false, false, o.Layers), nil
	}
}

// PolicyNames lists the names NewPolicy accepts, sorted.
func PolicyNames() []string {
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewPolicy builds the named replacement policy.
func NewPolicy(name string, opts PolicyOptions) (Policy, error) {
	ctor, ok := policies[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return nil, fmt.Errorf("%w %q (valid: %s)", ErrUnknownPolicy, name, strings.Join(PolicyNames(), ", "))
	}
	return ctor(opts)
}
