// Package kernels computes matrix × vector products over GGUF weight rows
// stored in ggml's block formats (quant.Type), and attention over the KV
// cache (attn.go, attn8.go). It is the compute core of decode: every
// projection of every layer, and every routed expert, goes through
// Pool.MatVec, Pool.MatVecQ or Pool.MatMul, or through Local.MatMul when a
// prefill computes whole experts one per pool thread.
//
// # Numerical scheme
//
// The scheme is llama.cpp's CPU backend. The activation vector x is
// converted once per product to the weight type's "vec_dot_type"
// (ActivationType): Q8_0 for Q4_0, Q5_0, Q8_0 and MXFP4 rows; Q8_1 for Q4_1
// and Q5_1 rows; Q8_K for Q2_K…Q6_K rows; F16 for F16 rows; BF16 for BF16
// rows; F32 rows use x as is. The quantizers are llama.cpp's reference ones
// (quantize_row_q8_0_ref, _q8_1_ref, _q8_K_ref: generic, not the x86 SIMD
// variants, which round differently). Each row·activation dot product runs in
// integers inside a block and applies the block scales in float32.
//
// The per-block integer sums are exact, so they equal llama.cpp's generic
// ggml_vec_dot_*_generic sums; only the order in which the float32 block
// contributions are accumulated differs. That order is fixed by this package
// (it is what an 8-lane SIMD unit does) and is the same in every
// implementation:
//
//   - Integer lanes: inside a block, element e contributes to lane
//     (e mod 32)/4 (0..7), multiplied by its sub-block scale where the format
//     has one; for 32-element blocks lane l is elements 4l..4l+3.
//   - Per block and lane: acc[l] = acc[l] + float32(d * float32(lane[l])),
//     with d = weight block scale × activation block scale rounded to
//     float32, the product rounded separately (no fused multiply-add).
//   - Formats with block minima (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) accumulate the
//     minimum term separately (one float32, or four lanes for Q4_K/Q5_K) and
//     add/subtract it after the horizontal sum.
//   - Horizontal sum of 8 lanes: r[i] = a[i]+a[i+4]; (r0+r2) + (r1+r3).
//   - F32/F16/BF16 rows: four 8-lane accumulators over 32-element chunks,
//     combined as (acc0+acc2)+(acc1+acc3), horizontally summed as above; the
//     last len%32 elements are summed sequentially into a scalar added last.
//
// All float32 products and sums in the pure-Go code are written with explicit
// float32 conversions so the Go compiler cannot fuse them into FMA on any
// architecture.
//
// # Implementations
//
// The pure-Go reference (ref_*.go) is always built and covers every pair.
// On amd64, hand-written Go assembly (no code generator; the *_amd64.s
// files) implements the hot formats with AVX2: Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K,
// MXFP4, F16, F32 dots and the Q8_0/Q8_K activation quantizers; the other
// pairs use the reference on every machine. (Q5_0 — the expert down
// projections of llama.cpp's Gemma-4 Q4_K_M files, whose 704 columns no K-quant
// takes — is the gemma4 prefill's hot format: 0.5 GB/s per CPU-second in the
// reference, 13 with AVX2.) On arm64 the *_arm64.s files implement the same
// set with NEON twice: with the ARMv8.2 dot-product
// instruction SDOT ("sdot", used where cpu.ARM64.HasASIMDDP) and without
// ("neon", every AArch64 core; the `nodotprod` build tag selects it on any
// core); instructions the Go assembler lacks are WORD-encoded by the macros
// of neon_arm64.h. CPU features are detected once at package init with
// golang.org/x/sys/cpu (which sets can run; which of them does is below);
// the `purego` build tag forces the reference
// everywhere. Every assembly routine follows the reference's
// operation order exactly, so results are bit-identical to the reference
// (the tests demand it) for any thread count. Lengths are checked in Go
// before assembly is entered.
//
// # Several tokens at once
//
// MatMul and MatMulQ over n ≥ 2 tokens (prefill; the tokens routed to one
// expert) use a multi-token kernel where the implementation has one for the
// weight type (gemm.go): each weight block is loaded and unpacked once and
// applied to a tile of tokens held in registers; the tokens no tile takes
// run the vector kernel. Per (row, token) the integer block sums and the
// float32 order are the vector kernel's, so MatMul equals MatVec bit for
// bit. A kernel may chain a smaller tile for the remainder and may run a
// last partial tile padded with copies of its last token.
//
//   - AVX2 (gemm_amd64.s): Q4_K against 8 tokens (quants packed in the
//     order of its rearranged nibbles, packQ4_KLanes, so one VPMADDWD
//     scales a chunk's two sub-blocks; a last 6–7 padded) then 4 then 2;
//     Q6_K likewise against 8 (packQ6_KLanes, with per-lane corrections
//     for the codes' offset of 32) then 4 then 2; Q8_0, Q5_0 and MXFP4
//     (gpt-oss's experts) against 8 (a last 7 padded) then 4 then 2, one
//     macro body per tile width with the same instructions per token
//     (TOKX8, TOKX4, TOKX2; Q5_0's measured faster than an AVX-512 pair
//     kernel, which was removed, so AVX-512 CPUs run this chain too);
//     F32 and F16 rows (the MoE routers, F16 fallback tensors) against 3
//     (gemmf_amd64.s), a last pair padded to 3.
//   - AVX-512 F/BW, used over AVX2 where present: Q4_K, Q6_K, MXFP4 and
//     Q8_0 against 8 tokens, two tokens per 512-bit register; the tokens
//     left after whole tiles of 8 go to the AVX-512 2-token kernel for MXFP4
//     and Q8_0, to the AVX2 4- and 2-token kernels for Q4_K and Q6_K (they
//     measured faster there); Q4_K and Q6_K with VPDPWSSD where AVX-512
//     VNNI exists, which also has a 4-token pair kernel (two pairs) for
//     the tokens after the tiles of 8 (a last 3 padded), then the VNNI
//     2-token one for Q6_K and the AVX2 one for Q4_K. The `noavx512`
//     build tag leaves every AVX-512 kernel out (an AVX-512 machine then
//     runs and measures what an AVX2-only CPU runs).
//   - NEON (gemm_arm64.s, both arm64 sets): Q4_K and Q6_K against up to 8
//     tokens in one routine (a tile of each width 2-8 in the chain): each
//     block's scales and values are unpacked once into registers, then each
//     token runs the vector kernel's instructions against them, its float
//     accumulators kept in memory between blocks. The other formats run
//     the vector kernels token by token.
//   - Pure Go (ref_gemm.go; the purego build and machines without the
//     assembly): Q4_0, Q8_0, MXFP4, Q4_K, Q6_K, F32, F16 against 4.
//
// BenchmarkGEMM, GB of weights per CPU-second on the development machine
// (vector kernel / AVX2 / AVX-512 / VNNI): 128 tokens × 4096×2048 Q4_K
// 0.11 / 0.17 / 0.23 / 0.25; 8 tokens × 768×2048 Q6_K 2.0 / 3.3 / 3.0 /
// 3.8; 8 tokens × 2880×2880 MXFP4 1.3 / – / 1.65; 128 tokens × 2880×2880
// Q8_0 0.15 / 0.23 / 0.27 (docs/measurements.md, issue 11; the AVX2
// column predates its 8-token Q4_K, Q6_K and MXFP4 kernels, which measured
// 1.15–1.4× the 4-token ones, and 1.35× the MXFP4 vector kernel, with
// AVX2 forced on Zen 5: docs/measurements.md, issue 37 item 1).
//
// The Q4_K and Q6_K single-vector (decode) kernels exist twice on amd64:
// AVX2 (set "avx2") and AVX-512 with VNNI (dot512_amd64.s, set
// "avx512vnni": two sub-blocks per 512-bit register, VPDPWSSD folding the
// scale multiply and add).
//
// # Which set runs: by measurement
//
// The set is chosen by measurement, never from the CPU's features or
// vendor alone (choose.go, calibrate.go). CPUKey names the CPU class
// (amd64: vendor, CPUID family and model, uarch_amd64.go; arm64: the MIDR
// implementer and part of /proc/cpuinfo). At init the set is the one the
// measured table (cputable.json, embedded) records for that class, else
// the first usable one. Choose (pipe calls it at start-up; --kernels,
// PIPE_KERNELS) then settles it: a forced set; else the table's; else a
// calibration cached in the user cache directory as
// kernels-<CPUKey>.json (a file that is unreadable, corrupt, too large,
// or made for another CPU or other candidate sets is ignored with a
// warning and replaced); else a calibration now: every usable set computes
// the same decode-shaped Q4_K, Q6_K, Q8_0 and MXFP4 products (64×2048, in
// L2, 64 times: about a millisecond on Zen 5) for 3 to 9 interleaved
// rounds, stopping once 60 ms have been measured, and the smallest
// best-of-rounds time wins (the earlier set on a tie; a set whose results
// differ from the first's is never picked). The pick is a function of the
// timings alone, which the tests inject. Chosen reports the set and its
// source (table, cached, calibrated, forced, only). Every set is
// bit-identical to the reference, so the choice changes no output
// (TestCalibrationSetsBitIdentical, TestChooseInstalls).
//
// TestRecordTable -record-table is the benchmark that fills the table: it
// takes each set's best time over 7 calibrations on this CPU and writes
// its entry. The table holds AMD EPYC Zen 5 (family 0x1A model 0x02):
// avx512vnni 0.69 ms, avx2 0.91 ms (go1.26.8, load average 31 on the
// shared 2-vCPU VM). Earlier measurements agree: the 512-bit dots measured
// faster on Zen 5 (Q6_K by about half from L1), and on the Intel
// development VM a 512-bit Q4_K loop measured within 7% of AVX2; an Intel
// or Zen 4 CPU is calibrated at its first run until its entry is recorded.
//
// # Four rows at once
//
// A product's rows kernel (MatVec, and MatVecs' chunks) runs Q8_0, MXFP4
// and Q5_0 rows four at a time: each row keeps its own accumulator and the
// single-row kernel's operations in their order, so each result is that
// row's dot bit for bit, while the activation's quants, scales and
// correction lanes are loaded once per block for four rows and the four
// float accumulation chains run independently (one row's chain of VADDPS,
// a block at a time, bounds the single-row loop). AVX2 (dot_amd64.s) has
// all three; the "avx512vnni" set has all three with two blocks per
// 512-bit register (dot512_amd64.s): Q8_0 with its weight quants made
// unsigned (w+128) for VPDPBUSD into lanes that start at -128 times each
// 4-quant group's activation sum; MXFP4, where the CPU has AVX-512 VBMI, with VPERMB to
// spread the codes and look up their values, VPDPBUSD for the integer
// lanes and VSCALEFPS for the block scales d·2^(e-128), which is exact: the
// same correctly rounded product the reference computes; Q5_0, where the
// CPU has VBMI, with VPERMB to spread the codes and the high-bit bytes,
// VPTESTMB and a masked VPADDB to add 16 where a code's bit of qh is set,
// then VPDPBUSD as MXFP4. The pool cuts
// products into chunks of whole four-row groups (groupChunk). The four-row
// loops prefetch the next group in address order as they consume the
// current one: four interleaved
// streams left the hardware prefetcher behind and ran slower than one row
// at a time (BenchmarkMatVec, BenchmarkRowsHot; docs/measurements.md).
//
// Every AVX2 row loop prefetches the weights PFDIST bytes ahead
// (PREFETCHT0): without it the hardware prefetcher fell behind on streamed
// rows and Q4_K read from RAM at 5.8 GB/s per CPU-second instead of 12.5.
//
// # Performance
//
// go test -run '^$' -bench 'MatVec|MemBandwidth|DotHot|ExpertsBatched' ./kernels/
// reports GB/s of weights (wall) and cpuGB/s (per CPU-second of the
// process, robust on a shared machine); the MatVec benchmarks cycle over
// 1 GiB of huge-page anonymous memory, beyond the last-level cache. On the
// 2-core Intel Xeon (AVX-512, VNNI) development VM, one thread streams
// Q4_K/Q5_K/Q6_K/Q8_0 rows from RAM at 12-14.5 GB/s per CPU-second, F16/F32
// at 14-15 and MXFP4 at 10.5, while from L1 (BenchmarkDotHot) Q4_K computes
// at 15, Q6_K at 21 and Q8_0 at 25; the assembly is 8-50× faster than the
// pure-Go reference. On the 2-core AMD Zen 5 VM the AVX-512 VNNI Q4_K dot
// streams 15.6-18.4 GB/s per CPU-second from RAM (AVX2: 12.3-15.8) and
// Q6_K computes from L1 at 29-36 (AVX2: 20-23). BenchmarkExpertsBatched
// (the gate and up projections of 8 experts) costs about 28% less CPU at
// two threads as one MatVecs dispatch than as 16 calls.
// The arm64 kernels are measured here only under emulation: per 256
// values they execute 132 (Q4_K), 158 (Q6_K) and 176 (Q8_0) instructions
// with SDOT, 12-47× fewer than the reference (scripts/arm64-insns.py;
// docs/measurements.md compares llama.cpp's NEON kernels); docs/android.md
// says how to measure them on a phone.
//
// # Attention over the KV cache
//
// attn.go and attn8.go hold attention's score dots, softmax and weighted
// value sums in the fixed float order described there (ggml's non-flash
// path: Q and the probabilities rounded to F16 for an F16 cache, a float64
// softmax sum in row order). AttendGroupF16/F32 run GroupSlots (8) query
// heads that share a KV head at once: each K and V row is loaded and
// converted once for all of them, and scores are kept row-major so the
// softmax (including math.Exp, whose amd64 FMA code the assembly
// replicates) runs across the heads; every head's result is the
// single-head one bit for bit. On arm64 the F16 grouped form loads and
// widens each K and V row once for the 8 heads (attn8_arm64.s: two rows'
// scores at a time from chunk-major packed queries, then each head's
// softmax on its own contiguous scores, then the value sums 8 outputs a
// head at a time with the probabilities transposed to row order); the F32
// and tile forms run head by head on the NEON helpers (attn_arm64.s,
// exp_arm64.s). AttendTileF16/F32 take slots whose rows end
// at different positions: model fills them with several prompt tokens ×
// the query heads of a KV head when it has fewer than 8 (gemma4's sliding
// layers: 4 tokens × 2 heads), so each K/V row is loaded once per tile.
//
// # Element-wise and recurrent helpers
//
// SwiGLU, SiLU and Exp (swiglu.go) replicate ggml's scalar activations with
// math.Exp's float64 exponential; MulScalar and AddMulScalar (scaled.go)
// scale and accumulate rows with the product rounded before the addition.
// DeltaRule (delta.go) is one token of the gated delta rule over one value
// head's state (qwen35moe's delta-net): each state row is scaled, dotted
// with k in DotsF32's order, updated by the rank-1 term and dotted with q in
// a single pass, four rows at a time in the assembly (AVX-512, where the
// CPU has it and the width is a multiple of 16: 16 elements per register,
// the four rows' products transposed by 128-bit lanes so that one
// accumulator holds every row's four dot lanes). Conv4 and ConvStep4
// (conv.go) are the four-tap causal convolution of the recurrent blocks,
// a prompt token and a decode step, on channel-major taps and state that
// the assembly de-interleaves in registers (unpack and permute on AVX2,
// LD4/LD3/ST3 on NEON). All of them have
// AVX2 assembly on amd64 and NEON assembly on arm64 (exp_arm64.s: the
// exponential is Go's arm64 math.Exp code on two float64 lanes, as the
// amd64 one is Go's amd64 code on four); purego runs the reference; the
// bits are the same everywhere.
//
// # Concurrency and ownership
//
// A Pool owns its persistent worker goroutines; MatVec/MatVecQ/MatMul split
// the rows over them — each thread a contiguous share, so each streams its
// own stretch of memory, rebalanced by stealing (split.go) — and block until
// all rows are written. Parallel runs other work (attention heads) on the
// same threads; ParallelWith also tells each call its thread index, so a
// body can multiply on its own thread with a per-thread Local (whole
// experts of a prefill, one per thread), bit-identical to the Pool. MatVecs runs
// several products (q/k/v; the gate and up projections of all of a layer's
// routed experts) as one dispatch, so small matrices pay one wake-up and one
// final wait together. A Pool is safe for concurrent use (calls are
// serialized). Weights, x and y are only borrowed
// for the duration of a call; y must not alias w or x. An Activation is
// immutable after Quantize returns and may be shared by concurrent readers.
package kernels
