//go:build amd64 && !purego

package kernels

import (
	"maps"

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
	}
	installAVX2(m)
	return m
}

var avx2 *implementation

func nativeImpls() []*implementation {
	if !hasAVX2 {
		return nil
	}
	if avx2 == nil {
		avx2 = avx2Impl()
	}
	return []*implementation{avx2}
}

func bestImpl() *implementation {
	if n := nativeImpls(); len(n) > 0 {
		return n[len(n)-1]
	}
	return refImpl
}
