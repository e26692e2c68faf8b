package qwen3next

// inputs.go: the delta-net's input projections as Qwen3-Next's files store
// them (llama.cpp's build_qkvz and the ssm_ba split of
// build_layer_attn_linear).

import (
	"fmt"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/qwen35moe"
)

// inputs are one delta-net layer's input projections (qwen35moe.Projections):
//   - attn_qkv (the q, k and v heads, as qwen35moe) and attn_gate (z); or,
//     in files converted before llama.cpp split it, one ssm_in holding per
//     key head its q (hk), k (hk), v (r·hv) and z (r·hv) rows, r = nv/nk
//     value heads per key head;
//   - ssm_ba: per key head, its r value heads' β rows then their α rows.
type inputs struct {
	qkv, z model.Weight // attn_qkv, attn_gate (no Data with ssm_in)
	qkvz   model.Weight // ssm_in (no Data with attn_qkv)
	ba     model.Weight // ssm_ba
	S      int          // head width (ssm.state_size)
	nk, r  int          // key heads, value heads per key head
}

// loadInputs reads layer l's input projections: attn_qkv and attn_gate
// when the file has them, else ssm_in; and ssm_ba.
func loadInputs(ld *model.Loader, l, E int, g model.SSMGeom) qwen35moe.Projections {
	p := fmt.Sprintf("blk.%d.", l)
	in := &inputs{S: g.StateSize, nk: g.GroupCount, r: g.TimeStepRank / max(g.GroupCount, 1)}
	K, V := g.GroupCount*g.StateSize, g.TimeStepRank*g.StateSize
	if ld.Has(p+"attn_qkv.weight") || !ld.Has(p+"ssm_in.weight") {
		in.qkv = ld.Matrix(p+"attn_qkv.weight", E, 2*K+V)
		in.z = ld.Matrix(p+"attn_gate.weight", E, V)
	} else {
		in.qkvz = ld.Matrix(p+"ssm_in.weight", E, 2*K+2*V)
	}
	in.ba = ld.Matrix(p+"ssm_ba.weight", E, 2*g.TimeStepRank)
	return in
}

// Project implements qwen35moe.Projections.
func (in *inputs) Project(p *model.Pass, h, mixed, z, beta, alpha []float32) error {
	nv := in.nk * in.r
	ba := p.Buf(p.N * 2 * nv)
	if in.qkvz.Data == nil {
		if err := p.Project(h, []*model.Weight{&in.qkv, &in.z, &in.ba}, [][]float32{mixed, z, ba}); err != nil {
			return err
		}
	} else {
		qkvz := p.Buf(p.N * in.qkvz.Rows)
		if err := p.Project(h, []*model.Weight{&in.qkvz, &in.ba}, [][]float32{qkvz, ba}); err != nil {
			return err
		}
		in.splitQKVZ(qkvz, mixed, z, p.N)
	}
	in.splitBA(ba, beta, alpha, p.N)
	return nil
}

// splitBA copies the n tokens' β and α (ssm_ba's rows: per key head g its
// r β then its r α) into beta and alpha in value-head order (head g·r+i).
func (in *inputs) splitBA(ba, beta, alpha []float32, n int) {
	r, nv := in.r, in.nk*in.r
	for t := 0; t < n; t++ {
		row := ba[t*2*nv : (t+1)*2*nv]
		for g := 0; g < in.nk; g++ {
			copy(beta[t*nv+g*r:t*nv+(g+1)*r], row[g*2*r:g*2*r+r])
			copy(alpha[t*nv+g*r:t*nv+(g+1)*r], row[g*2*r+r:(g+1)*2*r])
		}
	}
}

// splitQKVZ copies the n tokens' ssm_in rows (per key head g: q, k, then
// its value heads' v and z) into mixed (all q heads, all k heads, all v
// heads: attn_qkv's order) and z.
func (in *inputs) splitQKVZ(qkvz, mixed, z []float32, n int) {
	S, nk, rS := in.S, in.nk, in.r*in.S
	K, V, W := nk*S, nk*rS, in.qkvz.Rows
	C := 2*K + V
	for t := 0; t < n; t++ {
		row, mx, zt := qkvz[t*W:(t+1)*W], mixed[t*C:(t+1)*C], z[t*V:(t+1)*V]
		for g := 0; g < nk; g++ {
			grp := row[g*(2*S+2*rS) : (g+1)*(2*S+2*rS)]
			copy(mx[g*S:(g+1)*S], grp[:S])
			copy(mx[K+g*S:K+(g+1)*S], grp[S:2*S])
			copy(mx[2*K+g*rS:2*K+(g+1)*rS], grp[2*S:2*S+rS])
			copy(zt[g*rS:(g+1)*rS], grp[2*S+rS:])
		}
	}
}
