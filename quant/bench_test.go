package quant

import (
	"math/rand"
	"testing"
)

// benchRow is the row length used by the benchmarks: 16 Ki elements, the
// size of a typical expert row block.
const benchRow = 16384

// BenchmarkQuantize reports MB/s of F32 input per core (b.SetBytes counts
// the float32 bytes consumed) for every quantizer.
func BenchmarkQuantize(b *testing.B) {
	x := gaussian(rand.New(rand.NewSource(7)), benchRow, 0.02)
	for _, typ := range allDequantTypes {
		b.Run(typ.String(), func(b *testing.B) {
			rs, _ := typ.RowSize(benchRow)
			dst := make([]byte, rs)
			b.SetBytes(4 * benchRow)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPUSeconds()
			for i := 0; i < b.N; i++ {
				if err := Quantize(typ, x, dst); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0, 4*benchRow)
		})
	}
}

// BenchmarkDequantize reports MB/s of quantized input (b.SetBytes counts the
// block bytes read) and millions of elements produced per second.
func BenchmarkDequantize(b *testing.B) {
	x := gaussian(rand.New(rand.NewSource(7)), benchRow, 0.02)
	for _, typ := range allDequantTypes {
		b.Run(typ.String(), func(b *testing.B) {
			rs, _ := typ.RowSize(benchRow)
			src := make([]byte, rs)
			if err := Quantize(typ, x, src); err != nil {
				b.Fatal(err)
			}
			dst := make([]float32, benchRow)
			b.SetBytes(rs)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPUSeconds()
			for i := 0; i < b.N; i++ {
				if err := Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu0, float64(rs))
		})
	}
}

// reportCPU adds Melem/s (wall clock) and cpuMB/s: the bytes counted by
// SetBytes per CPU-second of this process, which stays meaningful when other
// processes share the cores (run with -cpu 1 so only one goroutine works).
func reportCPU(b *testing.B, cpu0 float64, bytesPerOp float64) {
	b.ReportMetric(float64(benchRow)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Melem/s")
	if cpu := processCPUSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(bytesPerOp*float64(b.N)/cpu/1e6, "cpuMB/s")
	}
}
