//go:build amd64 && !purego && noavx512

package kernels

// avx512Allowed: the noavx512 build tag leaves every AVX-512 kernel out,
// decode and multi-token alike, even on a CPU with AVX-512: the binary runs
// the kernels an AVX2-only CPU (Zen 2/3, Intel client cores) runs, to test
// or measure that path on an AVX-512 machine. (--kernels avx2 alone still
// uses the AVX-512 multi-token kernels where the CPU has them.)
const avx512Allowed = false
