package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/warmstart"
)

// Warm-start replay: the engine saves a run's hot set (warmstart.HotSet: how
// often every expert was routed) and reads its hottest experts into the
// cache at the next start. WarmStart measures that offline on a trace: the
// first half of the decode tokens (with the prefill before them) is the
// earlier run, whose routings make the hot set; the second half is the next
// run, a new process, replayed three ways — cold (empty cache), warm (the
// cache first filled with the hot set's hottest experts up to the budget,
// hottest first, as the engine's warm start does) and continued (the cache as
// the first half left it, as in a server that stays up) — and compared on the
// hit % of its first FirstTokens decode tokens and of all of them.

// WarmOptions configure WarmStart.
type WarmOptions struct {
	Policies    []string // cache.NewPolicy names ("belady" is refused: it needs the future)
	Budgets     []int64  // bytes
	FirstTokens int      // decode tokens of the head window (<= 0: 20)
	Seed        int64
}

// WarmRow is one policy at one budget.
type WarmRow struct {
	Policy    string  `json:"policy"`
	BudgetMiB float64 `json:"budget_mib"`
	Preloaded int     `json:"preloaded_experts"` // experts the warm start read
	// Hit % of the head window / of the whole second half.
	ColdHead      float64 `json:"cold_head_hit_pct"`
	WarmHead      float64 `json:"warm_head_hit_pct"`
	ContinuedHead float64 `json:"continued_head_hit_pct"`
	ColdAll       float64 `json:"cold_hit_pct"`
	WarmAll       float64 `json:"warm_hit_pct"`
	ContinuedAll  float64 `json:"continued_hit_pct"`
}

// WarmReport is the outcome of WarmStart on one trace.
type WarmReport struct {
	Trace        string    `json:"trace"`
	Model        string    `json:"model"`
	FirstTokens  int       `json:"first_tokens"`
	FirstHalf    int       `json:"first_half_decode_tokens"`
	SecondHalf   int       `json:"second_half_decode_tokens"`
	PrefillTurns int       `json:"prefill_tokens_in_first_half"`
	Rows         []WarmRow `json:"rows"`
}

// Split cuts s before its middle decode token: first has every batch before
// it (prefill included), second the rest.
func Split(s *Sequence) (first, second *Sequence) {
	return s.cut(s.DecodeTokens / 2)
}

// Head is the part of s up to (not including) its n-th decode token.
func Head(s *Sequence, n int) *Sequence {
	h, _ := s.cut(n)
	return h
}

// cut splits s before its n-th decode token (0-based).
func (s *Sequence) cut(n int) (*Sequence, *Sequence) {
	type tok struct{ turn, step int }
	seen := map[tok]bool{}
	i := 0
	for ; i < len(s.Batches); i++ {
		b := &s.Batches[i]
		if b.Phase != PhaseDecode {
			continue
		}
		t := tok{b.Turn, b.Step}
		if !seen[t] {
			if len(seen) == n {
				break
			}
			seen[t] = true
		}
	}
	return s.sub(s.Batches[:i]), s.sub(s.Batches[i:])
}

// sub is a sequence of batches bs with s's header and token counts.
func (s *Sequence) sub(bs []Batch) *Sequence {
	type tok struct{ turn, phase, step int }
	out := &Sequence{Header: s.Header, Batches: bs}
	seen := map[tok]bool{}
	for _, b := range bs {
		for t := 0; t < b.Tokens; t++ {
			// A prefill batch holds several tokens from b.Step on; a decode batch one.
			k := tok{b.Turn, b.Phase, b.Step + t}
			if seen[k] {
				continue
			}
			seen[k] = true
			if b.Phase == PhaseDecode {
				out.DecodeTokens++
			} else {
				out.PrefillTokens++
			}
		}
	}
	return out
}

// HotSet is the popularity of every routing in s (each access, prefill and
// decode: what the engine counts), for a model of the trace's shape.
func HotSet(s *Sequence) *warmstart.HotSet {
	shape := make([]int, s.Header.NLayer)
	for i := range shape {
		shape[i] = s.Header.NExpert
	}
	h := warmstart.NewHotSet(warmstart.ModelID{}, shape)
	for _, b := range s.Batches {
		for _, a := range b.Accesses {
			h.Add(a.Key.Layer, []int{a.Key.Expert})
		}
	}
	return h
}

// preload is s with the warm start in front: one uncounted batch per hot
// expert, hottest first, while they fit in budget.
func preload(s *Sequence, hot []warmstart.Key, budget int64) (*Sequence, int) {
	var bs []Batch
	var used int64
	for _, k := range hot {
		eb := s.Header.Layers[k.Layer].ExpertBytes
		if used+eb > budget {
			break
		}
		used += eb
		bs = append(bs, Batch{Phase: PhasePrefill, Step: -1, Layer: k.Layer, Accesses: []Access{{Key: cache.Key(k)}}})
	}
	n := len(bs)
	out := *s
	out.Batches = append(bs, s.Batches...)
	return &out, n
}

