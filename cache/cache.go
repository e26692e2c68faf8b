// Package cache is the expert cache of the streaming pipeline: the stage between
// the reader lanes and the FFN that keeps recently routed experts resident
// under a hard byte budget, so a hit costs no I/O.
//
// # Memory
//
// Expert bytes live in fixed-size slots of a slot arena: one anonymous private
// mapping outside the Go heap (so a multi-GiB cache costs the garbage collector
// nothing), reused slot by slot and never returned to the kernel while the
// cache is open (no madvise churn); its pages are faulted in on a goroutine
// of the arena's, PrefaultAhead bytes ahead of the slots in use (arena.go), or
// the whole arena once asked (PrefaultAll, for a cache that will fill), so the reads that fill new slots do not fault them themselves.
// After PrefaultAll a new entry takes a free slot the Prefaulter has reached,
// else evicts, and takes a slot whose pages are not yet present only when
// nothing can be evicted: the resident set grows at the Prefaulter's pace
// and a read never pays for faulting its destination while a reused slot
// would do (takeSlotLocked); a warm-start or fill read (Warm) never takes
// one: it waits for the Prefaulter instead (WarmNotFaulted, Faulting); nor
// does a guess (Prefetch) while warm-start entries are protected: it gets
// no slot (specSlotLocked).
// Every slot has Config.SlotBytes bytes: the largest span one expert's read
// needs (reader.SpanBytes of its ranges, a multiple of 4 KiB), so slots are
// interchangeable across layers.
//
// The budget is a HARD bound and is counted in slot bytes, not expert bytes:
// the arena holds floor(BudgetBytes/SlotBytes) slots and resident slot bytes
// (entries being read included) never exceed BudgetBytes. A small pool of
// transient slots (Config.TransientSlots, outside the budget, allocated once)
// serves misses when no resident slot can be had — budget 0, or every resident
// entry pinned or already used in the current batch — so any budget works,
// down to 0; transient entries are never cached.
//
// # Protocol
//
// Callers call Batch(step, layer) when a lookup batch (one decode (token,
// layer)) starts, then Acquire each routed expert:
//
//   - Hit: resident and filled; the handle pins it.
//   - InFlight: another caller is reading it (single flight); wait on
//     h.Ready() (or h.Wait), then check h.Err().
//   - Miss: the caller owns the read: fill h.Buf() (e.g. reader lanes) and call
//     h.Complete(err); waiters are released by it.
//
// Every handle must be Released once its user is done with Buf; a pinned entry
// is never evicted. Release of a Miss handle before Complete completes it with
// ErrAbandoned. A read that fails removes the entry (later Acquires start a
// new read). When Acquire needs a slot and none is free, evictable or
// transient, it blocks until a Release or Batch frees one, or ctx ends; so a
// caller must start the read of each Miss (submit it) before acquiring more
// keys.
//
// Admission: when a demand miss would evict, a policy that is an Admitter
// ("layer+admit") may refuse the newcomer in place of the victim; the miss
// is then served from a transient slot (read and used, never resident, the
// budget untouched) and the policy counts the lookup (Stats.Refused). With
// no transient slot free the newcomer is admitted rather than made to wait.
// Prefetch and Warm never evict for a refused key: they are not asked.
//
// Prefetch is the speculative variant: it never waits, never takes a
// transient slot and is not a lookup (not in the hit rate). Its handle is
// completed and released by the read's callback; a demand Acquire meanwhile
// joins it (InFlight) and afterwards hits. Warm (warm.go) is the warm-start
// variant: it also never evicts, taking only free resident slots, and its
// entries are evicted only when nothing else can be until the lookups have
// passed their layer (package warmstart's Guard keeps that account; so a
// prompt's misses do not push out the experts read for the layers ahead of
// it). The hot set that chooses those experts is package warmstart's.
//
// # Concurrency
//
// A Cache is safe for concurrent use. One mutex guards the map, the arena and
// the policy (Policy implementations are not concurrent); critical sections
// are short and contain no I/O; the time spent in them is reported as
// Stats.Mgmt (the mgmt_ms of the per-token CSV). Entries and handles that
// are done with are kept and reissued, so a hit, a miss and an eviction
// allocate nothing.
package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/warmstart"
)

