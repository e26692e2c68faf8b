package kernels

// Attention helpers: the score dot products and the weighted value sums of
// attention over a KV cache, in the fixed float order model's attention
// uses, so they replace its scalar loops bit for bit:
//
//   - a score is Σ q[i]·k[i] in four float32 lanes (lane i mod 4, the
//     len mod 4 tail added to lane 0), combined as (s0+s1)+(s2+s3);
//   - the output accumulates out[i] = out[i] + float32(p_j·v_j[i]) row by
//     row in order.
//
// F16 rows are converted exactly to float32 first. The AVX2 versions
// (attn_amd64.s) and the NEON ones (attn_arm64.s) vectorize across rows and
// elements without reordering any sum; elsewhere, and with the purego tag,
// the pure-Go loops below run (attn_ref.go). None of them retains its
// arguments.

// DotsF16 sets out[j] = q · f16(k[j*stride : j*stride+len(q)]) for every
// j < len(out). k must hold (len(out)-1)*stride+len(q) values.
func DotsF16(q []float32, k []uint16, stride int, out []float32) { dotsF16(q, k, stride, out) }

// DotsF32 is DotsF16 for float32 rows.
func DotsF32(q, k []float32, stride int, out []float32) { dotsF32(q, k, stride, out) }

// AxpysF16 adds p[j]·f16(v[j*stride : j*stride+len(out)]) to out for j =
// 0, 1, … len(p)-1 in order.
func AxpysF16(out, p []float32, v []uint16, stride int) { axpysF16(out, p, v, stride) }

// AxpysF32 is AxpysF16 for float32 rows.
func AxpysF32(out, p, v []float32, stride int) { axpysF32(out, p, v, stride) }

func refDotsF16(q []float32, k []uint16, stride int, out []float32) {
	tab := f16Table()
	n := len(q)
	for j := range out {
		r := k[j*stride : j*stride+n]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+4 <= n; i += 4 {
			s0 += float32(q[i] * tab[r[i]])
			s1 += float32(q[i+1] * tab[r[i+1]])
			s2 += float32(q[i+2] * tab[r[i+2]])
			s3 += float32(q[i+3] * tab[r[i+3]])
		}
		for ; i < n; i++ {
			s0 += float32(q[i] * tab[r[i]])
		}
		out[j] = (s0 + s1) + (s2 + s3)
	}
}

func refDotsF32(q, k []float32, stride int, out []float32) {
	n := len(q)
	for j := range out {
		r := k[j*stride : j*stride+n]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+4 <= n; i += 4 {
			s0 += float32(q[i] * r[i])
			s1 += float32(q[i+1] * r[i+1])
			s2 += float32(q[i+2] * r[i+2])
			s3 += float32(q[i+3] * r[i+3])
		}
		for ; i < n; i++ {
			s0 += float32(q[i] * r[i])
		}
		out[j] = (s0 + s1) + (s2 + s3)
	}
}

func refAxpysF16(out, p []float32, v []uint16, stride int) {
	tab := f16Table()
	for j, pj := range p {
		r := v[j*stride : j*stride+len(out)]
		for i, b := range r {
			out[i] += float32(pj * tab[b])
		}
	}
}

func refAxpysF32(out, p, v []float32, stride int) {
	for j, pj := range p {
		r := v[j*stride : j*stride+len(out)]
		for i, x := range r {
			out[i] += float32(pj * x)
		}
	}
}