// WarmStart replays s's second half cold, warm-started and continued, for
// every policy and budget (see the comment at the top of this file).
func WarmStart(name string, s *Sequence, o WarmOptions) (*WarmReport, error) {
	if o.FirstTokens <= 0 {
		o.FirstTokens = 20
	}
	if len(o.Policies) == 0 || len(o.Budgets) == 0 {
		return nil, fmt.Errorf("%w: need at least one policy and one budget", ErrOptions)
	}
	first, second := Split(s)
	if second.DecodeTokens == 0 {
		return nil, fmt.Errorf("%w: %s has %d decode tokens: nothing to split", ErrOptions, name, s.DecodeTokens)
	}
	head := Head(second, o.FirstTokens)
	hot := HotSet(first).Hottest(int(^uint(0) >> 1))
	both := &Sequence{Header: s.Header, Batches: append(append([]Batch(nil), first.Batches...), head.Batches...)}
	whole := &Sequence{Header: s.Header, Batches: append(append([]Batch(nil), first.Batches...), second.Batches...)}
	r := &WarmReport{Trace: name, Model: s.Header.Model, FirstTokens: min(o.FirstTokens, second.DecodeTokens),
		FirstHalf: first.DecodeTokens, SecondHalf: second.DecodeTokens, PrefillTurns: first.PrefillTokens}
	for _, pn := range o.Policies {
		if strings.EqualFold(strings.TrimSpace(pn), "belady") {
			return nil, fmt.Errorf("%w: --policy belady: the warm-start replay needs online policies", ErrOptions)
		}
		for _, b := range o.Budgets {
			sim := func(q *Sequence) (Result, error) {
				pol, err := cache.NewPolicy(pn, cache.PolicyOptions{Seed: o.Seed, Layers: s.Header.NLayer})
				if err != nil {
					return Result{}, fmt.Errorf("--policy: %w", err)
				}
				return Simulate(q, pol, b, CountDecode)
			}
			row := WarmRow{Policy: pn, BudgetMiB: float64(b) / mib}
			var err error
			row.ColdHead, row.ColdAll, err = headAndAll(sim, head, second, nil)
			if err != nil {
				return nil, err
			}
			wh, n := preload(head, hot, b)
			wa, _ := preload(second, hot, b)
			row.Preloaded = n
			if row.WarmHead, row.WarmAll, err = headAndAll(sim, wh, wa, nil); err != nil {
				return nil, err
			}
			if row.ContinuedHead, row.ContinuedAll, err = headAndAll(sim, both, whole, first); err != nil {
				return nil, err
			}
			r.Rows = append(r.Rows, row)
		}
	}
	return r, nil
}

// headAndAll replays head and all and returns their hit %; with prefix, the
// lookups of prefix (replayed alone: a deterministic policy makes the same
// choices on it) are taken out of both.
func headAndAll(sim func(*Sequence) (Result, error), head, all, prefix *Sequence) (float64, float64, error) {
	var base Result
	if prefix != nil {
		var err error
		if base, err = sim(prefix); err != nil {
			return 0, 0, err
		}
	}
	pct := func(q *Sequence) (float64, error) {
		res, err := sim(q)
		if err != nil {
			return 0, err
		}
		n := res.Lookups - base.Lookups
		if n <= 0 {
			return 0, nil
		}
		return 100 * float64(res.Hits-base.Hits) / float64(n), nil
	}
	h, err := pct(head)
	if err != nil {
		return 0, 0, err
	}
	a, err := pct(all)
	return h, a, err
}

// Write renders the report as text or markdown.
func (r *WarmReport) Write(w io.Writer, md bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "warm start on %s (%s): hot set from the first %d decode tokens (and %d prefill tokens), measured on the next %d as a new process\n",
		r.Trace, r.Model, r.FirstHalf, r.PrefillTurns, r.SecondHalf)
	if md {
		b.WriteString("\n")
	}
	head := []string{"policy", "budget MiB", "preloaded", "first " + strconv.Itoa(r.FirstTokens) + ": cold", "warm", "continued", "all: cold", "warm", "continued"}
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	rows := [][]string{}
	for _, x := range r.Rows {
		rows = append(rows, []string{x.Policy, strconv.FormatFloat(x.BudgetMiB, 'f', -1, 64), strconv.Itoa(x.Preloaded),
			f1(x.ColdHead), f1(x.WarmHead), f1(x.ContinuedHead), f1(x.ColdAll), f1(x.WarmAll), f1(x.ContinuedAll)})
	}
	if md {
		b.WriteString("| " + strings.Join(head, " | ") + " |\n|---|" + strings.Repeat("---:|", len(head)-1) + "\n")
		for _, row := range rows {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}
