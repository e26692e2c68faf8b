package glm4moe

// nextn.go: the NextN / multi-token-prediction layers at the end of the
// file. llama.cpp's loader creates their tensors with TENSOR_SKIP (the
// tensor count must match; nothing is computed with them); this checks
// the same tensors, required and optional, by name and shape, without
// reading their data.

import (
	"fmt"
	"slices"

	"github.com/pipe-engine/pipe/model"
)

// nextnLayers is nextn_predict_layers (FamilyHP; 0 when absent).
func nextnLayers(d *model.Desc) int {
	own, _ := d.FamilyHP.(HParams)
	return own.NextN
}

// nextnTensor is one tensor llama.cpp creates for a NextN layer.
type nextnTensor struct {
	name     string
	dims     []int // ggml order
	optional bool
}

// nextnTensors is what llama.cpp's load_arch_tensors creates for NextN
// layer l: the layer's decoder block (its Q/K/V projections and biases
// optional, as create_tensor_qkv makes them for skipped layers) and the
// nextn.* projection, norms and optional embedding and head.
func nextnTensors(hp *model.HParams, l int) []nextnTensor {
	E, hd, V := hp.NEmbd, hp.HeadDim, hp.NVocab
	q, kv := hp.NHead*hd, hp.NHeadKV*hd
	t := func(name string, optional bool, dims ...int) nextnTensor {
		return nextnTensor{name: blk(l, name), dims: dims, optional: optional}
	}
	ts := []nextnTensor{
		t("attn_norm.weight", false, E),
		t("attn_q.weight", true, E, q), t("attn_k.weight", true, E, kv), t("attn_v.weight", true, E, kv),
		t("attn_q.bias", true, q), t("attn_k.bias", true, kv), t("attn_v.bias", true, kv),
		t("attn_output.weight", false, q, E),
		t("attn_q_norm.weight", true, hd), t("attn_k_norm.weight", true, hd),
		t("post_attention_norm.weight", false, E),
		t("nextn.eh_proj.weight", false, 2*E, E),
		t("nextn.enorm.weight", false, E),
		t("nextn.hnorm.weight", false, E),
		t("nextn.embed_tokens.weight", true, E, V),
		t("nextn.shared_head_head.weight", true, E, V),
		t("nextn.shared_head_norm.weight", true, E),
	}
	if l < hp.MoE.LeadingDense {
		return append(ts, t("ffn_gate.weight", false, E, hp.NFF), t("ffn_down.weight", false, hp.NFF, E), t("ffn_up.weight", false, E, hp.NFF))
	}
	F, N := hp.NFFExp, hp.NExpert
	ts = append(ts,
		t("ffn_gate_inp.weight", false, E, N), t("exp_probs_b.bias", false, N),
		t("ffn_gate_exps.weight", false, E, F, N), t("ffn_down_exps.weight", false, F, E, N), t("ffn_up_exps.weight", false, E, F, N))
	if sh := F * hp.MoE.NShared; sh > 0 {
		ts = append(ts, t("ffn_gate_shexp.weight", false, E, sh), t("ffn_down_shexp.weight", false, sh, E), t("ffn_up_shexp.weight", false, E, sh))
	}
	return ts
}

// checkNextN checks NextN layer l's tensors: every required one present,
// every present one of llama.cpp's shape.
func checkNextN(d *model.Desc, l int) error {
	for _, nt := range nextnTensors(&d.HParams, l) {
		ti, ok := d.Tensor(nt.name)
		if !ok {
			if nt.optional {
				continue
			}
			return fmt.Errorf("%w: tensor %s (NextN layer %d) is missing", model.ErrBadModel, nt.name, l)
		}
		got := make([]int, len(ti.Dims))
		for i, x := range ti.Dims {
			got[i] = int(x)
		}
		if !slices.Equal(got, nt.dims) {
			return fmt.Errorf("%w: tensor %s (NextN layer %d) has shape %v, want %v", model.ErrBadModel, nt.name, l, got, nt.dims)
		}
	}
	return nil
}
