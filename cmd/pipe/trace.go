package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/replay"
)

// openTrace starts --route-trace: every (token, layer) routing of the run in
// route_trace v1, with the residency the cache had when the layer was looked
// up. It returns the function that flushes and closes the file.
func (r *runner) openTrace(modelPath string) (func(), error) {
	f, err := os.Create(r.c.RouteTrace)
	if err != nil {
		return nil, fmt.Errorf("--route-trace: %w", err)
	}
	bw := bufio.NewWriter(f)
	eng := r.m.Engine()
	d := eng.Desc()
	hp := d.HParams
	k := hp.NExpertUsed
	if r.c.NExpertUsed > 0 {
		k = r.c.NExpertUsed
	}
	hdr := replay.Header{Model: modelPath, Arch: d.Arch, NLayer: hp.NLayer, NExpert: hp.NExpert, NExpertUsed: k}
	perLayerDense := d.DenseBytes / int64(max(hp.NLayer, 1))
	for l := 0; l < hp.NLayer; l++ {
		var eb int64
		if l < len(d.ExpertBytes) {
			eb = d.ExpertBytes[l]
		}
		hdr.Layers = append(hdr.Layers, replay.LayerInfo{ExpertBytes: eb, DenseBytes: perLayerDense})
	}
	tw := replay.NewTraceWriter(bw, hdr)
	var werr error
	var experts []int
	var resident []bool
	r.m.OnRoute(func(rt decode.Route) {
		if werr != nil {
			return
		}
		c := eng.Cache()
		phase := replay.PhaseDecode
		if rt.Prefill {
			phase = replay.PhasePrefill
		}
		for t := range rt.IDs {
			experts = append(experts[:0], rt.IDs[t]...)
			resident = resident[:0]
			for _, e := range experts {
				resident = append(resident, c != nil && c.Contains(cache.Key{Layer: rt.Layer, Expert: e}))
			}
			if err := tw.Route(rt.Turn, phase, rt.Pos+t, rt.Layer, experts, rt.W[t], resident); err != nil {
				werr = fmt.Errorf("--route-trace: %w", err)
				return
			}
		}
	})
	return func() {
		r.m.OnRoute(nil)
		if err := tw.Close(); err != nil && werr == nil {
			werr = err
		}
		if err := bw.Flush(); err != nil && werr == nil {
			werr = err
		}
		if err := f.Close(); err != nil && werr == nil {
			werr = err
		}
		if werr != nil {
			r.g.Log.Error().Err(werr).Msg("route trace")
		}
	}, nil
}
