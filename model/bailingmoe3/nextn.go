package bailingmoe3

// nextn.go: the NextN / multi-token-prediction layer at the end of a
// Ling 3.0 file (nextn_predict_layers; block_count counts it). llama.cpp's
// load_arch_tensors creates its tensors with TENSOR_SKIP unless it loads
// MTP (nothing is computed with them), and with TENSOR_NOT_REQUIRED when
// the file carries none (no blk.<n_layer>.nextn.eh_proj.weight: a trunk-only
// file); this checks the same tensors by name and shape without reading
// their data.

import (
	"fmt"
	"slices"

	"github.com/pipe-engine/pipe/model"
)

// runLayers is the number of layers the decoder runs: block_count without
// the NextN layers.
func runLayers(d *model.Desc) int { return max(d.HParams.NLayer-own(d).NextN, 0) }

// nextnTensor is one tensor llama.cpp creates for a NextN layer.
type nextnTensor struct {
	name string
	dims []int // ggml order
}

// nextnTensors is what llama.cpp creates for NextN layer l: a gated MLA
// block (the query through q_lora when attention.q_lora_rank > 0), a MoE
// FFN with its selection bias and shared expert, and the nextn.*
// projection and norms with the head's norm (layer_output_norm).
func nextnTensors(hp *model.HParams, l int) []nextnTensor {
	E, H, N, F := hp.NEmbd, hp.NHead, hp.NExpert, hp.NFFExp
	mla := hp.MLA
	qk, sh := mla.KeyLength, sharedWidth(*hp)
	t := func(name string, dims ...int) nextnTensor { return nextnTensor{name: blk(l, name), dims: dims} }
	ts := []nextnTensor{t("attn_norm.weight", E)}
	if mla.QLoraRank > 0 {
		ts = append(ts, t("attn_q_a.weight", E, mla.QLoraRank), t("attn_q_a_norm.weight", mla.QLoraRank), t("attn_q_b.weight", mla.QLoraRank, H*qk))
	} else {
		ts = append(ts, t("attn_q.weight", E, H*qk))
	}
	return append(ts,
		t("attn_kv_a_mqa.weight", E, mla.KVLoraRank+hp.NRot),
		t("attn_kv_a_norm.weight", mla.KVLoraRank),
		t("attn_k_b.weight", qk-hp.NRot, mla.KVLoraRank, H),
		t("attn_v_b.weight", mla.KVLoraRank, mla.ValLength, H),
		t("attn_gate.weight", E, H),
		t("attn_output.weight", H*mla.ValLength, E),
		t("ffn_norm.weight", E),
		t("ffn_gate_inp.weight", E, N), t("exp_probs_b.bias", N),
		t("ffn_gate_exps.weight", E, F, N), t("ffn_up_exps.weight", E, F, N), t("ffn_down_exps.weight", F, E, N),
		t("ffn_gate_shexp.weight", E, sh), t("ffn_up_shexp.weight", E, sh), t("ffn_down_shexp.weight", sh, E),
		t("nextn.eh_proj.weight", 2*E, E),
		t("nextn.enorm.weight", E),
		t("nextn.hnorm.weight", E),
		t("layer_output_norm.weight", E))
}

// checkNextN checks the NextN layers' tensors: every one present and of
// llama.cpp's shape, or, in a file without the first one's
// nextn.eh_proj, those present of llama.cpp's shape.
func checkNextN(d *model.Desc) error {
	run := runLayers(d)
	_, withMTP := d.Tensor(blk(run, "nextn.eh_proj.weight"))
	for l := run; l < d.HParams.NLayer; l++ {
		for _, nt := range nextnTensors(&d.HParams, l) {
			ti, ok := d.Tensor(nt.name)
			if !ok {
				if !withMTP {
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
	}
	return nil
}