// Sentinel errors; match them with errors.Is.
var (
	ErrConfig    = errors.New("cache: bad configuration")
	ErrSize      = errors.New("cache: expert larger than a slot")
	ErrClosed    = errors.New("cache: closed")
	ErrBusy      = errors.New("cache: handles still pinned")
	ErrAbandoned = errors.New("cache: miss released without Complete")
)

// DefaultTransientSlots is used when Config.TransientSlots is 0.
const DefaultTransientSlots = 8

// Config configures New.
type Config struct {
	// BudgetBytes bounds resident slot bytes (hard). 0 disables caching: every
	// miss uses a transient slot.
	BudgetBytes int64
	// SlotBytes is the size of one slot: a positive multiple of SlotAlign, at
	// least the largest size ever passed to Acquire (see SlotSize).
	SlotBytes int64
	// Policy chooses victims; required (e.g. NewPolicy("lru", PolicyOptions{})).
	Policy Policy
	// TransientSlots is the size of the transient pool (0: DefaultTransientSlots,
	// negative: none). Recommended: at least n_expert_used so a whole layer can
	// be in flight with budget 0.
	TransientSlots int
	// HugePages asks for transparent huge pages behind the slot arenas
	// (--huge-pages): O_DIRECT reads into them take far fewer device
	// segments and page pins (see internal/anon).
	HugePages bool
}

// Status is the outcome of Acquire.
type Status uint8

const (
	Miss     Status = iota // caller must fill Buf and Complete
	Hit                    // resident and ready
	InFlight               // being read by another caller; wait for Ready
)

