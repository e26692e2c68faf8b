package replay

import (
	"errors"
	"fmt"

	"github.com/pipe-engine/pipe/cache"
)

// ErrPolicy is wrapped when a policy breaks the cache.Policy contract during
// a replay (a victim that is not resident or not eligible).
var ErrPolicy = errors.New("replay: policy broke the contract")

// PhaseSel selects which lookups count towards the reported hit rate. Prefill
// is always replayed (it warms the cache); only the counting differs.
type PhaseSel int

const (
	CountDecode PhaseSel = iota // only decode lookups count (the field's convention)
	CountAll                    // prefill lookups count too
)

// ParsePhaseSel parses "decode" or "all".
func ParsePhaseSel(s string) (PhaseSel, error) {
	switch s {
	case "decode":
		return CountDecode, nil
	case "all":
		return CountAll, nil
	}
	return 0, fmt.Errorf("replay: phase %q: want decode or all", s)
}

func (p PhaseSel) String() string {
	if p == CountAll {
		return "all"
	}
	return "decode"
}

// Access is one policy notification inside a batch: the first occurrence of
// a key is a lookup (hit or miss), a repeat only refreshes it (OnHit,
// uncounted).
type Access struct {
	Key    cache.Key
	Repeat bool
}

// Batch is one lookup batch: one decode (token, layer), or one prefill layer
// holding all prompt tokens' experts in token-major order.
type Batch struct {
	Turn, Phase, Step, Layer int // Step: the first token's step for prefill
	Tokens                   int // tokens in the batch
	Accesses                 []Access
}

// Sequence is a trace compiled into lookup batches.
type Sequence struct {
	Header  Header
	Batches []Batch
	// DecodeTokens and PrefillTokens count distinct (turn, step) per phase.
	DecodeTokens, PrefillTokens int
}

// Compile groups a trace's rows into lookup batches. Rows of one batch must
// be consecutive (as every recorder writes them); a batch key that reappears
// later starts a new batch.
func Compile(t *Trace) *Sequence {
	s := &Sequence{Header: t.Header}
	type tok struct{ turn, phase, step int }
	tokens := map[tok]bool{}
	var cur *Batch
	var curKey [4]int
	var seen map[cache.Key]bool
	var lastStep int
	for _, r := range t.Rows {
		bs := r.Step
		if r.Phase == PhasePrefill {
			bs = -1
		}
		key := [4]int{r.Turn, r.Phase, bs, r.Layer}
		if cur == nil || key != curKey {
			s.Batches = append(s.Batches, Batch{Turn: r.Turn, Phase: r.Phase, Step: r.Step, Layer: r.Layer})
			cur = &s.Batches[len(s.Batches)-1]
			curKey = key
			seen = map[cache.Key]bool{}
			lastStep = -1
		}
		if r.Step != lastStep {
			cur.Tokens++
			lastStep = r.Step
		}
		if tk := (tok{r.Turn, r.Phase, r.Step}); !tokens[tk] {
			tokens[tk] = true
			if r.Phase == PhaseDecode {
				s.DecodeTokens++
			} else {
				s.PrefillTokens++
			}
		}
		k := cache.Key{Layer: r.Layer, Expert: r.Expert}
		cur.Accesses = append(cur.Accesses, Access{Key: k, Repeat: seen[k]})
		seen[k] = true
	}
	return s
}

// Future is the key of every policy notification (OnHit or OnAdmit) the
// replay will make, in order: what the "belady" policy needs.
func (s *Sequence) Future() []cache.Key {
	var n int
	for i := range s.Batches {
		n += len(s.Batches[i].Accesses)
	}
	f := make([]cache.Key, 0, n)
	for i := range s.Batches {
		for _, a := range s.Batches[i].Accesses {
			f = append(f, a.Key)
		}
	}
	return f
}

// Result is one replay of one policy at one budget.
type Result struct {
	Policy    string
	Budget    int64    // bytes
	Phase     PhaseSel // which lookups are counted below
	Lookups   int64    // counted lookups (distinct experts per batch)
	Hits      int64
	BytesRead int64 // bytes loaded by counted misses
	Tokens    int   // counted tokens
	Evictions int64 // over the whole replay
	Refused   int64 // misses an Admitter did not admit (read, used, not made resident), over the whole replay
	PeakBytes int64 // largest residency seen (inside a batch it may exceed Budget)
}

