//go:build arm64 && !purego && nodotprod

package kernels

// noDotProd: the nodotprod build tag selects the plain NEON kernels even on
// a CPU with the dot-product instructions (to test or measure that path).
const noDotProd = true