func (s Status) String() string {
	switch s {
	case Miss:
		return "miss"
	case Hit:
		return "hit"
	case InFlight:
		return "in-flight"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

type state uint8

const (
	reading state = iota
	ready
	failed
)

type entry struct {
	key       Key
	slot      int32
	transient bool
	size      int64
	pins      int32
	state     state
	lastBatch uint64
	protected bool // a warm-start read whose layer the pipeline has not passed yet (warm.go)
	err       error
	done      chan struct{} // made when someone waits on a reading entry; closed by Complete
}

// Stats are cumulative counters; take deltas per token.
type Stats struct {
	Hits       int64 // Acquire found the expert resident and ready
	Joins      int64 // Acquire joined a read in flight (single flight)
	Misses     int64 // Acquire returned Miss (a read is needed)
	Transient  int64 // misses served by a transient slot (not cached)
	Refused    int64 // of those, misses the policy refused to admit (Admitter)
	Evictions  int64
	Failed     int64 // reads completed with an error
	Abandoned  int64 // misses released without a read (e.g. a withdrawn prefetch)
	Prefetches int64 // speculative reads started by Prefetch (not lookups)

	BytesAdmitted     int64 // expert bytes (Acquire's size) that became resident
	ResidentBytes     int64 // slot bytes held by resident entries (<= BudgetBytes)
	PeakResidentBytes int64
	ResidentEntries   int

	Pinned int // handles not yet released (entries in use by their holders)

	Waits    int64         // Acquire calls that had to wait for a slot
	WaitTime time.Duration // time they waited
	Mgmt     time.Duration // time spent in cache bookkeeping (mgmt_ms)

	BudgetBytes    int64
	SlotBytes      int64
	Slots          int // resident slots (BudgetBytes / SlotBytes)
	TransientSlots int
}

// Lookups are the Acquire calls by outcome. Their HitPct is the hit rate
// every output reports (metrics.Lookups defines it: a join is not a hit).
func (s Stats) Lookups() metrics.Lookups {
	return metrics.Lookups{Hits: s.Hits, Joins: s.Joins, Misses: s.Misses}
}

// Cache is the expert cache. See the package comment.
type Cache struct {
	mu      sync.Mutex
	cfg     Config
	policy  Policy
	res     *arena
	trans   *arena
	entries map[Key]*entry
	batch   uint64
	closed  bool
	handles int           // unreleased handles
	spare   []*Handle     // released handles, reissued by Acquire (no allocation per hit)
	freeEnt []*entry      // entries out of the map and unpinned, reissued (no allocation per miss)
	waiters int           // Acquires waiting on wake
	wake    chan struct{} // closed (and replaced) when a slot may have become available
	st      Stats
	elig    func(Key) bool
	// eligUnprotected is eligibleUnprotected, made once (a method value allocates)
	eligUnprotected func(Key) bool
	guard           warmstart.Guard // keeps unused warm-start entries until their layer is passed
}

// New maps the slot arenas and returns an empty cache.
func New(cfg Config) (*Cache, error) {
	if cfg.SlotBytes <= 0 || cfg.SlotBytes%SlotAlign != 0 {
		return nil, fmt.Errorf("%w: slot size %d is not a positive multiple of %d", ErrConfig, cfg.SlotBytes, SlotAlign)
	}
	if cfg.BudgetBytes < 0 {
		return nil, fmt.Errorf("%w: negative budget %d", ErrConfig, cfg.BudgetBytes)
	}
	if cfg.Policy == nil {
		return nil, fmt.Errorf("%w: no policy", ErrConfig)
	}
	nt := cfg.TransientSlots
	if nt == 0 {
		nt = DefaultTransientSlots
	}
	nt = max(nt, 0)
	nres := cfg.BudgetBytes / cfg.SlotBytes
	if nres > 1<<30 {
		return nil, fmt.Errorf("%w: %d slots", ErrConfig, nres)
	}
	res, err := newArena(cfg.SlotBytes, int(nres), cfg.HugePages)
	if err != nil {
		return nil, err
	}
	trans, err := newArena(cfg.SlotBytes, nt, cfg.HugePages)
	if err != nil {
		res.close()
		return nil, err
	}
	c := &Cache{
		cfg:     cfg,
		policy:  cfg.Policy,
		res:     res,
		trans:   trans,
		entries: make(map[Key]*entry, nres+int64(nt)),
		batch:   1,
		wake:    make(chan struct{}),
	}
	c.cfg.TransientSlots = nt
	c.st.BudgetBytes = cfg.BudgetBytes
	c.st.SlotBytes = cfg.SlotBytes
	c.st.Slots = int(nres)
	c.st.TransientSlots = nt
	c.elig = c.eligible
	c.eligUnprotected = c.eligibleUnprotected
	return c, nil
}

// PrefaultAll has the arenas' Prefaulters fault their whole memory in, on
// their own goroutines (it returns at once and never blocks a lookup),
// instead of PrefaultAhead bytes past the highest slot handed out: for a
// cache that will fill (a budget below the model's experts), whose memory
// is committed within its first prompt anyway. Reads into pages not yet
// present pay for allocating and zeroing them inside the read; on a loaded
// or virtual machine that held a cold prompt pass's reads to a fraction of
// the disk's rate until the cache filled (docs/measurements.md, issue 37).
func (c *Cache) PrefaultAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res == nil {
		return
	}
	c.res.prefaultAll()
	c.trans.prefaultAll()
}

// Faulted is how many bytes of the resident arena its Prefaulter has
// faulted in so far (from its start).
func (c *Cache) Faulted() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res == nil {
		return 0
	}
	return c.res.faulted()
}

// Policy returns the cache's replacement policy (do not call it concurrently
// with the cache).
func (c *Cache) Policy() Policy { return c.policy }

// SlotBytes returns the slot size.
func (c *Cache) SlotBytes() int64 { return c.cfg.SlotBytes }

// Batch starts a new lookup batch (one decode (token, layer)) and forwards it
// to the policy. Entries used in earlier batches become evictable again.
func (c *Cache) Batch(step, layer int) {
	t0 := time.Now()
	c.mu.Lock()
	c.batch++
	c.passLocked(step, layer)
	c.policy.Batch(step, layer)
	c.signalLocked()
	c.st.Mgmt += time.Since(t0)
	c.mu.Unlock()
}