// HitRate is Hits/Lookups in percent (0 when nothing was looked up).
func (r Result) HitRate() float64 {
	if r.Lookups == 0 {
		return 0
	}
	return 100 * float64(r.Hits) / float64(r.Lookups)
}

// MiBPerToken is the bytes read by counted misses per counted token, in MiB.
func (r Result) MiBPerToken() float64 {
	if r.Tokens == 0 {
		return 0
	}
	return float64(r.BytesRead) / float64(r.Tokens) / (1 << 20)
}

// refuse asks an Admitter policy whether a missed key that does not fit
// (full) is admitted, against the victim it would displace; a refused key
// is told to the policy and stays out of the cache.
func refuse(pol cache.Policy, k cache.Key, full bool, eligible func(cache.Key) bool) bool {
	adm, ok := pol.(cache.Admitter)
	if !ok || !full {
		return false
	}
	v, ok := pol.Victim(eligible)
	if !ok || adm.Admit(k, v) {
		return false
	}
	adm.OnRefuse(k)
	return true
}

// Simulate replays s through pol with a budget of budget bytes. A policy
// that is a cache.Admitter decides at each miss that does not fit whether
// the key becomes resident.
func Simulate(s *Sequence, pol cache.Policy, budget int64, phase PhaseSel) (Result, error) {
	h := &s.Header
	res := Result{Policy: pol.Name(), Budget: budget, Phase: phase}
	if phase == CountAll {
		res.Tokens = s.DecodeTokens + s.PrefillTokens
	} else {
		res.Tokens = s.DecodeTokens
	}
	ne := 1 // arrays sized by the experts actually routed, not n_expert
	for bi := range s.Batches {
		b := &s.Batches[bi]
		if b.Layer < 0 || b.Layer >= h.NLayer || len(h.Layers) != h.NLayer {
			return res, fmt.Errorf("%w: batch %d: layer %d of %d", ErrMalformed, bi, b.Layer, h.NLayer)
		}
		for _, a := range b.Accesses {
			if a.Key.Layer != b.Layer || a.Key.Expert < 0 || a.Key.Expert >= MaxExperts {
				return res, fmt.Errorf("%w: batch %d (layer %d): key %v", ErrMalformed, bi, b.Layer, a.Key)
			}
			ne = max(ne, a.Key.Expert+1)
		}
	}
	idx := func(k cache.Key) int { return k.Layer*ne + k.Expert }
	resident := make([]bool, h.NLayer*ne)
	touched := make([]int32, h.NLayer*ne) // batch number+1 that last touched the key
	var used int64
	var batchNo int32
	eligible := func(k cache.Key) bool {
		if k.Layer < 0 || k.Layer >= h.NLayer || k.Expert < 0 || k.Expert >= ne {
			return false
		}
		i := idx(k)
		return resident[i] && touched[i] != batchNo
	}
	for bi := range s.Batches {
		b := &s.Batches[bi]
		batchNo = int32(bi + 1)
		counted := phase == CountAll || b.Phase == PhaseDecode
		pol.Batch(b.Step, b.Layer)
		eb := h.Layers[b.Layer].ExpertBytes
		for _, a := range b.Accesses {
			i := idx(a.Key)
			touched[i] = batchNo
			if a.Repeat {
				pol.OnHit(a.Key)
				continue
			}
			if counted {
				res.Lookups++
			}
			if resident[i] {
				if counted {
					res.Hits++
				}
				pol.OnHit(a.Key)
				continue
			}
			if counted {
				res.BytesRead += eb
			}
			if refuse(pol, a.Key, used+eb > budget, eligible) {
				res.Refused++
				continue
			}
			resident[i] = true
			used += eb
			pol.OnAdmit(a.Key, eb)
		}
		res.PeakBytes = max(res.PeakBytes, used)
		for used > budget {
			v, ok := pol.Victim(eligible)
			if !ok {
				break
			}
			if !eligible(v) {
				return res, fmt.Errorf("%w: %s chose %v after batch %d, which is not an eligible resident key", ErrPolicy, pol.Name(), v, bi)
			}
			resident[idx(v)] = false
			used -= h.Layers[v.Layer].ExpertBytes
			res.Evictions++
			pol.OnEvict(v)
		}
	}
	return res, nil
}
