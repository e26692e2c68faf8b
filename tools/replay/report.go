package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/pipe-engine/pipe/cache"
)

// ErrOptions is wrapped by errors about replay options (budgets, formats).
var ErrOptions = errors.New("replay: bad option")

// DefaultPolicies is what `pipe replay` compares when --policy is not given.
var DefaultPolicies = []string{"lru", "lfu", "random", "layer", "belady"}

// DefaultBudgetsMiB is what `pipe replay` sweeps when --budgets is not given.
var DefaultBudgetsMiB = []float64{250, 500, 750, 1000, 1500, 2000, 3000, 4000}

// SweepOptions configures Sweep.
type SweepOptions struct {
	Policies []string // cache.NewPolicy names
	Budgets  []int64  // bytes
	Phase    PhaseSel // which lookups count
	Seed     int64    // for "random"
}

// Report is the outcome of a Sweep over one trace.
type Report struct {
	Trace         string    `json:"trace"`
	Model         string    `json:"model"`
	Arch          string    `json:"arch"`
	NLayer        int       `json:"n_layer"`
	NExpert       int       `json:"n_expert"`
	NExpertUsed   int       `json:"n_expert_used"`
	WorkingSet    int64     `json:"working_set_bytes"`
	WorkingSetMiB float64   `json:"working_set_mib"`
	DecodeTokens  int       `json:"decode_tokens"`
	PrefillTokens int       `json:"prefill_tokens"`
	Phase         string    `json:"phase"`
	Seed          int64     `json:"seed"`
	Policies      []string  `json:"policies"`
	BudgetsMiB    []float64 `json:"budgets_mib"`
	// Results[i][j] is policy i at budget j.
	Results [][]ResultJSON `json:"results"`
}

// ResultJSON is one Result in report units.
type ResultJSON struct {
	Policy      string  `json:"policy"`
	BudgetMiB   float64 `json:"budget_mib"`
	HitPct      float64 `json:"hit_pct"`
	Lookups     int64   `json:"lookups"`
	Hits        int64   `json:"hits"`
	MiBPerToken float64 `json:"mib_read_per_token"`
	Evictions   int64   `json:"evictions"`
	PeakMiB     float64 `json:"peak_mib"`
}

const mib = 1 << 20

// ParseBudgets parses a comma-separated list of budgets in MiB ("250,500,1e3").
func ParseBudgets(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v >= 0 && v <= 1<<40) { // NaN fails both
			return nil, fmt.Errorf("%w: --budgets: %q is not a size in MiB in 0..2^40", ErrOptions, f)
		}
		out = append(out, int64(v*mib))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --budgets: empty list", ErrOptions)
	}
	return out, nil
}

// Sweep replays s through every policy at every budget. Each run gets a
// fresh policy; "belady" gets s.Future().
func Sweep(name string, s *Sequence, o SweepOptions) (*Report, error) {
	h := &s.Header
	r := &Report{
		Trace: name, Model: h.Model, Arch: h.Arch, NLayer: h.NLayer, NExpert: h.NExpert, NExpertUsed: h.NExpertUsed,
		WorkingSet: h.WorkingSet(), WorkingSetMiB: float64(h.WorkingSet()) / mib,
		DecodeTokens: s.DecodeTokens, PrefillTokens: s.PrefillTokens,
		Phase: o.Phase.String(), Seed: o.Seed,
	}
	for _, b := range o.Budgets {
		r.BudgetsMiB = append(r.BudgetsMiB, float64(b)/mib)
	}
	var future []cache.Key
	if len(o.Policies) == 0 || len(o.Budgets) == 0 {
		return nil, fmt.Errorf("%w: need at least one policy and one budget", ErrOptions)
	}
	for _, pn := range o.Policies {
		// Validate every name before the (slow) runs.
		p, err := cache.NewPolicy(pn, cache.PolicyOptions{Seed: o.Seed, Layers: h.NLayer, Future: []cache.Key{}})
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		r.Policies = append(r.Policies, p.Name())
	}
	for _, pn := range o.Policies {
		row := make([]ResultJSON, 0, len(o.Budgets))
		for _, b := range o.Budgets {
			opts := cache.PolicyOptions{Seed: o.Seed, Layers: h.NLayer}
			if strings.EqualFold(strings.TrimSpace(pn), "belady") {
				if future == nil {
					future = s.Future()
				}
				opts.Future = future
			}
			pol, err := cache.NewPolicy(pn, opts)
			if err != nil {
				return nil, fmt.Errorf("--policy: %w", err)
			}
			res, err := Simulate(s, pol, b, o.Phase)
			if err != nil {
				return nil, err
			}
			row = append(row, ResultJSON{
				Policy: res.Policy, BudgetMiB: float64(b) / mib, HitPct: res.HitRate(),
				Lookups: res.Lookups, Hits: res.Hits, MiBPerToken: res.MiBPerToken(),
				Evictions: res.Evictions, PeakMiB: float64(res.PeakBytes) / mib,
			})
		}
		r.Results = append(r.Results, row)
	}
	return r, nil
}

