//go:build !(amd64 || arm64) || purego

package kernels

func attendGroupF16(q []float32, k, v []uint16, stride, n int, scale float32, sinks, scores, out []float32) {
	refAttendGroupF16(q, k, v, stride, n, scale, sinks, scores, out)
}

func attendGroupF32(q []float32, k, v []float32, stride, n int, scale float32, sinks, scores, out []float32) {
	refAttendGroupF32(q, k, v, stride, n, scale, sinks, scores, out)
}

func attendTileF16(q []float32, k, v []uint16, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	refAttendTileF16(q, k, v, stride, rows, scale, sinks, scores, out)
}

func attendTileF32(q []float32, k, v []float32, stride int, rows *[GroupSlots]int, scale float32, sinks, scores, out []float32) {
	refAttendTileF32(q, k, v, stride, rows, scale, sinks, scores, out)
}
