// Package quant knows the ggml block formats: the numbering and storage
// traits of every ggml type, FP16/BF16 <-> FP32 conversion, and pure-Go
// reference dequantizers and quantizers that reproduce llama.cpp
// (ggml/src/ggml-quants.c) bit for bit.
//
// Role in the pipeline: it sits at the bottom. gguf uses the traits to size
// tensors; the generator quantizes F32 weights into GGUF files with Quantize;
// kernels (a separate package) builds its fused dot products on top of the
// formats and checks itself against Dequantize. quant knows nothing above it:
// no files, no tensors, no threads.
//
// Invariants:
//   - A row of n elements of type t occupies t.RowSize(n) bytes: n/BlockSize
//     blocks of TypeSize bytes each, little-endian, in ggml's struct layout.
//   - Dequantize(t, src, dst) writes exactly what ggml's dequantize_row_* (or
//     ggml_fp16_to_fp32_row / ggml_bf16_to_fp32_row) writes, bit for bit.
//   - Quantize(t, src, dst) writes exactly what llama-quantize writes without
//     an importance matrix (quantize_row_*_ref), byte for byte. Floating-point
//     expressions follow the C order of operations and wrap every product that
//     feeds an addition in an explicit float32() conversion, which by the Go
//     spec forbids fusing it into an FMA (Go fuses on arm64, ppc64, s390x,
//     riscv64); ggml-base is compiled without FMA contraction.
//
// Buffers: the caller owns src and dst; functions never retain them and never
// allocate per block. Lengths are checked up front: a wrong length is an
// error wrapping ErrLength, an unsupported type one wrapping ErrUnsupported;
// no input makes them panic.
//
// Concurrency: every function is pure (no package state is mutated after
// init), so any number of goroutines may call them at once on disjoint dst.
package quant
