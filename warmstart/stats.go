package warmstart

// Stats count a warm start's reads (the planner's account of them), or the
// cache fill's (the same reads at background priority, of every expert the
// warm start did not read).
type Stats struct {
	Issued    int64 // reads offered to the lanes
	Completed int64 // of those, read into the cache
	Bytes     int64 // the cache bytes of the completed reads (reader.SpanBytes of their ranges)
	Withdrawn int64 // taken back unread (the warm start was stopped)
	Failed    int64 // ended with an error (a read error, or the run ended before a lane read it)
	Promoted  int64 // moved to demand priority because a demand lookup joined them
	Used      int64 // warmed experts a demand lookup later found (hit or join)
	Full      bool  // the warm start stopped because no free slot was left
}
