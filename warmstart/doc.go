// Package warmstart is the warm start of the streaming pipeline: what the
// expert cache holds before a run's first token needs it.
//
// A hot set (HotSet, hotset.go) is the popularity of every expert of a model
// — how often the router picked it, decayed over runs — tied to the model
// file by a ModelID (FileID: the shards' size and the header's SHA-256),
// saved when a run ends and read when the next one starts. A Run (run.go)
// is one run's account: the hot set read at its start, whose hottest experts
// (Hottest) are the ones to warm-start, and the run's own routings (Add),
// saved for the next run as their sum with Decay × the earlier popularity.
// Options and DefaultPath (id.go) say where the file is kept (--hot-set,
// Auto: the user cache directory) and whether a warm start reads it
// (--warm-start).
//
// Who uses it: package decode keeps a model's Run and hands its hottest keys
// to the engine (package stages, Config.WarmKeys); package prefetch reads
// them into free cache slots in Order (order.go: layer by layer, starting
// after the layer the pipeline looked up last) and counts them in Stats —
// and, when the cache holds every expert, the cache fill's keys (every
// other expert, Planner.Fill) the same way, in a Stats of their own;
// package cache keeps the entries they fill from being evicted until the
// pipeline has passed their layer, by a Guard (guard.go). Key names an
// expert as cache.Key does (a caller converts one to the other), so that
// this package imports neither the cache nor the model (only gguf, for the
// file's identity, and internal/safefile).
//
// File format (text, version 1):
//
//	pipe hot set v1
//	model size=<bytes of all shards> header_sha256=<hex>
//	layers=<n>
//	L <layer> <experts> <popularity of expert 0> … (one line per layer)
//	end crc32=<IEEE CRC-32 of every byte before this line, 8 hex digits>
//
// A file whose version, model identity or shape does not match, or that fails
// to parse or its checksum, is refused (ErrStale, ErrCorrupt): a hot set only
// ever decides what is read speculatively, so a refused one costs the warm
// start and nothing else. Save writes atomically and never replaces a file
// that is not a hot set (CheckReplace, ErrNotHotSet), nor an input of the
// run.
package warmstart
