package model

// conv.go: the short causal convolution of recurrent layers (qwen35moe's
// delta-net, lfm2's short-conv blocks), with its state.

import "github.com/pipe-engine/pipe/kernels"

// CausalConv is the depthwise causal convolution of K taps over the n
// tokens of x (token-major rows of channels values), computed in place, as
// ggml_ssm_conv over each channel's state of its last K-1 inputs followed
// by the tokens: out[t][c] = Σ_i in_c[t-K+1+i]·taps[c·K+i], a float32 sum
// from +0 over the taps in order, each product rounded before its addition
// (in_c[s] for s < 0 is the state's). Four taps run on the kernels'
// Conv4/ConvStep4 (AVX2, NEON) where the inputs allow. state
// (channels × (K-1), channel-major) is updated to each channel's last K-1
// inputs. win is scratch of at least K-1+n floats. A single token (decode)
// is convolved straight from the state in the same order.
//
// Several tokens run in blocks of channels (convBlock), each block's tokens
// last to first so every output overwrites an input no later token needs:
// the rows are read and written contiguously. (A channel at a time read one
// float per row, n rows channels·4 bytes apart: with 8192 channels every
// row fell in the same L1 set.)
func CausalConv(state, x, taps []float32, n, channels, K int, win []float32) {
	if n == 1 {
		causalConvOne(state, x[:channels], taps, K)
		return
	}
	if K == 1 {
		convBlock(state, x, taps, n, channels, K, 0, channels, nil)
		return
	}
	b := max(1, min(len(win)/(K-1), convBlockChannels))
	for c0 := 0; c0 < channels; c0 += b {
		convBlock(state, x, taps, n, channels, K, c0, min(c0+b, channels), win)
	}
}

// convBlockChannels is the channels of one block of a multi-token
// convolution (a block's K-1 saved state rows stay in L1).
const convBlockChannels = 256

// CausalConvPool is CausalConv of n ≥ 1 tokens with the channels cut into
// blocks that pool's threads convolve at once, each block then passed
// through act token by token (act(v) replaces v's values; nil: none), so an
// element-wise activation of the convolution's output runs on the threads
// too. tmp is scratch of at least (K-1)·channels floats. Every output and
// the state are CausalConv's bit for bit.
func CausalConvPool(pool *kernels.Pool, state, x, taps []float32, n, channels, K int, tmp []float32, act func(v []float32)) error {
	nb := (channels + convBlockChannels - 1) / convBlockChannels
	return pool.Parallel(nb, func(i int) {
		c0, c1 := i*convBlockChannels, min((i+1)*convBlockChannels, channels)
		if n == 1 {
			causalConvOne(state[c0*(K-1):c1*(K-1)], x[c0:c1], taps[c0*K:c1*K], K)
		} else {
			convBlock(state, x, taps, n, channels, K, c0, c1, tmp[c0*(K-1):c1*(K-1)])
		}
		if act != nil {
			for t := 0; t < n; t++ {
				act(x[t*channels+c0 : t*channels+c1])
			}
		}
	})
}

// convBlock is CausalConv of n ≥ 2 tokens over channels [c0, c1); tmp holds
// at least (K-1)·(c1-c0) floats (the block's new state until its inputs
// have been read).
func convBlock(state, x, taps []float32, n, C, K, c0, c1 int, tmp []float32) {
	B, S := c1-c0, K-1
	// the new state: in_c[n-K+1+j], j < K-1, saved before x is overwritten
	for j := 0; j < S; j++ {
		s, dst := n-S+j, tmp[j*B:(j+1)*B]
		if s >= 0 {
			copy(dst, x[s*C+c0:s*C+c1])
			continue
		}
		for cb := range dst {
			dst[cb] = state[(c0+cb)*S+S+s]
		}
	}
	for t := n - 1; t >= 0; t-- {
		out := x[t*C+c0 : t*C+c1]
		if t >= S && K == 4 {
			kernels.Conv4(out, x[(t-3)*C+c0:], x[(t-2)*C+c0:], x[(t-1)*C+c0:], taps[c0*4:c1*4])
			continue
		}
		for cb := range out {
			c := c0 + cb
			w := taps[c*K : (c+1)*K]
			var sum float32
			for i, wi := range w {
				var v float32
				if s := t - S + i; s >= 0 {
					v = x[s*C+c]
				} else {
					v = state[c*S+S+s]
				}
				sum += float32(v * wi) // explicit rounding: no FMA on arm64
			}
			out[cb] = sum
		}
	}
	for j := 0; j < S; j++ {
		for cb := 0; cb < B; cb++ {
			state[(c0+cb)*S+j] = tmp[j*B+cb]
		}
	}
}

// causalConvOne is CausalConv of one token x (one value per channel); four
// taps run on kernels.ConvStep4 (the same sums and state, vectorized).
func causalConvOne(state, x, taps []float32, K int) {
	if K == 4 {
		kernels.ConvStep4(state, x, taps)
		return
	}
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
