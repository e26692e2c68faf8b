package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/router"
)

// Lossy replay: the lossy routing modes of router.Lossy (and, as the
// baseline they are measured against, a lower top-k) applied to every decode
// routing of a trace, with the residency the simulated cache has when the
// routing's layer is looked up — the engine's decision, offline. Prefill is
// replayed lossless (the modes apply to decode steps), warming the cache.
// A trace holds only the top-k of each routing, so --moe-substitute, which
// needs the router's scores of the experts it did not pick, cannot be
// replayed; drop and dynamic k need only the top-k weights.

// LossyMode is one setting to replay: a router.Lossy, or TopK > 0 (the
// first TopK slots by rank, weights rescaled to the routing's total: what
// --n-expert-used does, as the comparison).
type LossyMode struct {
	Name  string
	Lossy router.Lossy
	TopK  int
}

// ParseLossyModes parses "drop=0.75,dynamic-k=0.9,topk=4" (each item one
// mode; "off" is the lossless baseline, always replayed first).
func ParseLossyModes(s string) ([]LossyMode, error) {
	modes := []LossyMode{{Name: "off"}}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "off" {
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		x, err := strconv.ParseFloat(v, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("%w: --lossy %q: want drop=F, dynamic-k=P or topk=N", ErrOptions, f)
		}
		m := LossyMode{Name: f}
		switch k {
		case "drop":
			m.Lossy.Drop = float32(x)
		case "dynamic-k":
			m.Lossy.DynamicK = float32(x)
		case "topk":
			if m.TopK = int(x); float64(m.TopK) != x || m.TopK < 1 {
				return nil, fmt.Errorf("%w: --lossy %q: topk wants a whole number >= 1", ErrOptions, f)
			}
		case "substitute":
			return nil, fmt.Errorf("%w: --lossy %q: a route trace holds only each routing's top k, and substitution needs the router's scores of the experts it did not pick", ErrOptions, f)
		default:
			return nil, fmt.Errorf("%w: --lossy %q: want drop=F, dynamic-k=P or topk=N", ErrOptions, f)
		}
		if err := m.Lossy.Validate(); err != nil {
			return nil, fmt.Errorf("%w: --lossy %q: %w", ErrOptions, f, err)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// LossyResult is one mode at one budget.
type LossyResult struct {
	Mode      string  `json:"mode"`
	BudgetMiB float64 `json:"budget_mib"`
	HitPct    float64 `json:"hit_pct"`
	MiBPerTok float64 `json:"mib_read_per_token"`
	// ReadsAvoidedPct is the decode bytes read below the lossless replay's
	// at the same budget; WeightCutPct the router weight of the skipped
	// slots ÷ all decode weight; SkippedPct the skipped slots ÷ all.
	ReadsAvoidedPct float64 `json:"reads_avoided_pct"`
	WeightCutPct    float64 `json:"weight_discarded_pct"`
	SkippedPct      float64 `json:"slots_skipped_pct"`
}

// LossyReport is a lossy sweep over one trace.
type LossyReport struct {
	Trace        string          `json:"trace"`
	Arch         string          `json:"arch"`
	NExpertUsed  int             `json:"n_expert_used"`
	Policy       string          `json:"policy"`
	DecodeTokens int             `json:"decode_tokens"`
	Results      [][]LossyResult `json:"results"` // [mode][budget]
}

// LossySweep replays s under every mode at every budget with the policy
// named pol.
func LossySweep(name string, s *Sequence, pol string, budgets []int64, modes []LossyMode, seed int64) (*LossyReport, error) {
	r := &LossyReport{Trace: name, Arch: s.Header.Arch, NExpertUsed: s.Header.NExpertUsed, DecodeTokens: s.DecodeTokens}
	for _, m := range modes {
		row := make([]LossyResult, 0, len(budgets))
		for j, b := range budgets {
			p, err := cache.NewPolicy(pol, cache.PolicyOptions{Seed: seed, Layers: s.Header.NLayer})
			if err != nil {
				return nil, fmt.Errorf("--policy: %w", err)
			}
			r.Policy = p.Name()
			lr, err := replayLossy(s, p, b, m)
			if err != nil {
				return nil, err
			}
			if len(r.Results) > 0 { // modes[0] is "off"
				base := r.Results[0][j]
				if base.MiBPerTok > 0 {
					lr.ReadsAvoidedPct = 100 * (1 - lr.MiBPerTok/base.MiBPerTok)
				}
			}
			row = append(row, lr)
		}
		r.Results = append(r.Results, row)
	}
	return r, nil
}

// replayLossy replays s with mode m applied to every decode routing.
func replayLossy(s *Sequence, pol cache.Policy, budget int64, m LossyMode) (LossyResult, error) {
	sm, err := newSim(s, pol, budget, CountDecode)
	if err != nil {
		return LossyResult{}, err
	}
	sel := router.Selector{Lossy: m.Lossy}
	spec := model.RouterSpec{K: s.Header.NExpertUsed}
	var ids []int
	var w []float32
	var kept Batch
	var weight, cut float64
	var slots, skipped int64
	for bi := range s.Batches {
		b := &s.Batches[bi]
		if b.Phase != PhaseDecode || (!m.Lossy.On() && m.TopK == 0) {
			if err := sm.batch(bi, b); err != nil {
				return LossyResult{}, err
			}
			for _, a := range b.Accesses {
				if b.Phase == PhaseDecode {
					weight += float64(a.Weight)
					slots++
				}
			}
			continue
		}
		ids, w = ids[:0], w[:0]
		for _, a := range b.Accesses {
			ids = append(ids, a.Key.Expert)
			w = append(w, a.Weight)
			weight += float64(a.Weight)
		}
		slots += int64(len(ids))
		layer := b.Layer
		if m.TopK > 0 {
			for r := m.TopK; r < len(ids); r++ {
				ids[r] = -1
			}
		} else {
			spec.K = max(s.Header.NExpertUsed, len(ids))
			err := sel.Apply(spec, nil, ids, w, nil, func(x int) bool { return sm.isResident(cache.Key{Layer: layer, Expert: x}) })
			if err != nil {
				return LossyResult{}, fmt.Errorf("batch %d: %w", bi, err)
			}
		}
		kept = Batch{Turn: b.Turn, Phase: b.Phase, Step: b.Step, Layer: b.Layer, Tokens: b.Tokens, Accesses: kept.Accesses[:0]}
		for r, a := range b.Accesses {
			if ids[r] < 0 {
				cut += float64(a.Weight)
				skipped++
				continue
			}
			kept.Accesses = append(kept.Accesses, a)
		}
		if err := sm.batch(bi, &kept); err != nil {
			return LossyResult{}, err
		}
	}
	res := sm.res
	lr := LossyResult{Mode: m.Name, BudgetMiB: float64(budget) / mib, HitPct: res.HitRate(), MiBPerTok: res.MiBPerToken()}
	if weight > 0 {
		lr.WeightCutPct = 100 * cut / weight
	}
	if slots > 0 {
		lr.SkippedPct = 100 * float64(skipped) / float64(slots)
	}
	return lr, nil
}

// Write renders the report as a text or markdown table.
func (r *LossyReport) Write(w io.Writer, markdown bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s  arch %s  top-%d  policy %s  %d decode tokens (modes on decode routings; prefill lossless)\n\n",
		r.Trace, r.Arch, r.NExpertUsed, r.Policy, r.DecodeTokens)
	cols := []string{"mode", "budget MiB", "hit %", "MiB/token", "reads avoided %", "weight discarded %", "slots skipped %"}
	if markdown {
		b.WriteString("| " + strings.Join(cols, " | ") + " |\n|" + strings.Repeat("---|", len(cols)) + "\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	if !markdown {
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	for _, row := range r.Results {
		for _, x := range row {
			f := []string{x.Mode, fmt.Sprintf("%.0f", x.BudgetMiB), fmt.Sprintf("%.1f", x.HitPct), fmt.Sprintf("%.1f", x.MiBPerTok),
				fmt.Sprintf("%.1f", x.ReadsAvoidedPct), fmt.Sprintf("%.1f", x.WeightCutPct), fmt.Sprintf("%.1f", x.SkippedPct)}
			if markdown {
				b.WriteString("| " + strings.Join(f, " | ") + " |\n")
			} else {
				fmt.Fprintln(tw, strings.Join(f, "\t")+"\t")
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
