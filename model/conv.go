package model

// conv.go: the short causal convolution of recurrent layers (qwen35moe's
// delta-net, lfm2's short-conv blocks), with its state.

// CausalConv is the depthwise causal convolution of K taps over the n
// tokens of x (token-major rows of channels values), computed in place, as
// ggml_ssm_conv over each channel's state of its last K-1 inputs followed
// by the tokens: out[t][c] = Σ_i win_c[t+i]·taps[c·K+i], a float32 sum over
// the taps in order. state (channels × (K-1), channel-major) is updated to
// each channel's last K-1 inputs. win is scratch of at least K-1+n floats.
// A single token (decode) is convolved straight from the state, without
// the window copy, in the same order.
func CausalConv(state, x, taps []float32, n, channels, K int, win []float32) {
	if n == 1 {
		causalConvOne(state, x[:channels], taps, K)
		return
	}
	win = win[:K-1+n]
	for c := 0; c < channels; c++ {
		st, w := state[c*(K-1):(c+1)*(K-1)], taps[c*K:(c+1)*K]
		copy(win, st)
		for t := 0; t < n; t++ {
			win[K-1+t] = x[t*channels+c]
		}
		for t := 0; t < n; t++ {
			var sum float32
			for i, wi := range w {
				sum += float32(win[t+i] * wi) // explicit rounding: no FMA on arm64
			}
			x[t*channels+c] = sum
		}
		copy(st, win[n:n+K-1])
	}
}

// causalConvOne is CausalConv of one token x (one value per channel).
func causalConvOne(state, x, taps []float32, K int) {
	for c, xc := range x {
		st, w := state[c*(K-1):(c+1)*(K-1)], taps[c*K:(c+1)*K]
		var sum float32
		for i, s := range st {
			sum += float32(s * w[i]) // explicit rounding: no FMA on arm64
		}
		x[c] = sum + float32(xc*w[K-1])
		if K > 1 {
			copy(st, st[1:])
			st[K-2] = xc
		}
	}
}
