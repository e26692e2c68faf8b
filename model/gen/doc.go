// Package gen writes synthetic Mixture-of-Experts models in GGUF with the exact
// shapes, tensor names, metadata and quantization mixes of real ones
// (Qwen3-30B-A3B, gpt-oss-20b/120b, Gemma-4-26B-A4B and tiny variants), so that
// pipe can be tested and measured on this machine without downloading weights.
//
// Role in the pipeline: gen sits beside the engine, not inside it. It is the
// source of the models `pipe run`, `pipe bench` and the memory tests load; it
// depends only on quant (the llama.cpp reference quantizers) and gguf (the
// writer), never on the engine's stages.
//
// gen names no architecture. Each model family registers a Family
// (family.go) from its own package (model/<family>/gen.go, through package
// family): its presets, its tensor list, its metadata keys and its
// tokenizer defaults, built from the shared pieces here (HeadTensors,
// RoutedBlock, AttentionMoEMeta, ChatMLVocab, the Preset fields several
// families use). A program sees the presets of the families it imports
// (model/archs: all); gen alone has none.
//
// Invariants:
//   - Every byte of a quantized tensor is a real quantizer output: each block is
//     quant.Quantize applied to random floats. Large tensors are assembled from
//     a pool of quantized blocks (see pool.go): the ggml quantizers of every type
//     gen emits work block by block, so a row assembled from pooled blocks is
//     exactly the quantizer's output for the concatenation of those blocks'
//     source floats.
//   - Output is deterministic per seed: the same Options give a byte-identical
//     file, whatever GOMAXPROCS is (every tensor, and every row chunk of it, draws
//     from its own generator derived from the seed and the tensor name).
//   - The file is streamed: at most a few tensors' bytes are in memory at once.
//   - Tensor order, KV order and type choices follow llama-quantize (the loader's
//     weight_name_comparer order; llama_tensor_get_type's mix).
//
// Concurrency: Generate may be called from several goroutines on different
// outputs; a Plan is immutable once built and safe to share.
package gen
