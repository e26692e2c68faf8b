//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"strings"
)

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

// key is the uarch as the kernel table and cache name it:
// amd64-<vendor>-<family>-<model> in hex, e.g. amd64-AuthenticAMD-1a-02.
func (u uarch) key() string {
	v := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, u.vendor)
	return fmt.Sprintf("amd64-%s-%02x-%02x", v, u.family, u.model)
}

// CPUKey names this CPU's class for the kernel table (cputable.json) and
// the calibration cache: vendor, CPUID family and model.
func CPUKey() string { return cpuUarch().key() }
