package gen

// lfm2moe.go: the LFM2-MoE file layout — llama.cpp's LLM_ARCH_LFM2MOE
// hyper-parameters and tensors: short-convolution layers beside attention
// layers (attention.head_count_kv 0 marks a convolution layer), dense
// leading layers, sigmoid routing with a selection bias, tied output.

// ArchLFM2MoE is LFM2-MoE's general.architecture.
const ArchLFM2MoE = "lfm2moe"

// isConvLayer reports whether layer il of an lfm2moe preset is a
// short-convolution layer (not in Hybrid.AttnLayers).
func (p *Preset) isConvLayer(il int) bool {
	if p.Arch != ArchLFM2MoE {
		return false
	}
	for _, a := range p.Hybrid.AttnLayers {
		if a == il {
			return false
		}
	}
	return true
}

// lfm2moeMeta is the architecture's hyper-parameter keys after the common
// ones.
func lfm2moeMeta(p *Preset, a string) []kvPair {
	u32 := func(x int) uint32 { return uint32(x) }
	kv := make([]uint32, p.NLayer)
	for il := range kv {
		if !p.isConvLayer(il) {
			kv[il] = u32(p.NHeadKV)
		}
	}
	return []kvPair{
		{a + "attention.head_count_kv", kv},
		{a + "rope.freq_base", p.RopeBase},
		{a + "attention.layer_norm_rms_epsilon", p.RMSEps},
		{a + "shortconv.l_cache", u32(p.Hybrid.ConvKernel)},
		{a + "expert_count", u32(p.NExpert)},
		{a + "expert_used_count", u32(p.NExpertUsed)},
		{a + "expert_feed_forward_length", u32(p.NFFExp)},
		{a + "leading_dense_block_count", u32(p.LeadingDense)},
		{a + "expert_gating_func", u32(p.GatingFunc)},
	}
}

// lfm2moeTensors follows llama_model_lfm2moe::load_arch_tensors (tied
// output unless Hybrid.OwnOutput).
func lfm2moeTensors(p *Preset, vocab int) []TensorSpec {
	E, hd := p.NEmbd, p.HeadDim
	ts := []TensorSpec{
		{Name: "token_embd.weight", Layer: -1, Dims: u(E, vocab), Role: RoleEmbed},
		{Name: "token_embd_norm.weight", Layer: -1, Dims: u(E), Role: RoleNorm},
	}
	if p.Hybrid.OwnOutput {
		ts = append(ts, TensorSpec{Name: "output.weight", Layer: -1, Dims: u(E, vocab), Role: RoleOutput})
	}
	for il := 0; il < p.NLayer; il++ {
		t := func(name string, role Role, dims ...int) TensorSpec {
			return TensorSpec{Name: blk(il, name), Layer: il, Dims: u(dims...), Role: role}
		}
		ts = append(ts, t("ffn_norm.weight", RoleNorm, E), t("attn_norm.weight", RoleNorm, E))
		if il < p.LeadingDense {
			ts = append(ts,
				t("ffn_gate.weight", RoleProj, E, p.NFF),
				t("ffn_up.weight", RoleProj, E, p.NFF),
				t("ffn_down.weight", RoleProjOut, p.NFF, E))
		} else {
			ts = append(ts,
				t("ffn_gate_inp.weight", RoleRouter, E, p.NExpert),
				t("ffn_gate_exps.weight", RoleExpert, E, p.NFFExp, p.NExpert),
				t("ffn_up_exps.weight", RoleExpert, E, p.NFFExp, p.NExpert),
				t("ffn_down_exps.weight", RoleExpertOut, p.NFFExp, E, p.NExpert),
				t("exp_probs_b.bias", RoleBias, p.NExpert))
		}
		if p.isConvLayer(il) {
			ts = append(ts,
				t("shortconv.conv.weight", RoleConv, p.Hybrid.ConvKernel, E),
				t("shortconv.in_proj.weight", RoleProj, E, 3*E),
				t("shortconv.out_proj.weight", RoleProjOut, E, E))
			continue
		}
		ts = append(ts,
			t("attn_q_norm.weight", RoleNorm, hd),
			t("attn_k_norm.weight", RoleNorm, hd),
			t("attn_q.weight", RoleProj, E, hd*p.NHead),
			t("attn_k.weight", RoleProj, E, hd*p.NHeadKV),
			t("attn_v.weight", RoleProj, E, hd*p.NHeadKV),
			t("attn_output.weight", RoleProjOut, hd*p.NHead, E))
	}
	return ts
}
