package model

// latent.go: multi-head latent attention (DeepSeek-V2's MLA), a hook of the
// shared decoder block: a layer whose Attention has a Latent runs it in
// place of the standard attention. It is llama.cpp's absorbed form ("MLA
// with MQA", the graph it builds when the file has attn_k_b and attn_v_b):
//
//	q       = Wq h                    (or Wq_b RMSNorm(Wq_a h)·q_a_norm)
//	c, kpe  = Wkv_a h                 (c: Rank wide, kpe: RoPE wide)
//	cache  ← [RMSNorm(c)·kv_a_norm, rope(kpe)]          (one row per position)
//	per head i: Q_i = [Wk_b,i q_nope,i, rope(q_pe,i)]   (Rank + RoPE wide)
//	            o_i = Wv_b,i Σ_j softmax(scale Q_i·K_j) c_j
//	            o_i ·= σ(Wgate,i h)                      (only with a Gate: bailingmoe3)
//	x += Wo [o_0 … o_{n_head-1}]
//
// Every head reads the one cached row per position (one KV head), whose
// first Rank columns are also the values: the cache holds Rank + RoPE
// floats per position and layer (a K-only State layer).

import "fmt"

// Latent is one layer's latent attention. The Attention around it supplies
// Norm, Wo and the geometry (NHead query heads over one KV head of
// Rank + RoPE, Scale).
type Latent struct {
	Rank    int // kv_lora_rank: the cached latent's width
	NoPE    int // a query head's unrotated width
	RoPE    int // the rotated width of query heads and of the cached key part
	VDim    int // a value head's width after Wv_b
	Rope    NormRotation
	WqA     Weight    // attn_q_a (Data nil: Wq reads the normed input)
	QANorm  []float32 // attn_q_a_norm
	Wq      Weight    // attn_q, or attn_q_b after WqA
	WkvA    Weight    // attn_kv_a_mqa: Rank + RoPE rows
	KVANorm []float32 // attn_kv_a_norm
	WkB     []Weight  // attn_k_b, per head: Rank rows of NoPE
	WvB     []Weight  // attn_v_b, per head: VDim rows of Rank
	// Gate (optional, Data nil: none) is a head-wise output gate of
	// n_head rows over the normed input: head i's output is multiplied by
	// σ(Gate_i·h) before Wo (bailingmoe3's attn_gate).
	Gate Weight
}

// LatentGeom is the geometry of a latent attention layer of nHead heads:
// one KV head as wide as the cached row.
func LatentGeom(nHead, rank, rope int, scale float32) Geom {
	return Geom{NHead: nHead, NHeadKV: 1, HeadDim: rank + rope, Scale: scale}
}

// latentAttention is attention for a layer with a Latent (see the file
// comment); x is the residual stream, updated in place.
func (p *Pass) latentAttention(st *State, l int, a *Attention, x []float32) error {
	m, n, nh := a.Latent, p.N, a.NHead
	kw, qw := m.Rank+m.RoPE, m.NoPE+m.RoPE
	h := p.h
	p.Norm(h, x, a.Norm)
	q := p.Buf(n * nh * qw)
	if m.WqA.Data != nil {
		qa := p.Buf(n * m.WqA.Rows)
		if err := p.MatMul(&m.WqA, h, qa); err != nil {
			return err
		}
		p.Norm(qa, qa, m.QANorm)
		h = qa
	}
	if err := p.MatMul(&m.Wq, h, q); err != nil {
		return err
	}
	kv := p.Buf(n * kw)
	if err := p.MatMul(&m.WkvA, p.h, kv); err != nil {
		return err
	}
	for t := 0; t < n; t++ {
		row := kv[t*kw : (t+1)*kw]
		m.Rope.ApplyNorm(row[m.Rank:], p.Pos0+t)
		RMSNorm(row[:m.Rank], row[:m.Rank], p.Eps, m.KVANorm)
		st.Store(l, p.Pos0+t, row, nil)
	}
	qc, err := p.absorbQueries(m, nh, q)
	if err != nil {
		return err
	}
	kqv := p.Buf(n * nh * m.Rank)
	end := p.Pos0 + n
	err = p.Pool.Parallel(nh, func(i int) {
		args := AttnArgs{Layer: l, Dim: kw, VDim: m.Rank, Scale: a.Scale}
		sc := p.scores[i*end : (i+1)*end]
		for t := 0; t < n; t++ {
			args.Hi = p.Pos0 + t
			o := t*nh + i
			st.Attend(&args, qc[o*kw:(o+1)*kw], sc, kqv[o*m.Rank:(o+1)*m.Rank])
		}
	})
	if err != nil {
		return err
	}
	att := p.Buf(n * nh * m.VDim)
	if err := p.perHead(m.WvB, nh, kqv, m.Rank, 0, m.Rank, att, m.VDim, 0); err != nil {
		return err
	}
	if err := p.latentGate(m, nh, att); err != nil {
		return err
	}
	o := p.o
	if err := p.MatMul(&a.Wo, att, o); err != nil {
		return err
	}
	for i := range x {
		x[i] = o[i] + x[i]
	}
	return nil
}

