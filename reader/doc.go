// Package reader is the I/O stage of the streaming pipeline: it moves routed
// expert bytes (and, at load, the dense weights) from the model's shard files
// into memory the caller owns, and never computes.
//
// # Reads
//
// A read is a list of byte [Range]s (shard, offset, length) and a destination
// buffer. With O_DIRECT every range is widened to [BlockSize] (offset rounded
// down, end rounded up, see [Widen]) and read into the destination at the next
// block-aligned position; the exact slice lies inside the widened block run, at
// the offset [Offsets] reports. The destination must be [BlockSize]-aligned and
// at least [SpanBytes] long; cache slots (anonymous mmap, page aligned)
// qualify. The layout is the same when the buffered
// fallback is in use, so callers never need to know which mode served a read.
//
// # Modes and fallback
//
// [Open] opens every shard twice: once with O_DIRECT and once normally. If
// O_DIRECT is disabled ([Options.NoODirect]) or the file system rejects it with
// EINVAL at open or at read time (tmpfs, some FUSE file systems), the [Files]
// switch permanently to buffered pread, report it once through [Options.Logf]
// and from then on [Files.ODirect] returns false (the run summary's o_direct=0).
// A short read (the file ends before the requested slice) is [ErrShortRead]; any
// other failure (EIO …) is [ErrRead] wrapping the cause. Both name the file, the
// offset and the caller's label (e.g. "layer 3 expert 17").
//
// # Lanes
//
// [Lanes] is a fixed pool of goroutines (the --io-threads reader lanes) that
// take [Request]s from three bounded queues, demand first, speculative
// (prefetch) only when no demand request waits, and then on at most
// [LaneOptions].SpecLanes lanes at once so guesses leave most of the device to
// demand reads, and background (the cache fill's reads) only when neither
// waits, within the same bound. [Lanes.Submit] blocks while
// the queue is full (requests are never dropped). Every accepted request has its Done
// callback called exactly once, from a lane goroutine: with nil or the read
// error after the read, or with the context's error if the lanes' context was
// cancelled before the read started. Speculative requests may instead be
// offered with [Lanes.Offer], which never blocks (a full queue refuses them)
// and returns a [Ticket]: until a lane starts the read, the submitter can
// Withdraw it (Done then gets [ErrWithdrawn], in the withdrawing goroutine) or
// Promote it to the demand queue. A task claimed by a lane or by Withdraw is
// claimed once, atomically, so Done still runs exactly once. A lane reads a request's ranges (cut in
// pieces of at most 4 MiB) with up to [PieceParallelism] preads at once, so
// one expert's slices are in flight together: the lane goroutine and its
// PieceParallelism-1 helper goroutines, which live as long as the lane. A
// demand request's task is reused once served, so a steady stream of reads
// allocates nothing. Cancelling the lanes' context
// makes them fail what is queued and exit; [Lanes.Close] stops accepting, lets
// the lanes finish the queue and waits for them; no goroutine outlives Close.
//
// # Ownership and concurrency
//
// [Files] is safe for concurrent use (pread has no shared file position).
// During a read the destination buffer belongs to the reader; the caller must
// not touch it until Done has been called. Counters ([Lanes.Stats]) are atomic
// and may be read at any time.
package reader