// Contains reports whether key is resident and ready, without touching the
// policy or the statistics.
func (c *Cache) Contains(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	return e != nil && !e.transient && e.state == ready
}

// Acquire looks key up and pins it; size is the bytes the expert's read needs
// in its slot (reader.SpanBytes of its ranges, <= SlotBytes) and becomes the
// length of Buf. See the package comment for the meaning of each Status. On
// error no handle is returned.
func (c *Cache) Acquire(ctx context.Context, key Key, size int64) (*Handle, Status, error) {
	if size <= 0 || size > c.cfg.SlotBytes {
		return nil, Miss, fmt.Errorf("%w: %v needs %d bytes, slots have %d", ErrSize, key, size, c.cfg.SlotBytes)
	}
	t0 := time.Now()
	c.mu.Lock()
	var waited time.Duration
	waitedOnce := false
	for {
		if c.closed {
			c.st.Mgmt += time.Since(t0) - waited
			c.mu.Unlock()
			return nil, Miss, ErrClosed
		}
		if e := c.entries[key]; e != nil {
			e.pins++
			c.handles++
			if e.lastBatch != c.batch {
				e.lastBatch = c.batch
				if !e.transient {
					c.policy.OnHit(key)
				}
			}
			st := Hit
			if e.state == ready {
				c.st.Hits++
			} else {
				st = InFlight
				c.st.Joins++
			}
			h := c.handleLocked(e, false)
			c.st.Mgmt += time.Since(t0) - waited
			c.mu.Unlock()
			return h, st, nil
		}
		slot, transient, ok := c.takeSlotLocked(key, true)
		if ok {
			e := c.newEntryLocked(key, slot, transient, size)
			c.st.Misses++
			if transient {
				c.st.Transient++
			} else {
				c.policy.OnAdmit(key, size)
				c.st.BytesAdmitted += size
			}
			h := c.handleLocked(e, true)
			c.st.Mgmt += time.Since(t0) - waited
			c.mu.Unlock()
			return h, Miss, nil
		}
		// No slot: wait for a Release or Batch (or ctx).
		if !waitedOnce {
			waitedOnce = true
			c.st.Waits++
		}
		wake := c.wake
		c.waiters++
		c.mu.Unlock()
		w0 := time.Now()
		select {
		case <-wake:
		case <-ctx.Done():
			d := time.Since(w0)
			c.mu.Lock()
			c.waiters--
			c.st.WaitTime += d
			c.st.Mgmt += time.Since(t0) - waited - d
			c.mu.Unlock()
			return nil, Miss, fmt.Errorf("cache: waiting for a slot for %v: %w", key, ctx.Err())
		}
		d := time.Since(w0)
		waited += d
		c.mu.Lock()
		c.waiters--
		c.st.WaitTime += d
	}
}

// Prefetch starts a speculative read of key if that costs nothing but a
// resident slot: it never waits, never uses a transient slot and does not
// count as a lookup (no Hit/Miss, no OnHit). ok is true when the caller got a
// Miss handle in a resident slot and must fill it, Complete and Release it
// (typically both in the reader's Done callback); ok is false when key is
// already resident or in flight, or no slot is free or evictable right now
// (while warm-start entries wait for their layer a Prefetch evicts nothing
// and takes only a free slot whose pages are present: specSlotLocked).
// A later Acquire of key is a Hit, or an InFlight join while the read runs.
func (c *Cache) Prefetch(key Key, size int64) (h *Handle, ok bool, err error) {
	h, st, err := c.startRead(key, size, true)
	return h, st == WarmStarted, err
}

