// Package sample picks the next token from a logits vector.
//
// Role in the pipeline: after the model's LM head produces the logits of the
// last position, the decode loop calls Sampler.Sample, feeds the chosen id back
// with Accept (which also records it for the repeat penalty), and stops on the
// tokenizer's end-of-generation ids.
//
// The chain follows llama.cpp's common default order (common/sampling.cpp
// with the default sampler sequence, minus samplers pipe does not offer):
//
//	penalties → top-k → top-p → min-p → temperature → dist
//
// so top-p and min-p see the probabilities at temperature 1, and temperature
// only reshapes the survivors. Each step has llama.cpp's semantics:
//
//   - penalties: for every token among the last RepeatLastN accepted ids
//     (RepeatLastN < 0: all accepted ids), logit *= RepeatPenalty if it is
//     <= 0, else logit /= RepeatPenalty; then logit -= count*FreqPenalty +
//     PresencePenalty. Off when RepeatLastN == 0 or all three are neutral.
//     Like llama-cli, the caller should Accept the prompt tokens too.
//   - top-k: keep the K highest logits (K <= 0: off).
//   - top-p: softmax, keep the shortest prefix (by descending probability)
//     whose cumulative probability reaches P and has at least MinKeep tokens
//     (P >= 1: off).
//   - min-p: keep tokens with p >= MinP * p_max, i.e. logit >= max + ln(MinP),
//     and at least MinKeep tokens (MinP <= 0: off).
//   - temperature: logit /= Temp.
//   - dist: softmax and one draw from the sampler's own PRNG.
//
// Temp <= 0 is greedy: the argmax of the penalized logits, lowest id on exact
// ties (what llama.cpp's temperature-0 path and the golden runs do); the
// filters cannot change the argmax, so they are skipped. Candidates are
// ordered by logit, descending, lowest id first on ties, so results never
// depend on sort stability.
//
// Determinism: the PRNG is math/rand/v2's PCG seeded from Params.Seed, so the
// same seed, logits and accepted ids give the same tokens on every platform
// (it does not reproduce llama.cpp's mt19937 stream).
//
// A request's additions to the chain are a Chain's Hooks (chain.go): a logit
// bias, a mask (a grammar's hook point) and the capture of the chosen and
// most likely tokens' probabilities, as llama.cpp's server orders them. A
// Chain without hooks samples exactly as its Sampler.
//
// Concurrency: a Sampler holds history and PRNG state and is not safe for
// concurrent use. Sample does not modify or keep the caller's logits slice.
package sample

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrParams: a sampling parameter is out of range.
	ErrParams = errors.New("sample: invalid parameter")
	// ErrLogits: the logits vector is empty or has no finite value.
	ErrLogits = errors.New("sample: invalid logits")
)

// Params are the sampling settings (pipe's --temp, --top-k, --top-p, --min-p,
// --repeat-penalty, --repeat-last-n, --seed).
type Params struct {
	Temp            float32 // <= 0: greedy
	TopK            int     // <= 0: off
	TopP            float32 // >= 1: off
	MinP            float32 // <= 0: off
	RepeatPenalty   float32 // 1: off
	RepeatLastN     int     // 0: penalties off; < 0: whole history
	FreqPenalty     float32 // 0: off
	PresencePenalty float32 // 0: off
	MinKeep         int     // minimum survivors of top-p / min-p (0 behaves as 1)
	Seed            uint64
}

// Validate reports the first out-of-range parameter.
func (p Params) Validate() error {
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	for _, f := range []struct {
		name string
		v    float32
	}{{"temp", p.Temp}, {"top-p", p.TopP}, {"min-p", p.MinP}, {"repeat-penalty", p.RepeatPenalty}, {"frequency-penalty", p.FreqPenalty}, {"presence-penalty", p.PresencePenalty}} {
		if bad(f.v) {
			return fmt.Errorf("--%s %v: %w (not finite)", f.name, f.v, ErrParams)
		}
	}
	switch {
	case p.RepeatPenalty <= 0:
		return fmt.Errorf("--repeat-penalty %v: %w (must be > 0)", p.RepeatPenalty, ErrParams)
	case p.TopP < 0:
		return fmt.Errorf("--top-p %v: %w (must be >= 0)", p.TopP, ErrParams)
	case p.MinP > 1:
		return fmt.Errorf("--min-p %v: %w (must be <= 1)", p.MinP, ErrParams)
	case p.MinKeep < 0:
		return fmt.Errorf("min-keep %d: %w (must be >= 0)", p.MinKeep, ErrParams)
	}
	return nil
}

