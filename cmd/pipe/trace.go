package main

import (
	"fmt"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/tools/replay"
)

// openTrace starts --route-trace into out: every (token, layer) routing of
// the run in route_trace v1, with the residency the cache had when the layer
// was looked up. A write error stops the tracing and is kept in out (the
// token callback ends the run with it); closeTrace writes the rest.
func (r *runner) openTrace(modelPath string, out *output) {
	eng := r.m.Engine()
	d := eng.Desc()
	hp := d.HParams
	hdr := replay.Header{Model: modelPath, Arch: d.Arch, NLayer: hp.NLayer, NExpert: hp.NExpert, NExpertUsed: eng.Config().K}
	perLayerDense := d.DenseBytes / int64(max(hp.NLayer, 1))
	for l := 0; l < hp.NLayer; l++ {
		var eb int64
		if l < len(d.ExpertBytes) {
			eb = d.ExpertBytes[l]
		}
		hdr.Layers = append(hdr.Layers, replay.LayerInfo{ExpertBytes: eb, DenseBytes: perLayerDense})
	}
	tw := replay.NewTraceWriter(out, hdr)
	r.trace, r.traceW = out, tw
	var experts []int
	var resident []bool
	r.m.OnRoute(func(rt decode.Route) {
		if out.Err() != nil {
			return
		}
		phase := replay.PhaseDecode
		if rt.Prefill {
			phase = replay.PhasePrefill
		}
		for t := range rt.IDs {
			experts = append(experts[:0], rt.IDs[t]...)
			resident = resident[:0]
			for _, e := range experts {
				resident = append(resident, eng.Resident(rt.Layer, e))
			}
			if err := tw.Route(rt.Turn, phase, rt.Pos+t, rt.Layer, experts, rt.W[t], resident); err != nil {
				out.fail(fmt.Errorf("position %d layer %d: %w", rt.Pos+t, rt.Layer, err))
				return
			}
		}
	})
}

// closeTrace stops tracing and flushes the trace writer into its output
// (which the run closes with its other outputs).
func (r *runner) closeTrace() {
	if r.traceW == nil {
		return
	}
	r.m.OnRoute(nil)
	if err := r.traceW.Close(); err != nil {
		r.trace.fail(err)
	}
	r.traceW = nil
}
