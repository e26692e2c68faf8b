//go:build arm64 && !purego

package kernels

import (
	"maps"
	"sync"

	"github.com/pipe-engine/pipe/quant"
	"golang.org/x/sys/cpu"
)

// hasDotProd is detected once: the ARMv8.2 dot-product instructions (SDOT).
// Every AArch64 core has the plain Advanced SIMD (NEON) the other set needs.
var hasDotProd = cpu.ARM64.HasASIMDDP && !noDotProd

// arm64Impl is the reference with one of the two NEON kernel sets swapped
// in, with its multi-token kernels (the pure-Go ones are not used: they
// lose to the vector kernels).
func arm64Impl(name string, set map[quant.Type]neonKernel, gemm map[quant.Type]*gemmKernel) *implementation {
	m := &implementation{
		name:      name,
		quantQ8_0: neonQuantQ8_0,
		quantQ8_K: neonQuantQ8_K,
		dots:      maps.Clone(refImpl.dots),
		rows:      map[quant.Type]rowsFunc{},
		native:    map[quant.Type]bool{},
		gemm:      gemm,
	}
	installNEON(m, set)
	return m
}

var native = sync.OnceValue(func() []*implementation {
	neon := arm64Impl("neon", plainSet, neonGEMMs(plainGEMMs))
	if !hasDotProd {
		return []*implementation{neon}
	}
	return []*implementation{arm64Impl("sdot", sdotSet, neonGEMMs(sdotGEMMs)), neon}
})

// nativeImpls lists the accelerated implementations usable here, the one in
// use first: the dot-product set where the CPU has it, then the plain NEON
// set (every AArch64 core), so the tests run both on a dot-product machine.
func nativeImpls() []*implementation { return native() }

// bestImpl is the set at init: the measured table's for this CPU where it
// has one, else the first (Choose calibrates then).
func bestImpl() *implementation {
	n := nativeImpls()
	if e, ok := tableEntry(CPUKey()); ok {
		for _, m := range n {
			if m.name == e.Set {
				return m
			}
		}
	}
	return n[0]
}