// Candidate is one surviving token and its final probability.
type Candidate struct {
	ID    int32
	Logit float32 // after penalties and temperature
	P     float64
}

// Sampler applies the chain. Not safe for concurrent use.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	hist   []int32 // ring of the last RepeatLastN accepted ids (all when < 0)
	head   int
	count  map[int32]int
	cand   []Candidate
	sorted []Candidate
	work   []float32
	kheap  []Candidate // top-k's min-heap by better (worst on top)
}

// New makes a Sampler.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{p: p, count: make(map[int32]int)}
	s.Reset()
	return s, nil
}

// Params returns the sampler's settings.
func (s *Sampler) Params() Params { return s.p }

// Reset forgets the accepted history and reseeds the PRNG from Params.Seed.
func (s *Sampler) Reset() {
	s.rng = rand.New(rand.NewPCG(s.p.Seed, s.p.Seed^0x9E3779B97F4A7C15))
	s.hist = s.hist[:0]
	s.head = 0
	clear(s.count)
}

// Accept records id as generated (or as a prompt token) for the penalties.
func (s *Sampler) Accept(id int32) {
	n := s.p.RepeatLastN
	if n == 0 {
		return
	}
	if n > 0 && len(s.hist) == n {
		old := s.hist[s.head]
		if s.count[old]--; s.count[old] <= 0 {
			delete(s.count, old)
		}
		s.hist[s.head] = id
		s.head = (s.head + 1) % n
	} else {
		s.hist = append(s.hist, id)
	}
	s.count[id]++
}

// AcceptAll calls Accept for each id.
func (s *Sampler) AcceptAll(ids []int32) {
	for _, id := range ids {
		s.Accept(id)
	}
}

