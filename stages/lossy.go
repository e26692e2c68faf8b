package stages

import (
	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/router"
)

// lossyStage applies the lossy routing modes (Config.Lossy) to a decode
// step's routing, between the router and the FFN: what it skips is neither
// read nor computed. The route observer (OnRoute) sees the router's choice
// before it, so a route trace records what the router wanted.
type lossyStage struct {
	sel    router.Selector
	src    expertSource
	layer  int // the layer being routed, for cached
	cached func(expert int) bool
}

func newLossyStage(l router.Lossy, src expertSource) *lossyStage {
	st := &lossyStage{sel: router.Selector{Lossy: l}, src: src}
	st.cached = func(x int) bool { return st.src.resident(cache.Key{Layer: st.layer, Expert: x}) }
	return st
}

// apply adjusts one token's routing of layer.
func (l *lossyStage) apply(spec model.RouterSpec, layer int, logits []float32, ids []int, w, probs []float32) error {
	l.layer = layer
	return l.sel.Apply(spec, logits, ids, w, probs, l.cached)
}

// skips is what the modes changed since Open (zero when they are off).
func (p *pipeline) skips() metrics.Skips {
	if p.lossy == nil {
		return metrics.Skips{}
	}
	return p.lossy.sel.Skips
}
