//go:build amd64 && !purego

package kernels

import "encoding/binary"

// cpuid executes CPUID with EAX = leaf, ECX = sub.
func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// uarch identifies a CPU by vendor and the family and model of CPUID leaf 1
// (extended fields folded in, as the vendors' manuals define them).
type uarch struct {
	vendor        string
	family, model uint32
}

func cpuUarch() uarch {
	_, b, c, d := cpuid(0, 0)
	var v [12]byte
	binary.LittleEndian.PutUint32(v[0:], b)
	binary.LittleEndian.PutUint32(v[4:], d)
	binary.LittleEndian.PutUint32(v[8:], c)
	a, _, _, _ := cpuid(1, 0)
	return decodeUarch(string(v[:]), a)
}

// decodeUarch folds CPUID leaf 1's EAX into a family and model.
func decodeUarch(vendor string, eax uint32) uarch {
	family := (eax >> 8) & 0xf
	model := (eax >> 4) & 0xf
	if family == 0xf {
		family += (eax >> 20) & 0xff
	}
	if family == 0x6 || family >= 0xf {
		model |= ((eax >> 16) & 0xf) << 4
	}
	return uarch{vendor: vendor, family: family, model: model}
}

// name is the microarchitecture where the kernel table below knows it.
func (u uarch) name() string {
	if u.vendor != "AuthenticAMD" {
		return ""
	}
	switch {
	case u.family == 0x1a:
		return "zen5"
	case u.family == 0x19 && (u.model>>4 == 0x1 || u.model>>4 == 0x6 || u.model>>4 == 0x7 || u.model>>4 == 0xa):
		return "zen4"
	}
	return ""
}

// preferVNNI512Dots is the per-microarchitecture kernel table: the AVX-512
// VNNI single-vector K-quant dots (dot512_amd64.s) replace the AVX2 ones
// where they were measured faster (BenchmarkMatVec, BenchmarkDotHot;
// docs/measurements.md, issue 27): AMD Zen 4 and Zen 5, whose 512-bit
// units run at full width. Elsewhere (Intel with AVX-512 included, where
// a 512-bit Q4_K dot measured within 7% of AVX2 from L1) the AVX2 dots
// stay. Both sets give bit-identical results; only the speed differs.
func preferVNNI512Dots(u uarch) bool {
	switch u.name() {
	case "zen4", "zen5":
		return true
	}
	return false
}