// Greedy returns the index of the largest logit, the lowest index on exact
// ties; NaN entries are ignored.
func Greedy(logits []float32) (int32, error) {
	best := -1
	for i, l := range logits {
		if l != l {
			continue
		}
		if best < 0 || l > logits[best] {
			best = i
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("%d logits, none usable: %w", len(logits), ErrLogits)
	}
	return int32(best), nil
}

func (s *Sampler) penaltiesOn() bool {
	p := s.p
	return p.RepeatLastN != 0 && (p.RepeatPenalty != 1 || p.FreqPenalty != 0 || p.PresencePenalty != 0)
}

func (s *Sampler) penalize(id int32, l float32) float32 {
	c, ok := s.count[id]
	if !ok {
		return l
	}
	if l <= 0 {
		l *= s.p.RepeatPenalty
	} else {
		l /= s.p.RepeatPenalty
	}
	pres := float32(0)
	if c > 0 {
		pres = s.p.PresencePenalty
	}
	return l - float32(float32(c)*s.p.FreqPenalty) - pres // no FMA on arm64
}

// better orders candidates: higher logit first, lower id on ties.
func better(a, b Candidate) bool {
	return a.Logit > b.Logit || (a.Logit == b.Logit && a.ID < b.ID)
}

func cmpCand(a, b Candidate) int {
	if c := cmp.Compare(b.Logit, a.Logit); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// worse is better reversed: a min-heap by worse keeps the worst on top.
func worse(a, b Candidate) bool { return better(b, a) }

// The heaps below are slices of candidates ordered by first (the root is
// the candidate first puts ahead of every other); hand-written rather than
// container/heap, whose interface boxes every pushed and popped candidate.

// siftUp restores the heap order after h[j] was placed.
func siftUp(h []Candidate, j int, first func(a, b Candidate) bool) {
	for j > 0 {
		i := (j - 1) / 2
		if !first(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

// siftDown restores the heap order below h[i].
func siftDown(h []Candidate, i int, first func(a, b Candidate) bool) {
	for {
		j := 2*i + 1
		if j >= len(h) {
			return
		}
		if r := j + 1; r < len(h) && first(h[r], h[j]) {
			j = r
		}
		if !first(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// Candidates runs the chain except the final draw and returns the surviving
// tokens with their probabilities, most likely first. The slice is reused by
// the next call. With Temp <= 0 it returns the single greedy token with P = 1.
func (s *Sampler) Candidates(logits []float32) ([]Candidate, error) {
	if len(logits) == 0 {
		return nil, fmt.Errorf("empty logits: %w", ErrLogits)
	}
	work := s.penalized(logits)
	s.cand = s.cand[:0]
	if s.p.Temp <= 0 {
		best, err := Greedy(work)
		if err != nil {
			return nil, err
		}
		s.cand = append(s.cand, Candidate{ID: best, Logit: work[best], P: 1})
		return s.cand, nil
	}
	minKeep := max(s.p.MinKeep, 1)
	topPDone := false
	if k := s.p.TopK; k > 0 && k < len(work) {
		s.topK(work, k)
	} else {
		topPDone = s.sortedSurvivors(work, minKeep)
	}
	if len(s.cand) == 0 {
		return nil, fmt.Errorf("%d logits, none finite: %w", len(logits), ErrLogits)
	}
	// top-p on temperature-1 probabilities.
	if s.p.TopP < 1 && !topPDone {
		s.cutTopP(minKeep)
	}
	// min-p relative to the most likely token.
	if s.p.MinP > 0 {
		minLogit := float64(s.cand[0].Logit) + math.Log(float64(s.p.MinP))
		i := 1
		for ; i < len(s.cand); i++ {
			if float64(s.cand[i].Logit) < minLogit && i >= minKeep {
				break
			}
		}
		s.cand = s.cand[:i]
	}
	for i := range s.cand {
		s.cand[i].Logit /= s.p.Temp
	}
	softmax(s.cand)
	return s.cand, nil
}

// penalized is logits with the penalties applied, to a copy touching only
// the remembered ids; without penalties it is the caller's slice, only read.
func (s *Sampler) penalized(logits []float32) []float32 {
	if !s.penaltiesOn() || len(s.count) == 0 {
		return logits
	}
	s.work = append(s.work[:0], logits...)
	for id := range s.count {
		if id >= 0 && int(id) < len(s.work) {
			s.work[id] = s.penalize(id, s.work[id])
		}
	}
	return s.work
}

// usable: a logit that can be sampled (not NaN, not -Inf).
func usable(l float32) bool { return l == l && !math.IsInf(float64(l), -1) }

// topK sets s.cand to the k best usable logits of work, sorted, through a
// bounded min-heap: O(V log k).
func (s *Sampler) topK(work []float32, k int) {
	s.kheap = s.kheap[:0]
	for i, l := range work {
		if !usable(l) {
			continue
		}
		c := Candidate{ID: int32(i), Logit: l}
		if len(s.kheap) < k {
			s.kheap = append(s.kheap, c)
			siftUp(s.kheap, len(s.kheap)-1, worse)
		} else if better(c, s.kheap[0]) {
			s.kheap[0] = c
			siftDown(s.kheap, 0, worse)
		}
	}
	s.cand = append(s.cand, s.kheap...)
	slices.SortFunc(s.cand, cmpCand)
}

// sortedSurvivors sets s.cand to every usable logit of work without top-k:
// it drops what min-p drops before ordering, and with top-p orders only
// what top-p keeps (then it reports that top-p is done).
func (s *Sampler) sortedSurvivors(work []float32, minKeep int) (topPDone bool) {
	for i, l := range work {
		if usable(l) {
			s.cand = append(s.cand, Candidate{ID: int32(i), Logit: l})
		}
	}
	if len(s.cand) == 0 {
		return false
	}
	if s.p.TopP < 1 {
		// Normalise over all candidates (top-p's probabilities).
		softmax(s.cand)
	}
	if s.p.MinP > 0 {
		s.preMinP(minKeep)
	}
	if s.p.TopP < 1 {
		s.heapTopP(minKeep)
		return true
	}
	slices.SortFunc(s.cand, cmpCand)
	return false
}

// preMinP: min-p and top-p both keep a prefix of the sorted order, and
// min-p's threshold is known before sorting: drop what min-p would drop
// first, so only the survivors are ordered.
func (s *Sampler) preMinP(minKeep int) {
	maxL := s.cand[0].Logit
	for _, c := range s.cand {
		maxL = max(maxL, c.Logit)
	}
	thr := float64(maxL) + math.Log(float64(s.p.MinP))
	s.sorted = s.sorted[:0]
	for _, c := range s.cand {
		if float64(c.Logit) >= thr {
			s.sorted = append(s.sorted, c)
		}
	}
	if len(s.sorted) >= minKeep {
		s.cand = append(s.cand[:0], s.sorted...)
	}
}

// heapTopP is top-p over unsorted candidates: pop from a max-heap until the
// mass reaches P; s.cand becomes what was popped, in order.
func (s *Sampler) heapTopP(minKeep int) {
	h := s.cand
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i, better)
	}
	s.sorted = s.sorted[:0]
	cum := 0.0
	for len(h) > 0 {
		c := h[0]
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		siftDown(h, 0, better)
		s.sorted = append(s.sorted, c)
		cum += c.P
		if cum >= float64(s.p.TopP) && len(s.sorted) >= minKeep {
			break
		}
	}
	s.cand = append(s.cand[:0], s.sorted...)
}

// cutTopP is top-p over sorted candidates, on temperature-1 probabilities.
func (s *Sampler) cutTopP(minKeep int) {
	softmax(s.cand)
	cum := 0.0
	last := len(s.cand)
	for i := range s.cand {
		cum += s.cand[i].P
		if cum >= float64(s.p.TopP) && i+1 >= minKeep {
			last = i + 1
			break
		}
	}
	s.cand = s.cand[:last]
}

// softmax sets P of sorted candidates (the first has the largest logit).
func softmax(c []Candidate) {
	maxL := float64(c[0].Logit)
	sum := 0.0
	for i := range c {
		p := math.Exp(float64(c[i].Logit) - maxL)
		c[i].P = p
		sum += p
	}
	for i := range c {
		c[i].P /= sum
	}
}

// Sample runs the chain on logits and draws one token id. It does not call
// Accept.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	c, err := s.Candidates(logits)
	if err != nil {
		return 0, err
	}
	return s.draw(c), nil
}

// draw picks one of Candidates' survivors by their probabilities.
func (s *Sampler) draw(c []Candidate) int32 {
	if len(c) == 1 {
		return c[0].ID
	}
	u := s.rng.Float64()
	cum := 0.0
	for _, x := range c {
		cum += x.P
		if u < cum {
			return x.ID
		}
	}
	return c[len(c)-1].ID // rounding: cum ended just below 1
}

// String describes the effective chain, e.g. for the run log:
// "penalties(repeat=1.10 freq=0.00 present=0.00 last_n=64) → top-k 40 →
// top-p 0.95 → min-p 0.05 → temp 0.80 → dist(seed=42)", or "greedy".
func (p Params) String() string {
	var parts []string
	if p.RepeatLastN != 0 && (p.RepeatPenalty != 1 || p.FreqPenalty != 0 || p.PresencePenalty != 0) {
		parts = append(parts, fmt.Sprintf("penalties(repeat=%.2f freq=%.2f present=%.2f last_n=%d)", p.RepeatPenalty, p.FreqPenalty, p.PresencePenalty, p.RepeatLastN))
	}
	if p.Temp <= 0 {
		return strings.Join(append(parts, "greedy"), " → ")
	}
	if p.TopK > 0 {
		parts = append(parts, fmt.Sprintf("top-k %d", p.TopK))
	}
	if p.TopP < 1 {
		parts = append(parts, fmt.Sprintf("top-p %.2f", p.TopP))
	}
	if p.MinP > 0 {
		parts = append(parts, fmt.Sprintf("min-p %.2f", p.MinP))
	}
	parts = append(parts, fmt.Sprintf("temp %.2f", p.Temp), fmt.Sprintf("dist(seed=%d)", p.Seed))
	return strings.Join(parts, " → ")
}
