package qwen3next

// nextn.go: the multi-token-prediction (NextN) layers at the end of the
// file, which llama.cpp's converter writes by default (--no-mtp leaves them
// out). llama.cpp's loader creates their tensors with TENSOR_SKIP unless
// asked to load them, and its main graph never runs them; pipe does the
// same: it checks them by name and shape without reading their data, keeps
// them out of the decoder and the per-sequence state, and counts them as
// neither recurrent nor attention layers.

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

// runLayers is the number of layers the decoder runs: block_count
// without the NextN layers.
func runLayers(d *model.Desc) int { return max(d.HParams.NLayer-nextnLayers(d), 0) }

// runHParams are d's hyper-parameters over the layers that run.
func runHParams(d *model.Desc) *model.HParams {
	hp := d.HParams
	hp.NLayer = runLayers(d)
	return &hp
}

// recurrentLayers is llama.cpp's is_recr_impl without
// attention.recurrent_layers: every run layer but each
// full_attention_interval-th (4 when absent); no NextN layer.
func recurrentLayers(nLayer, nextn, interval int) []bool {
	if interval <= 0 {
		interval = 4
	}
	rec := make([]bool, nLayer)
	for i := range rec {
		rec[i] = i < nLayer-nextn && (i+1)%interval != 0
	}
	return rec
}

// nextnTensor is one tensor llama.cpp creates for a NextN layer.
type nextnTensor struct {
	name     string
	dims     []int // ggml order
	optional bool
}

// nextnTensors is what llama_model_qwen3next::load_arch_tensors creates
// for NextN layer l (load_block_mtp): the layer's block as a full-attention
// layer with its routed and shared experts, and the nextn.* projection,
// norms and optional embedding, head and head norm.
func nextnTensors(hp *model.HParams, l int) []nextnTensor {
	E, hd, V := hp.NEmbd, hp.HeadDim, hp.NVocab
	q, kv, F, N := hp.NHead*hd, hp.NHeadKV*hd, hp.NFFExp, hp.NExpert
	sh := hp.NFFShExp
	if sh == 0 {
		sh = hp.NFF
	}
	t := func(name string, optional bool, dims ...int) nextnTensor {
		return nextnTensor{name: fmt.Sprintf("blk.%d.%s", l, name), dims: dims, optional: optional}
	}
	return []nextnTensor{
		t("attn_norm.weight", false, E), t("post_attention_norm.weight", false, E),
		t("attn_q.weight", true, E, 2*q), t("attn_k.weight", true, E, kv), t("attn_v.weight", true, E, kv),
		t("attn_output.weight", false, q, E),
		t("attn_q_norm.weight", false, hd), t("attn_k_norm.weight", false, hd),
		t("ffn_gate_inp.weight", false, E, N),
		t("ffn_gate_exps.weight", true, E, F, N), t("ffn_up_exps.weight", true, E, F, N), t("ffn_down_exps.weight", false, F, E, N),
		t("ffn_gate_inp_shexp.weight", false, E),
		t("ffn_gate_shexp.weight", false, E, sh), t("ffn_up_shexp.weight", false, E, sh), t("ffn_down_shexp.weight", false, sh, E),
		t("nextn.eh_proj.weight", false, 2*E, E),
		t("nextn.enorm.weight", false, E), t("nextn.hnorm.weight", false, E),
		t("nextn.embed_tokens.weight", true, E, V),
		t("nextn.shared_head_head.weight", true, E, V),
		t("nextn.shared_head_norm.weight", true, E),
	}
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