// latentGate multiplies each head's output in att (per token and head,
// VDim wide) by σ(Gate_i·h) of the pass's normed input p.h, as ggml's
// mul of the heads by the sigmoid of their gate; nothing without a Gate.
func (p *Pass) latentGate(m *Latent, nh int, att []float32) error {
	if m.Gate.Data == nil {
		return nil
	}
	g := p.Buf(p.N * nh)
	if err := p.MatMul(&m.Gate, p.h, g); err != nil {
		return err
	}
	for r, v := range g {
		s := Sigmoid(v)
		head := att[r*m.VDim : (r+1)*m.VDim]
		for i := range head {
			head[i] *= s
		}
	}
	return nil
}

// absorbQueries returns the N tokens' queries in the cache's space, per
// token and head [Wk_b,i q_nope, rope(q_pe)] (Rank + RoPE wide), from q (per
// token and head [q_nope, q_pe]).
func (p *Pass) absorbQueries(m *Latent, nh int, q []float32) ([]float32, error) {
	kw, qw := m.Rank+m.RoPE, m.NoPE+m.RoPE
	qc := p.Buf(p.N * nh * kw)
	if err := p.perHead(m.WkB, nh, q, qw, 0, m.NoPE, qc, kw, 0); err != nil {
		return nil, err
	}
	tr, _ := m.Rope.(TableNormRotation)
	var cs []float32
	if tr != nil {
		cs = p.cs[:tr.TableLen()]
	}
	for t := 0; t < p.N; t++ {
		pos := p.Pos0 + t
		if tr != nil {
			tr.Angles(pos, cs) // once per token, for all its heads
		}
		for i := 0; i < nh; i++ {
			pe := qc[(t*nh+i)*kw+m.Rank : (t*nh+i+1)*kw]
			copy(pe, q[(t*nh+i)*qw+m.NoPE:(t*nh+i+1)*qw])
			if tr != nil {
				tr.RotateNorm(pe, cs)
			} else {
				m.Rope.ApplyNorm(pe, pos)
			}
		}
	}
	return qc, nil
}

// perHead multiplies head i's slice of every token's rows by ws[i]: the
// input is columns [inOff, inOff+inW) of head i's inStride-wide block of
// in, the output columns [outOff, outOff+ws[i].Rows) of head i's
// outStride-wide block of out (ggml's mul_mat of a 3-D weight, one matrix
// per head, over all tokens).
func (p *Pass) perHead(ws []Weight, nh int, in []float32, inStride, inOff, inW int, out []float32, outStride, outOff int) error {
	if len(ws) != nh {
		return fmt.Errorf("model: %d per-head weights for %d heads", len(ws), nh)
	}
	n := p.N
	for i := range ws {
		w := &ws[i]
		xs, ys := p.Buf(n*inW), p.Buf(n*w.Rows)
		for t := 0; t < n; t++ {
			o := (t*nh+i)*inStride + inOff
			copy(xs[t*inW:(t+1)*inW], in[o:o+inW])
		}
		if err := p.MatMul(w, xs, ys); err != nil {
			return err
		}
		for t := 0; t < n; t++ {
			o := (t*nh+i)*outStride + outOff
			copy(out[o:o+w.Rows], ys[t*w.Rows:(t+1)*w.Rows])
		}
		p.next -= 2 // xs and ys are free again for the next head
	}
	return nil
}

// LoadLatent loads layer l's latent attention (MLA) as llama.cpp names its
// tensors: attn_q (or the attn_q_a, attn_q_a_norm, attn_q_b low-rank query
// when hp.MLA.QLoraRank > 0), attn_kv_a_mqa, attn_kv_a_norm, attn_k_b,
// attn_v_b, attn_norm and attn_output. A family adds what its variant has
// beside these (bailingmoe3's Gate) to the returned Attention's Latent.
func LoadLatent(ld *Loader, hp HParams, l int, g Geom, rope NormRotation) Attention {
	mla, nh, E := hp.MLA, hp.NHead, hp.NEmbd
	blk := func(name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }
	lat := &Latent{Rank: mla.KVLoraRank, NoPE: mla.KeyLength - hp.NRot, RoPE: hp.NRot, VDim: mla.ValLength, Rope: rope}
	qOut := nh * mla.KeyLength
	if mla.QLoraRank > 0 {
		lat.WqA = ld.Matrix(blk("attn_q_a.weight"), E, mla.QLoraRank)
		lat.QANorm = ld.Vector(blk("attn_q_a_norm.weight"), mla.QLoraRank)
		lat.Wq = ld.Matrix(blk("attn_q_b.weight"), mla.QLoraRank, qOut)
	} else {
		lat.Wq = ld.Matrix(blk("attn_q.weight"), E, qOut)
	}
	lat.WkvA = ld.Matrix(blk("attn_kv_a_mqa.weight"), E, mla.KVLoraRank+hp.NRot)
	lat.KVANorm = ld.Vector(blk("attn_kv_a_norm.weight"), mla.KVLoraRank)
	lat.WkB = ld.Heads(blk("attn_k_b.weight"), lat.NoPE, lat.Rank, nh)
	lat.WvB = ld.Heads(blk("attn_v_b.weight"), lat.Rank, lat.VDim, nh)
	return Attention{Geom: g, Latent: lat,
		Norm: ld.Vector(blk("attn_norm.weight"), E),
		Wo:   ld.Matrix(blk("attn_output.weight"), nh*mla.ValLength, E),
	}
}
