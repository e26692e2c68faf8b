package gen

// qwen35moe.go: the Qwen3.5/3.6 MoE file layout — llama.cpp's
// LLM_ARCH_QWEN35MOE hyper-parameters and tensors: gated delta-net
// (recurrent) layers, gated full-attention layers every
// full_attention_interval-th layer, routed experts with a gated shared
// expert beside them.

// ArchQwen35MoE is Qwen3.5/3.6 MoE's general.architecture.
const ArchQwen35MoE = "qwen35moe"

// HybridGeom is a hybrid preset's recurrent-layer geometry and its other
// qwen35moe- and lfm2moe-only shapes.
type HybridGeom struct {
	AttnLayers []int // lfm2moe: the attention layers (the others convolve)
	// OwnOutput: lfm2moe writes an output.weight (LFM2 ties it to
	// token_embd; with random weights a tied head scores the last token
	// highest, so a tiny model would repeat it forever).
	OwnOutput    bool
	ConvKernel   int    // ssm.conv_kernel; lfm2moe: shortconv.l_cache
	StateSize    int    // ssm.state_size: key and value head width
	KeyHeads     int    // ssm.group_count
	ValueHeads   int    // ssm.time_step_rank
	AttnInterval int    // full_attention_interval
	NRot         int    // rope.dimension_count
	Sections     [4]int // rope.dimension_sections
	NFFShExp     int    // expert_shared_feed_forward_length
}

// isRecurrent reports whether layer il of a qwen35moe preset is a delta-net
// layer (llama.cpp's default is_recr).
func (p *Preset) isRecurrent(il int) bool {
	return p.Arch == ArchQwen35MoE && (il+1)%p.Hybrid.AttnInterval != 0
}

// qwen35moeMeta is the architecture's hyper-parameter keys after the
// common ones.
func qwen35moeMeta(p *Preset, a string) []kvPair {
	h := &p.Hybrid
	u32 := func(x int) uint32 { return uint32(x) }
	sec := make([]int32, 4)
	for i, s := range h.Sections {
		sec[i] = int32(s)
	}
	return []kvPair{
		{a + "attention.head_count_kv", u32(p.NHeadKV)},
		{a + "rope.freq_base", p.RopeBase},
		{a + "attention.layer_norm_rms_epsilon", p.RMSEps},
		{a + "expert_count", u32(p.NExpert)},
		{a + "expert_used_count", u32(p.NExpertUsed)},
		{a + "attention.key_length", u32(p.HeadDim)},
		{a + "attention.value_length", u32(p.HeadDim)},
		{a + "expert_feed_forward_length", u32(p.NFFExp)},
		{a + "expert_shared_feed_forward_length", u32(h.NFFShExp)},
		{a + "rope.dimension_count", u32(h.NRot)},
		{a + "rope.dimension_sections", sec},
		{a + "ssm.conv_kernel", u32(h.ConvKernel)},
		{a + "ssm.state_size", u32(h.StateSize)},
		{a + "ssm.group_count", u32(h.KeyHeads)},
		{a + "ssm.time_step_rank", u32(h.ValueHeads)},
		{a + "ssm.inner_size", u32(h.StateSize * h.ValueHeads)},
		{a + "full_attention_interval", u32(h.AttnInterval)},
	}
}

// qwen35moeTensors follows llama_model_qwen35moe::load_arch_tensors
// (separate Q/K/V on attention layers, separate expert gate and up).
func qwen35moeTensors(p *Preset, vocab int) []TensorSpec {
	E, hd, h := p.NEmbd, p.HeadDim, &p.Hybrid
	keyDim, valDim := h.StateSize*h.KeyHeads, h.StateSize*h.ValueHeads
	ts := []TensorSpec{
		{Name: "token_embd.weight", Layer: -1, Dims: u(E, vocab), Role: RoleEmbed},
		{Name: "output_norm.weight", Layer: -1, Dims: u(E), Role: RoleNorm},
		{Name: "output.weight", Layer: -1, Dims: u(E, vocab), Role: RoleOutput},
	}
	for il := 0; il < p.NLayer; il++ {
		t := func(name string, role Role, dims ...int) TensorSpec {
			return TensorSpec{Name: blk(il, name), Layer: il, Dims: u(dims...), Role: role}
		}
		ts = append(ts,
			t("attn_norm.weight", RoleNorm, E),
			t("post_attention_norm.weight", RoleNorm, E),
			t("ffn_gate_inp.weight", RoleRouter, E, p.NExpert),
			t("ffn_gate_exps.weight", RoleExpert, E, p.NFFExp, p.NExpert),
			t("ffn_up_exps.weight", RoleExpert, E, p.NFFExp, p.NExpert),
			t("ffn_down_exps.weight", RoleExpertOut, p.NFFExp, E, p.NExpert),
			t("ffn_gate_inp_shexp.weight", RoleProj, E),
			t("ffn_gate_shexp.weight", RoleExpert, E, h.NFFShExp),
			t("ffn_up_shexp.weight", RoleExpert, E, h.NFFShExp),
			t("ffn_down_shexp.weight", RoleExpertOut, h.NFFShExp, E),
		)
		if !p.isRecurrent(il) {
			ts = append(ts,
				t("attn_q.weight", RoleProj, E, 2*hd*p.NHead),
				t("attn_k.weight", RoleProj, E, hd*p.NHeadKV),
				t("attn_v.weight", RoleProj, E, hd*p.NHeadKV),
				t("attn_output.weight", RoleProjOut, hd*p.NHead, E),
				t("attn_q_norm.weight", RoleNorm, hd),
				t("attn_k_norm.weight", RoleNorm, hd),
			)
			continue
		}
		ts = append(ts,
			t("attn_qkv.weight", RoleProj, E, 2*keyDim+valDim),
			t("attn_gate.weight", RoleProj, E, valDim),
			t("ssm_conv1d.weight", RoleConv, h.ConvKernel, 2*keyDim+valDim),
			t("ssm_dt.bias", RoleBias, h.ValueHeads),
			t("ssm_a", RoleSSMA, h.ValueHeads),
			t("ssm_beta.weight", RoleProj, E, h.ValueHeads),
			t("ssm_alpha.weight", RoleProj, E, h.ValueHeads),
			t("ssm_norm.weight", RoleNorm, h.StateSize),
			t("ssm_out.weight", RoleProjOut, valDim, E),
		)
	}
	return ts
}
