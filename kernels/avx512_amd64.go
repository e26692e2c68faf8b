//go:build amd64 && !purego && !noavx512

package kernels

// avx512Allowed: without the noavx512 build tag the AVX-512 kernels run
// where the CPU has AVX-512 (hasAVX512).
const avx512Allowed = true