// startRead is Prefetch (evict set: specSlotLocked's slot)
// and Warm (a free slot only): a Miss handle on a new resident entry, or
// WarmPresent / WarmFull without one.
func (c *Cache) startRead(key Key, size int64, evict bool) (*Handle, WarmStatus, error) {
	if size <= 0 || size > c.cfg.SlotBytes {
		return nil, WarmFull, fmt.Errorf("%w: %v needs %d bytes, slots have %d", ErrSize, key, size, c.cfg.SlotBytes)
	}
	t0 := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.st.Mgmt += time.Since(t0) }()
	if c.closed {
		return nil, WarmFull, ErrClosed
	}
	if c.entries[key] != nil {
		return nil, WarmPresent, nil
	}
	var slot int32
	var ok bool
	switch {
	case evict:
		slot, ok = c.specSlotLocked()
	case c.res != nil && c.res.waitsForFault():
		return nil, WarmNotFaulted, nil
	default:
		slot, ok = c.freeSlotLocked()
	}
	if !ok {
		return nil, WarmFull, nil
	}
	e := c.newEntryLocked(key, slot, false, size)
	if !evict {
		c.protectLocked(e)
	}
	c.st.Prefetches++
	c.policy.OnAdmit(key, size)
	c.st.BytesAdmitted += size
	return c.handleLocked(e, true), WarmStarted, nil
}

// newEntryLocked puts a reading entry for key in slot into the map, pinned
// once, reusing a recycled entry when there is one.
func (c *Cache) newEntryLocked(key Key, slot int32, transient bool, size int64) *entry {
	var e *entry
	if n := len(c.freeEnt); n > 0 {
		e = c.freeEnt[n-1]
		c.freeEnt = c.freeEnt[:n-1]
	} else {
		e = new(entry)
	}
	*e = entry{key: key, slot: slot, transient: transient, size: size, pins: 1, state: reading, lastBatch: c.batch}
	c.entries[key] = e
	c.handles++
	return e
}

// recycleLocked keeps e — out of the map, unpinned, its slot handed on —
// for a later newEntryLocked. No handle refers to it any more.
func (c *Cache) recycleLocked(e *entry) {
	*e = entry{slot: -1}
	c.freeEnt = append(c.freeEnt, e)
}

// freeSlotLocked takes a free resident slot (never evicting).
func (c *Cache) freeSlotLocked() (int32, bool) {
	return c.countSlotLocked(c.res.get())
}

// warmSlotLocked takes a free resident slot whose pages are present
// (arena.getWarm; every free slot before PrefaultAll).
func (c *Cache) warmSlotLocked() (int32, bool) {
	return c.countSlotLocked(c.res.getWarm())
}

// countSlotLocked counts a slot taken from the free list as resident.
func (c *Cache) countSlotLocked(i int32, ok bool) (int32, bool) {
	if ok {
		c.st.ResidentBytes += c.cfg.SlotBytes
		c.st.ResidentEntries++
		c.st.PeakResidentBytes = max(c.st.PeakResidentBytes, c.st.ResidentBytes)
	}
	return i, ok
}

// takeSlotLocked finds a slot for a new entry for key: a free resident
// slot whose pages are present (warmSlotLocked), else a resident slot freed
// by evicting the policy's victim (unless an Admitter policy refuses key in
// its place: then a transient slot), else a free slot whose pages the read
// will fault in, else a transient slot. Only demand misses (allowTransient)
// can be refused. Before PrefaultAll every free slot is warm, so a free slot
// always goes before an eviction.
func (c *Cache) takeSlotLocked(key Key, allowTransient bool) (int32, bool, bool) {
	if i, ok := c.warmSlotLocked(); ok {
		return i, false, true
	}
	if c.res.n > 0 {
		if k, ok := c.victimLocked(); ok {
			if allowTransient {
				if i, refused := c.refuseLocked(key, k); refused {
					return i, true, true
				}
			}
			return c.evictLocked(k), false, true
		}
	}
	if i, ok := c.freeSlotLocked(); ok {
		return i, false, true
	}
	if allowTransient {
		if i, ok := c.trans.get(); ok {
			return i, true, true
		}
	}
	return -1, false, false
}

