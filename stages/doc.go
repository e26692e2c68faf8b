// Package stages wires one decode step of the engine: per layer, router →
// prefetch planner → reader lanes → expert cache → FFN compute; per token,
// metrics to the sink.
//
// # Where it sits
//
// The stages are packages of their own, one each: router, prefetch (the
// planner), reader (the lanes), cache, ffn and sink; expert is the hand-off
// between the planner and the FFN stage, warmstart the warm start. This
// package wires them and imports no front end. Above it, decode runs
// sequences on an Engine for cmd/pipe and serve. Below it, model and the
// families (one folder each, registered through package model/family)
// compute the blocks on kernels, quant and gguf. The offline tools
// (tools/bench, report, replay, quality) are never imported by the engine.
//
// # Types
//
// Engine opens the model, resolves the configuration once in one step,
// prepare, before anything is allocated (the user's Config →
// EnsureDefaults, the one place defaults are written, and Validate, its one
// check → the model described → resolve, with the caller's Inputs, the
// model's state sizes and the memory available read once and passed down →
// Resolved, which Engine.Config returns and nothing edits), picks the expert
// source, builds the architecture and runs forward passes; Session is a
// decode sequence on it.
// The stages name no architecture: the memory one sequence's state takes
// (KV cache, recurrent state) is the model family's answer
// (model.StateBytes), checked against the memory available before it is
// allocated.
// The per-layer flow is the pipeline type (pipeline.go), which the model's
// Forward calls as its model.MoE: route, plan the ffn.Job, have the expert
// source deliver the experts, finish the rank-order sum.
//
// Where experts come from is one seam, the expertSource interface
// (source.go): run(job) hands the FFN stage every routed expert and returns
// once each is computed; resident(key) says whether an expert's bytes are in
// memory now; report() gives its counters; stop/close end it. Two
// implementations: mappedSource (--moe-stream=false) hands the FFN slices of
// the mapped file in one call, with no channel and no goroutine;
// streamSource (stream.go) owns the cache, the reader lanes, the planner
// (whose goroutine is prefetch.Planner.Run) and the speculator
// (speculate.go: the warm start, the history policies' next-layer reads, the
// next-layer policy's guess and a prompt pass's guessed set) and, when the
// budget holds every routed expert (--cache-fill auto), the cache fill
// (fill.go: after the warm start, every other expert, read at background
// priority by lanes with nothing else queued, never evicting; it logs the
// cache_fill event when done). A mode that
// changes which experts are computed (dropping or substituting the ones not
// resident) belongs at this seam: it can ask resident before run, and it
// must count what it did in the counters.
//
// Counters: Engine.Metrics is one snapshot (metrics.Counters — lookups by
// outcome, bytes, stall — plus the profile, speculation, warm-start and
// cache-fill stats, warmstart.Stats); the per-token CSV row, decode.Result and the server's /metrics all
// read it, so a hit (an expert resident and ready; a join on a read in
// flight is not one) has one definition. A prompt pass also keeps its
// counters layer by layer (layers.go: metrics.Layer rows, the same
// quantities' changes over each MoE layer; PrefillTimes.Layers).
//
// # Stages
//
// One decode step with the streamed source, as the code runs it. Boxes are
// goroutines; arrows are bounded channels with their capacities; "call"
// marks a stage that runs on the goroutine of the box it sits in. With the
// mapped source the decode goroutine's box is all there is: the source's
// run hands the FFN stage every expert in one call.
//
//	decode goroutine (Session.Step → Engine.Forward → pipeline), for each layer ℓ:
//	┌──────────────────────────────────────────────────────────────────────┐
//	│ attention (call; kernels.Pool threads) → router top-k (call)         │
//	│   → ffn.Job planned (call, reused) ─────┐                            │
//	│   → streamSource.run (call)             │ plans, cap 2: layer ℓ's    │
//	│ FFN stage (call): computes experts as   │ experts in rank order, then│
//	│ they arrive, hits first; releases each  │ a next-layer guess (sent   │
//	│ pin; Σ rank-order weighted sum          │ only if there is room)     │
//	└──────────▲──────────────────▲───────────┼────────────────────────────┘
//	           │ out, cap = the   │ done,     ▼
//	           │ layer's experts  │ cap 1  ┌───────────────────────────────┐
//	           │ (expert.Ready    └────────│ planner goroutine (Run):      │
//	           │  values: bytes +          │ Settle the layer's guesses;   │
//	           │  cache pin)               │ cache.Acquire per expert:     │
//	           ├───────── hit ─────────────│  hit → Ready now              │
//	           │                           │  miss → Submit ───────────┐   │
//	           │                           │ Speculate → Offer ──┐     │   │
//	           │                           └─────────────────────┼─────┼───┘
//	           │      speculative queue, cap 64: refused when    │     │ demand queue, cap 64:
//	           │      full, served only when no demand waits ────┘     │ Submit blocks when full
//	           │                           ┌───────────────────────────▼───┐
//	           └────── miss, on Done ──────│ reader lanes ×--io-threads:   │
//	                                       │ O_DIRECT pread into the slot; │
//	                                       │ cache admit (Complete)        │
//	                                       └───────────────────────────────┘
//	per token: metrics ─ rows, cap 256 (sink.RowBuffer) ─▶ sink writer goroutine (CSV, status line)
//	           log lines ─ cap 1024 (cmd/pipe) ──────────▶ sink.AsyncWriter goroutine (stderr)
//
// Who owns what: the decode goroutine owns the activations, the routing
// buffers, the FFN job and its scratch; expert bytes live in cache slots
// (anonymous memory), lent to the FFN by a Ready's Lease (the pin) and given
// back when the expert is computed; the planner keeps each expert's views
// into its slot; the lanes own nothing but their pread in flight.
//
// Why the compute is a call: attention, the router and the FFN run on the
// decode goroutine because layer ℓ+1's router needs layer ℓ's output — a
// compute goroutine would add a hand-off per layer without adding overlap.
// Overlap comes from the planner and the lanes running while the FFN
// computes the experts already resident, and, with --prefetch next-layer,
// from reading the experts layer ℓ+1's router picks when applied to layer
// ℓ's router input while layer ℓ computes (wrong guesses are withdrawn once
// layer ℓ+1 is routed). A prompt pass does the same for every prompt token
// (--prefetch-prompt, on by default): it guesses layer ℓ+1's whole routed
// set, so the disk reads it while layer ℓ finishes and ℓ+1 runs its
// attention, time in which it would otherwise idle; every lane may serve
// those guesses, not only --prefetch-lanes. A cache smaller than the
// model's experts is faulted in whole once the dense weights are loaded
// (it fills within its first prompts), ahead of the first prompt's reads,
// and until the faulting reaches a free slot a read evicts rather than take
// it (cache.PrefaultAll): on a virtual machine the first touch of fresh
// memory ran a cold prompt pass's reads at a fraction of the disk's rate. A
// streamed prompt pass also runs with more Ps than compute threads
// (Session.Prefill, PromptProcs), so reader goroutines are not kept waiting
// for one.
//
// Why the planner is a goroutine: cache.Acquire blocks while every slot is
// pinned, until the FFN releases one — on the decode goroutine that wait
// could never end.
//
// Backpressure is by channel capacity and cache slots, never by dropping
// (only speculation is dropped when its queue or the plans channel is full).
// Steady decode passes work as values: a layer hands off one
// prefetch.Request, one
// Ready per routed expert and one done, and allocates nothing (tests
// TestSteadyLayerAllocatesNothing, BenchmarkRunMoE). A whole decode step —
// the model's pass (its buffers kept in the State), planner records, cache
// entries, lane tasks and piece helpers, the metrics sample — allocates
// nothing either, with the file mmap'd, with a cache holding every expert,
// with no cache and with evictions (TestSteadyDecodeAllocates,
// BenchmarkDecodeStep).
//
// # Goroutines
//
// With streaming, Engine.Open starts the lanes (package reader, conc
// goroutines) and, with a warm start (Inputs.WarmKeys: the hot set's keys,
// package warmstart's, hottest first) or a cache fill, the warm reader
// (which reads the fill after the warm start's keys) before it reads the
// dense weights, so warm reads overlap the rest of the load; then, with the model built, the planner goroutine
// (prefetch.Planner.Run). All are owned by the engine and bound to its
// context (lifetime); a goroutine's error cancels that context with the
// error as its cause. Every send selects on a context (or cannot
// block: out has room for a layer's experts, done for one answer), so an
// error in any stage (a failed read, a cancelled context) ends the run with
// that error, and Close waits for every goroutine: none outlives the Engine.
// A wave of experts is always consumed whole (under the engine's context),
// so no pin is left behind by a cancelled pass.
//
// # Determinism
//
// Where expert bytes come from (mmap or cache), which lane read them and in
// which order they arrived change only timing: the FFN stage sums expert
// outputs in top-k rank order and each expert's output depends only on its
// bytes and inputs. Tests check bit-identical logits across --io-threads,
// --cache-mb, --overlap, --prefetch, --prefetch-lanes, --prefetch-prompt, --huge-pages,
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
// engine.go: Engine, Open, load, Close; config.go: Config,
// EnsureDefaults, Validate, Inputs, Resolved, prepare and resolve; limits.go
// and budget.go: the memory checks and the expert-cache budget resolve
// applies; pipeline.go: the per-layer
// flow and the per-token meter; lossy.go: the lossy routing modes between
// the router and the source; source.go: the expert-source seam and the
// mapped source; stream.go: the streamed source; speculate.go: speculation
// and the warm start; fill.go: the cache fill; metrics.go: Engine.Metrics; session.go: a decode
// sequence and its per-token metrics; layers.go: a prompt pass's per-layer
// rows; score.go: scoring a sequence.
package stages
