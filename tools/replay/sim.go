package replay

import (
	"errors"
	"fmt"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/metrics"
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
	Weight float32 // the router's weight of the row (the lossy replay's input)
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
		cur.Accesses = append(cur.Accesses, Access{Key: k, Repeat: seen[k], Weight: r.Weight})
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

// HitRate is the hit rate of the counted lookups in percent, as
// metrics.Lookups defines it (a replay has no reads in flight, so every
// lookup that is not a hit is a miss); 0 when nothing was looked up.
func (r Result) HitRate() float64 {
	pct, _ := metrics.Lookups{Hits: r.Hits, Misses: r.Lookups - r.Hits}.HitPct()
	return pct
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
	sm, err := newSim(s, pol, budget, phase)
	if err != nil {
		return sm.res, err
	}
	for bi := range s.Batches {
		if err := sm.batch(bi, &s.Batches[bi]); err != nil {
			return sm.res, err
		}
	}
	return sm.res, nil
}

// sim is a replay's cache state: which keys are resident, under which
// policy and budget, and what was counted so far.
type sim struct {
	h        *Header
	pol      cache.Policy
	budget   int64
	phase    PhaseSel
	res      Result
	ne       int     // experts per layer in the arrays (the largest routed id + 1)
	resident []bool  // [layer·ne + expert]
	touched  []int32 // batch number+1 that last touched the key
	used     int64
	batchNo  int32
}

// newSim checks s's batches and sizes the state for them.
func newSim(s *Sequence, pol cache.Policy, budget int64, phase PhaseSel) (*sim, error) {
	h := &s.Header
	sm := &sim{h: h, pol: pol, budget: budget, phase: phase, ne: 1,
		res: Result{Policy: pol.Name(), Budget: budget, Phase: phase}}
	if phase == CountAll {
		sm.res.Tokens = s.DecodeTokens + s.PrefillTokens
	} else {
		sm.res.Tokens = s.DecodeTokens
	}
	for bi := range s.Batches {
		b := &s.Batches[bi]
		if b.Layer < 0 || b.Layer >= h.NLayer || len(h.Layers) != h.NLayer {
			return sm, fmt.Errorf("%w: batch %d: layer %d of %d", ErrMalformed, bi, b.Layer, h.NLayer)
		}
		for _, a := range b.Accesses {
			if a.Key.Layer != b.Layer || a.Key.Expert < 0 || a.Key.Expert >= MaxExperts {
				return sm, fmt.Errorf("%w: batch %d (layer %d): key %v", ErrMalformed, bi, b.Layer, a.Key)
			}
			sm.ne = max(sm.ne, a.Key.Expert+1)
		}
	}
	sm.resident = make([]bool, h.NLayer*sm.ne)
	sm.touched = make([]int32, h.NLayer*sm.ne)
	return sm, nil
}

func (sm *sim) idx(k cache.Key) int { return k.Layer*sm.ne + k.Expert }

// isResident reports whether k is in the simulated cache.
func (sm *sim) isResident(k cache.Key) bool { return sm.resident[sm.idx(k)] }

func (sm *sim) eligible(k cache.Key) bool {
	if k.Layer < 0 || k.Layer >= sm.h.NLayer || k.Expert < 0 || k.Expert >= sm.ne {
		return false
	}
	i := sm.idx(k)
	return sm.resident[i] && sm.touched[i] != sm.batchNo
}

// batch replays batch number bi: its lookups, then the evictions that bring
// the cache back under its budget.
func (sm *sim) batch(bi int, b *Batch) error {
	res, pol := &sm.res, sm.pol
	sm.batchNo = int32(bi + 1)
	counted := sm.phase == CountAll || b.Phase == PhaseDecode
	pol.Batch(b.Step, b.Layer)
	eb := sm.h.Layers[b.Layer].ExpertBytes
	for _, a := range b.Accesses {
		i := sm.idx(a.Key)
		sm.touched[i] = sm.batchNo
		if a.Repeat {
			pol.OnHit(a.Key)
			continue
		}
		if counted {
			res.Lookups++
		}
		if sm.resident[i] {
			if counted {
				res.Hits++
			}
			pol.OnHit(a.Key)
			continue
		}
		if counted {
			res.BytesRead += eb
		}
		if refuse(pol, a.Key, sm.used+eb > sm.budget, sm.eligible) {
			res.Refused++
			continue
		}
		sm.resident[i] = true
		sm.used += eb
		pol.OnAdmit(a.Key, eb)
	}
	res.PeakBytes = max(res.PeakBytes, sm.used)
	for sm.used > sm.budget {
		v, ok := pol.Victim(sm.eligible)
		if !ok {
			break
		}
		if !sm.eligible(v) {
			return fmt.Errorf("%w: %s chose %v after batch %d, which is not an eligible resident key", ErrPolicy, pol.Name(), v, bi)
		}
		sm.resident[sm.idx(v)] = false
		sm.used -= sm.h.Layers[v.Layer].ExpertBytes
		res.Evictions++
		pol.OnEvict(v)
	}
	return nil
}