// evictLocked removes victim k (eligible) and returns its slot, which
// changes hands: resident bytes are unchanged.
func (c *Cache) evictLocked(k Key) int32 {
	v := c.entries[k]
	delete(c.entries, k)
	c.policy.OnEvict(k)
	c.st.Evictions++
	slot := v.slot
	c.recycleLocked(v)
	return slot
}

// specSlotLocked finds a slot for a speculative read: a free resident slot
// whose pages are present, else — once no warm-start entry waits for its
// layer — the slot of the policy's victim, else a free slot whose pages the
// read will fault in, as in takeSlotLocked. While a warm start's entries
// are protected a guess takes only free slots whose pages are present: the
// hot set put those entries there for the decode that follows, and a
// prompt's guesses evicting the entries of the layers it has passed cost
// that decode its hits (a served first request after a full warm start:
// 85 % hits without prompt guesses, 64 % with them evicting); and a guess
// into fresh pages faults them inside its read while the Prefaulter is
// still at the slots the warm start waits for — on a virtual machine the
// lanes then spent a warm-started prompt pass zeroing memory and read at a
// third of the disk's rate (docs/measurements.md, issue 37). The layer's
// demand reads, which evict, read those experts instead.
func (c *Cache) specSlotLocked() (int32, bool) {
	if i, ok := c.warmSlotLocked(); ok {
		return i, true
	}
	if c.guard.Active() {
		return -1, false
	}
	if c.res.n > 0 {
		if k, ok := c.policy.Victim(c.eligUnprotected); ok && c.eligUnprotected(k) {
			return c.evictLocked(k), true
		}
	}
	return c.freeSlotLocked()
}

// refuseLocked asks an Admitter policy whether key may take victim's slot;
// when it refuses and a transient slot is free, key gets that slot (read,
// used, never resident) and the policy counts the refused lookup. Without a
// free transient slot key is admitted after all rather than made to wait.
func (c *Cache) refuseLocked(key, victim Key) (int32, bool) {
	adm, ok := c.policy.(Admitter)
	if !ok || adm.Admit(key, victim) {
		return -1, false
	}
	i, ok := c.trans.get()
	if !ok {
		return -1, false
	}
	adm.OnRefuse(key)
	c.st.Refused++
	return i, true
}

func (c *Cache) eligible(k Key) bool {
	e := c.entries[k]
	return e != nil && !e.transient && e.pins == 0 && e.state == ready && e.lastBatch != c.batch
}

func (c *Cache) signalLocked() {
	if c.waiters == 0 {
		return
	}
	close(c.wake)
	c.wake = make(chan struct{})
}

// dropLocked returns e's slot to its arena and recycles e (no longer in the
// map, no pins left).
func (c *Cache) dropLocked(e *entry) {
	if e.transient {
		c.trans.put(e.slot)
	} else {
		c.res.put(e.slot)
		c.st.ResidentBytes -= c.cfg.SlotBytes
		c.st.ResidentEntries--
	}
	c.recycleLocked(e)
	c.signalLocked()
}

func (c *Cache) complete(h *Handle, err error) {
	t0 := time.Now()
	c.mu.Lock()
	c.completeLocked(h, err)
	c.st.Mgmt += time.Since(t0)
	c.mu.Unlock()
}

func (c *Cache) completeLocked(h *Handle, err error) {
	e := h.e
	if !h.owner || h.completed || e.state != reading {
		return
	}
	h.completed = true
	if err != nil {
		e.err = err
		e.state = failed
		if errors.Is(err, ErrAbandoned) {
			c.st.Abandoned++
		} else {
			c.st.Failed++
		}
		if c.entries[e.key] == e {
			delete(c.entries, e.key)
		}
		if !e.transient {
			c.policy.OnEvict(e.key)
		}
		// The slot is freed when the last pin goes.
	} else {
		e.state = ready
	}
	if e.done != nil {
		close(e.done)
	}
}

