package prefetch

import (
	"context"

	"github.com/pipe-engine/pipe/expert"
)

// Request is one message to the planner goroutine (Run), sent by the
// pipeline on the decode goroutine. A request carries a layer's demand
// lookups, a speculation, or both (the demand first). It travels by value
// and its slices are the sender's: the sender keeps them unchanged until
// Done answers (demand) or, for a speculation, until it sends the demand
// request that follows.
type Request struct {
	Step, Layer int
	// Experts are the demand lookups (nil: speculation only), sent to Out
	// as they become ready (Plan); Done then receives Plan's error.
	Experts []int
	Out     chan<- expert.Ready
	Done    chan<- error
	// Routed is the layer's whole routed set, on its first wave (Settle).
	Routed []int
	// SpecLayer is the layer to speculate for after the demand (-1: none):
	// from Set (a prompt pass's guessed set, SpeculateSet) when it is not
	// nil, else from the policy, told Guess first when it is a Guesser.
	SpecLayer int
	Guess     []int
	Set       []int
	// AnyLane lets every lane serve Set's reads (reader.Request.AnyLane),
	// outside --prefetch-lanes: a prompt pass's guess, right nearly always,
	// read while the layer before finishes and the next runs its attention,
	// when no demand read is queued and a lane held back would idle.
	AnyLane bool
}

// Run is the planner's goroutine: it serves requests, in order, until ctx
// ends, and then returns nil (a failed lookup is answered on the request's
// Done, it does not end the loop).
func (p *Planner) Run(ctx context.Context, reqs <-chan Request) error {
	g, _ := p.policy.(Guesser)
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-reqs:
			if r.Routed != nil {
				p.Settle(r.Layer, r.Routed)
			}
			if r.Experts != nil {
				err := p.Plan(ctx, r.Step, r.Layer, r.Experts, r.Out)
				r.Done <- err
				if err != nil {
					continue
				}
			}
			switch {
			case r.SpecLayer < 0:
			case r.Set != nil:
				p.SpeculateSet(r.SpecLayer, r.Set, r.AnyLane)
			default:
				if g != nil {
					g.SetGuess(r.SpecLayer, r.Guess)
				}
				p.Speculate(r.Step, r.SpecLayer)
			}
		}
	}
}
