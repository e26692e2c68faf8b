//go:build amd64 && !purego

package kernels

import (
	"maps"
	"sync"

	"github.com/pipe-engine/pipe/quant"
	"golang.org/x/sys/cpu"
)

// hasAVX2 is detected once: AVX2 (with OS support for YMM state), F16C,
// BMI1 (TZCNT) and BMI2 are required by the assembly.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C && cpu.X86.HasBMI1 && cpu.X86.HasBMI2

// avx2Impl is the reference with the AVX2 kernels swapped in.
func avx2Impl() *implementation {
	m := &implementation{
		name:      "avx2",
		quantQ8_0: avx2QuantQ8_0,
		quantQ8_K: avx2QuantQ8_K,
		dots:      maps.Clone(refImpl.dots),
		rows:      map[quant.Type]rowsFunc{},
		native:    map[quant.Type]bool{},
		gemm:      map[quant.Type]*gemmKernel{}, // the pure-Go ones lose to the vector kernels
	}
	installAVX2(m)
	installGEMMAVX2(m)
	return m
}

// vnni512Impl is the AVX2 set with the AVX-512 VNNI Q4_K and Q6_K dots, the
// AVX-512 four-row Q8_0 kernel and, where the CPU has VBMI, the four-row
// MXFP4 one.
func vnni512Impl() *implementation {
	m := avx2Impl()
	m.name = "avx512vnni"
	installVNNI512(m)
	return m
}

var native = sync.OnceValue(func() []*implementation {
	if !hasAVX2 {
		return nil
	}
	n := []*implementation{avx2Impl()}
	if hasVNNI {
		n = append(n, vnni512Impl())
	}
	return n
})

// nativeImpls lists the accelerated implementations usable here: the AVX2
// set (its GEMM kernels use AVX-512 where the CPU has it), then, where
// AVX-512 VNNI exists, the same set with the AVX-512 VNNI Q4_K and Q6_K
// dots and four-row Q8_0 and MXFP4 kernels. (An AVX-512 single-row MXFP4
// dot measured no faster than AVX2's and was removed: one row's
// accumulation chain bounds it either way.)
func nativeImpls() []*implementation { return native() }

// bestImpl is the set at init: the measured table's for this CPU where it
// has one, else the first usable (Choose calibrates then).
func bestImpl() *implementation {
	n := nativeImpls()
	if len(n) == 0 {
		return refImpl
	}
	if e, ok := tableEntry(CPUKey()); ok {
		for _, m := range n {
			if m.name == e.Set {
				return m
			}
		}
	}
	return n[0]
}
