// Package stages wires one decode step of the engine as DESIGN.md §1 draws
// it: per layer, router → prefetch planner → reader lanes → expert cache →
// FFN compute; per token, metrics to the sink.
//
// # Goroutines
//
// Engine.Open starts the long-lived stage goroutines under one errgroup bound
// to the engine's context: the planner goroutine (it takes one layer's
// expert list at a time from a bounded channel, acquires cache entries in
// router-rank order and submits misses) and the --io-threads reader lanes
// (package reader). The compute stage — attention, router and the expert FFN
// — runs on the decode goroutine, which calls Forward; it cannot run ahead of
// the planner because layer ℓ+1's router needs layer ℓ's output, so a
// separate compute goroutine would add a hand-off without adding overlap.
// Overlap comes from the planner and lanes running while the decode goroutine
// computes the experts that are already resident, and, with --prefetch and
// the next-layer policy, from reading the experts layer ℓ+1's router picks
// when applied to layer ℓ's router input while layer ℓ computes (the planner
// withdraws the wrong guesses once layer ℓ+1 is routed).
//
// Every channel is bounded and every send selects on the context, so an
// error in any stage (a failed read, a cancelled context) ends the run with
// that error and Close waits for every goroutine: none outlives the Engine.
//
// # Determinism
//
// Where expert bytes come from (mmap or cache), which lane read them and in
// which order they arrived change only timing: the FFN stage sums expert
// outputs in top-k rank order and each expert's output depends only on its
// bytes and inputs. Tests check bit-identical logits across --io-threads,
// --cache-mb, --overlap, --prefetch, --prefetch-lanes, --huge-pages,
// --dense-weights, --moe-stream and -t.
//
// # Memory
//
// Streaming mode (--moe-stream): expert bytes are only ever read with
// O_DIRECT (or buffered pread as the fallback) into cache slots (anonymous
// memory, huge pages unless --huge-pages=false); the file is never mmap'd for
// experts. Dense weights follow --dense-weights (package dense). Non-streaming
// mode mmaps the whole file, as llama.cpp does, for A/B comparisons.
//
// # Files
//
// engine.go: Config, Open, Close and accessors; budget.go: the expert-cache
// budget; layer.go: the per-layer driver (RunMoE, the planner goroutine,
// speculation); session.go: a decode sequence and its per-token metrics.
package stages
