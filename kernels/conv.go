package kernels

// The four-tap causal convolution of the recurrent blocks (ggml_ssm_conv
// with d_conv = 4: qwen35moe's and qwen3next's delta-net, nemotron_h's
// Mamba-2, bailingmoe3's KDA), per channel and depthwise. Taps are
// channel-major as the GGUF tensor holds them (w[4c+i]), and so is the
// decode state (the channel's last three inputs at state[3c:3c+3]). Every
// output is a float32 sum from +0 over the taps in order, each product
// rounded before its addition (never fused), as the scalar references here
// and model.CausalConv compute it; the assembly (AVX2 on amd64, NEON on
// arm64) de-interleaves the taps and the state in registers and computes
// the same values bit for bit across channels at once.

// Conv4 is one token's outputs of a four-tap convolution whose inputs are
// all tokens: out[c] = Σ_i in_i[c]·w[4c+i] with in_3 = out itself (read
// before it is written). in0, in1 and in2 hold at least len(out) values, w
// at least 4·len(out).
func Conv4(out, in0, in1, in2, w []float32) {
	n := len(out)
	conv4(out, in0[:n], in1[:n], in2[:n], w[:4*n])
}

// ConvStep4 is one token x of a four-tap convolution from its state: x[c]
// becomes Σ_{i<3} state[3c+i]·w[4c+i] + x[c]·w[4c+3] (the sum from +0, in
// that order), and state[3c:3c+3] the channel's last three inputs (the
// oldest dropped, x[c] appended). state holds at least 3·len(x) values, w
// at least 4·len(x).
func ConvStep4(state, x, w []float32) {
	n := len(x)
	convStep4(state[:3*n], x, w[:4*n])
}

func refConv4(out, in0, in1, in2, w []float32) {
	in0, in1, in2, w = in0[:len(out)], in1[:len(out)], in2[:len(out)], w[:4*len(out)]
	for c, v3 := range out {
		wc := w[4*c : 4*c+4 : 4*c+4]
		var sum float32
		sum += float32(in0[c] * wc[0]) // explicit rounding: no FMA on arm64
		sum += float32(in1[c] * wc[1])
		sum += float32(in2[c] * wc[2])
		sum += float32(v3 * wc[3])
		out[c] = sum
	}
}

func refConvStep4(state, x, w []float32) {
	state, w = state[:3*len(x)], w[:4*len(x)]
	for c, xc := range x {
		st, wc := state[3*c:3*c+3:3*c+3], w[4*c:4*c+4:4*c+4]
		var sum float32
		sum += float32(st[0] * wc[0]) // explicit rounding: no FMA on arm64
		sum += float32(st[1] * wc[1])
		sum += float32(st[2] * wc[2])
		x[c] = sum + float32(xc*wc[3])
		st[0], st[1], st[2] = st[1], st[2], xc
	}
}