// Write renders the report as "text", "markdown" or "json".
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "text", "markdown":
	default:
		return fmt.Errorf("%w: --format %q: want text, markdown or json", ErrOptions, format)
	}
	md := format == "markdown"
	var b strings.Builder
	if md {
		fmt.Fprintf(&b, "### %s\n\n", r.Trace)
	} else {
		fmt.Fprintf(&b, "trace %s\n", r.Trace)
	}
	fmt.Fprintf(&b, "model %s  arch %s  %d layers  %d experts  top-%d\n", r.Model, r.Arch, r.NLayer, r.NExpert, r.NExpertUsed)
	if md {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "one-token working set T = %.1f MiB (Σ layers top-k × expert_bytes; LRU hits 0 %% below it)\n", r.WorkingSetMiB)
	if md {
		b.WriteString("\n")
	}
	who := "decode lookups"
	toks := r.DecodeTokens
	if r.Phase == "all" {
		who = "all lookups (prefill + decode)"
		toks += r.PrefillTokens
	}
	fmt.Fprintf(&b, "%d decode + %d prefill tokens; hit %% over %s; MiB read per token over %d tokens; seed %d\n\n",
		r.DecodeTokens, r.PrefillTokens, who, toks, r.Seed)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for _, tab := range []struct {
		title string
		val   func(ResultJSON) string
	}{
		{"hit %", func(x ResultJSON) string { return strconv.FormatFloat(x.HitPct, 'f', 1, 64) }},
		{"MiB read / token", func(x ResultJSON) string { return strconv.FormatFloat(x.MiBPerToken, 'f', 1, 64) }},
	} {
		if err := r.table(w, md, tab.title, tab.val); err != nil {
			return err
		}
	}
	return nil
}

func (r *Report) table(w io.Writer, md bool, title string, val func(ResultJSON) string) error {
	budgetCell := func(j int) string {
		s := strconv.FormatFloat(r.BudgetsMiB[j], 'f', -1, 64)
		if r.BudgetsMiB[j] < r.WorkingSetMiB {
			s += " (<T)"
		}
		return s
	}
	if md {
		var b strings.Builder
		fmt.Fprintf(&b, "| budget MiB — %s |", title)
		for _, p := range r.Policies {
			fmt.Fprintf(&b, " %s |", p)
		}
		b.WriteString("\n|---:|")
		for range r.Policies {
			b.WriteString("---:|")
		}
		b.WriteString("\n")
		for j := range r.BudgetsMiB {
			fmt.Fprintf(&b, "| %s |", budgetCell(j))
			for i := range r.Policies {
				fmt.Fprintf(&b, " %s |", val(r.Results[i][j]))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	var b strings.Builder // the table is written to w at once, so w's error is seen
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t", title)
	for _, p := range r.Policies {
		fmt.Fprintf(tw, "%s\t", p)
	}
	fmt.Fprintln(tw)
	for j := range r.BudgetsMiB {
		fmt.Fprintf(tw, "%s\t", budgetCell(j))
		for i := range r.Policies {
			fmt.Fprintf(tw, "%s\t", val(r.Results[i][j]))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
