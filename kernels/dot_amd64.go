//go:build amd64 && !purego

package kernels

// installAVX2 swaps the assembly kernels into m.
func installAVX2(m *implementation) {
}