func (c *Cache) release(h *Handle) {
	t0 := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { c.st.Mgmt += time.Since(t0) }()
	if h.released {
		return
	}
	if h.owner && !h.completed {
		c.completeLocked(h, ErrAbandoned)
	}
	h.released = true
	c.handles--
	e := h.e
	c.spare = append(c.spare, h)
	e.pins--
	if e.pins > 0 {
		return
	}
	switch {
	case e.state == failed:
		c.dropLocked(e)
	case e.transient:
		if c.entries[e.key] == e {
			delete(c.entries, e.key)
		}
		c.dropLocked(e)
	default:
		c.signalLocked() // an unpinned resident entry may now be a victim
	}
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Pinned = c.handles
	return st
}

// Close unmaps the arenas. It fails with ErrBusy (and keeps the memory) while
// any handle is unreleased, because the slots are still in use. Acquire after
// Close fails with ErrClosed; blocked Acquires return ErrClosed.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed && c.res == nil {
		return nil
	}
	if c.handles > 0 {
		return fmt.Errorf("%w: %d handles not released", ErrBusy, c.handles)
	}
	c.closed = true
	c.signalLocked()
	for k := range c.entries {
		c.policy.OnEvict(k)
	}
	clear(c.entries)
	c.st.ResidentBytes, c.st.ResidentEntries = 0, 0
	err := errors.Join(c.res.close(), c.trans.close())
	c.res, c.trans = nil, nil
	return err
}

// Handle is one pin on a cache entry, returned by Acquire. It must be
// Released exactly once; an extra Release right after is ignored, but the
// cache reissues released handles to later Acquires (so a hit allocates
// nothing), so no method — Release included — may be called once another
// Acquire could have taken it. Its methods may be called from different
// goroutines (e.g. Complete from a reader lane while the owner waits on
// Ready); Buf must not be used after Release.
type Handle struct {
	c         *Cache
	e         *entry
	owner     bool // returned as Miss: must Complete
	completed bool
	released  bool
}

// handleLocked issues a handle on e, reusing a released one when it can.
func (c *Cache) handleLocked(e *entry, owner bool) *Handle {
	if n := len(c.spare); n > 0 {
		h := c.spare[n-1]
		c.spare = c.spare[:n-1]
		*h = Handle{c: c, e: e, owner: owner}
		return h
	}
	return &Handle{c: c, e: e, owner: owner}
}

// Key returns the entry's key.
func (h *Handle) Key() Key { return h.e.key }

// Transient reports whether the entry lives in a transient slot (not cached).
func (h *Handle) Transient() bool { return h.e.transient }

// Buf returns the entry's slot, size bytes long (Acquire's size), aligned to
// SlotAlign. A Miss owner fills it before Complete; others may read it after
// Ready when Err is nil, until Release.
func (h *Handle) Buf() []byte {
	e := h.e
	a := h.c.res
	if e.transient {
		a = h.c.trans
	}
	return a.buf(e.slot, e.size)
}

// closedDone is Ready's channel for an entry whose read has completed, and
// Faulting's when no Prefaulter will advance.
var closedDone = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Ready is closed when the entry's read completed (at once for a Hit). The
// channel is made only for an entry still being read, so a miss nobody
// joins allocates none.
func (h *Handle) Ready() <-chan struct{} {
	c, e := h.c, h.e
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.state != reading {
		return closedDone
	}
	if e.done == nil {
		e.done = make(chan struct{})
	}
	return e.done
}

// Err is the read's error; valid after Ready is closed.
func (h *Handle) Err() error {
	c, e := h.c, h.e
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.state == reading {
		return nil
	}
	return e.err
}

// Wait blocks until the entry is ready or ctx ends and returns the read's
// error or ctx's.
func (h *Handle) Wait(ctx context.Context) error {
	select {
	case <-h.Ready():
		return h.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Complete ends the read of a Miss: err nil makes the entry ready (and
// resident unless transient); an error removes it and is what waiters see.
// Only the Miss owner's first Complete counts; it may be called from any
// goroutine (e.g. a reader lane's Done callback).
func (h *Handle) Complete(err error) { h.c.complete(h, err) }

// Release unpins the entry. The handle and its Buf must not be used after.
func (h *Handle) Release() { h.c.release(h) }
