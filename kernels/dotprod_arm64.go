//go:build arm64 && !purego && !nodotprod

package kernels

// noDotProd: without the nodotprod build tag the dot-product kernels are
// used wherever the CPU has them.
const noDotProd = false
