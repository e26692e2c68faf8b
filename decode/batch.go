package decode

// batch.go: continuous batching. A Batch holds N slots, each one sequence
// (its own KV rows and recurrent state; with Unified, the slots' KV rows
// share one pool of positions); one scheduler goroutine owns them
// and runs forward passes over every slot that has work: a decoding slot
// feeds its last token, a slot with a prompt feeds its next chunk of up to
// Ubatch tokens, all in one stages.Engine.ForwardBatch, so each layer's
// experts are read once for the whole batch. Requests join (a free slot, the
// one whose cache shares the longest prefix with the prompt) and leave
// between passes. Each request's sampler runs on the scheduler goroutine;
// its token callback runs on the request's own goroutine (Generate's
// caller), and a slot feeds its next token only once the callback has
// returned — so a slow client holds back its own slot, never the others,
// and a token the callback stops at is never fed, as in Session.Generate.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

// ErrBatchClosed: the Batch was closed before or during the request.
var ErrBatchClosed = errors.New("decode: batch closed")

// BatchOptions configure NewBatch.
type BatchOptions struct {
	Slots int // sequences decoded together (at least 1)
	Ctx   int // KV positions of each slot (at least 2)
	// Ubatch is the most prompt tokens a slot feeds in one pass (0:
	// stages.PrefillChunk): a long prompt joins the decoding slots chunk by
	// chunk instead of stalling them for its whole length.
	Ubatch int
	// Similarity is llama-server's --slot-prompt-similarity: a request goes
	// to the free slot whose cache shares the largest fraction of its
	// prompt when that fraction is above Similarity, else to the free slot
	// used least recently (0: always the least recently used).
	Similarity float64
	// Unified makes the slots share one pool of Ctx positions
	// (llama-server's --kv-unified) instead of Ctx each: any slot may fill
	// up to Ctx, and the pool's memory is counted once. When a pass would
	// fill more than Ctx positions over all slots, idle slots' caches are
	// dropped, least recently used first; if that is not enough, the busy
	// slot that would hold the most positions ends with ErrPoolFull.
	Unified bool
	// OnStep, if set, receives every pass's Step on the scheduler
	// goroutine after the pass (it must not block).
	OnStep func(Step)
}

// Step is one batched pass as the metrics report it: its I/O is what the
// engine's counters gained since the previous pass ended (expert reads a
// pass's speculation started may land after it, and count in the next).
// The pass's expert I/O is shared by its tokens: a slot that fed k of the pass's Tokens is
// charged k/Tokens of its ReadBytes, Stall and Lookups (in its Result:
// PrefillReadBytes for a prompt chunk, DecodeReadBytes and Lookups for a
// generated token, Stall for both). The shares of every slot in a pass add
// up to the pass's figures, and the passes' to the engine's counters, so a
// request's MiB per token, the server's and the CSV's agree.
type Step struct {
	Pass         int64 // the Batch's pass number, from 1
	Seqs         int   // slots in the pass
	Tokens       int   // tokens fed: prompt chunks and generated tokens
	PromptTokens int   // of them, prompt tokens
	Wall, Stall  time.Duration
	ReadBytes    int64
	// Lookups are the pass's expert-cache lookups: one per distinct expert
	// a layer's tokens routed to, however many of them chose it.
	Lookups metrics.Lookups
}

// ioShare is a slot's running share of the passes it took part in (Step).
type ioShare struct {
	prefillRead, decodeRead float64
	hits, joins, misses     float64
	stall                   float64 // nanoseconds
}

// charge adds k of step's tokens, of the prompt or generated. Each
// product is rounded before the sum (float64(f*x)), so arm64 does not fuse
// it into a multiply-add and the shares are the same bits on every CPU.
func (io *ioShare) charge(st Step, k int, prompt bool) {
	if st.Tokens == 0 {
		return
	}
	f := float64(k) / float64(st.Tokens)
	if prompt {
		io.prefillRead += float64(f * float64(st.ReadBytes))
	} else {
		io.decodeRead += float64(f * float64(st.ReadBytes))
		io.hits += float64(f * float64(st.Lookups.Hits))
		io.joins += float64(f * float64(st.Lookups.Joins))
		io.misses += float64(f * float64(st.Lookups.Misses))
	}
	io.stall += float64(f * float64(st.Stall))
}

// fill writes the share into r (rounded to whole bytes, lookups, ns).
func (io *ioShare) fill(r *Result) {
	r.PrefillReadBytes, r.DecodeReadBytes = int64(math.Round(io.prefillRead)), int64(math.Round(io.decodeRead))
	r.Lookups = metrics.Lookups{Hits: int64(math.Round(io.hits)), Joins: int64(math.Round(io.joins)), Misses: int64(math.Round(io.misses))}
	r.Stall = time.Duration(math.Round(io.stall))
}

// ErrPoolFull: a unified pool (BatchOptions.Unified) had no room for a
// slot's next positions, even with every idle slot's cache dropped.
var ErrPoolFull = fmt.Errorf("%w: the slots' shared KV pool is full (Context size has been exceeded.)", model.ErrContextFull)

// Request is one generation on a Batch.
type Request struct {
	IDs   []int32       // the whole prompt (a cached prefix is not fed again)
	Chain *sample.Chain // the request's sampler (nil: greedy)
	// MaxTokens is how many tokens to generate at most; negative: until
	// end-of-generation or the slot's context is full.
	MaxTokens int
	IgnoreEOS bool
	NoCache   bool // feed the whole prompt, keeping nothing of the slot's cache
	// PinSlot runs the request on slot Slot (llama-server's id_slot),
	// waiting for it while it is busy, instead of on any free slot.
	PinSlot bool
	Slot    int
	// MayReuse, if set, tells whether the request may keep the prefix it
	// shares with slot's cached tokens hist (false: the slot counts as
	// sharing nothing). OnSlot, if set, learns the slot the request got.
	// Both run on the scheduler goroutine and must not block.
	MayReuse func(slot int, hist []int32) bool
	OnSlot   func(slot int)
	// Given is when the prompt was given (zero: when Generate was called).
	Given time.Time
	// OnPrompt, if set, follows the prompt on the caller's goroutine, before
	// the first token: once when the request gets its slot (fed 0; cached:
	// the prompt tokens the slot's cache held), then after each Batch of
	// the rest fed (0: after each pass's chunk), the last at fed = all of
	// it. An error from it ends the request.
	OnPrompt func(cached, fed int) error
	Batch    int
}

// SlotInfo is a slot as /slots shows it.
type SlotInfo struct {
	ID         int
	Ctx        int  // KV positions
	Processing bool // serving a request
	Served     bool // it has taken a request since the Batch opened
	Tokens     int  // tokens in its cache
}

// Batch runs the generations of up to Slots requests in shared forward
// passes. Its methods are safe for concurrent use; the Model must not run
// any other forward pass (Session) while the Batch is open.
type Batch struct {
	m      *Model
	o      BatchOptions
	submit chan *request
	events chan event
	ctl    chan *ctl // slot save, restore, erase (slotfile.go)
	quit   chan struct{}
	done   chan struct{}

	onDefer func() // a test's hook: a slot action was deferred (scheduler goroutine)

	mu       sync.Mutex
	info     []SlotInfo       // the slots as of the last pass
	counters metrics.Counters // the engine's, as of the last pass
}

// request is a Generate call as the scheduler sees it.
type request struct {
	ctx    context.Context
	r      Request
	tokens chan Token  // to the caller (capacity 1: one token in flight)
	prompt chan [2]int // {cached, fed} for OnPrompt (sized never to block)
	fin    chan Result // the end (capacity 1)
	err    error       // set before fin is sent
}

// event is a request's caller telling the scheduler its callback returned
// err for the last token (nil: go on), or that its context ended.
type event struct {
	req *request
	err error
}

// NewBatch makes o.Slots slots of o.Ctx positions each (with o.Unified,
// sharing o.Ctx positions) and starts the scheduler goroutine (Close stops
// it).
func (m *Model) NewBatch(o BatchOptions) (*Batch, error) {
	if o.Slots < 1 || o.Ctx < 2 || o.Ubatch < 0 || o.Similarity < 0 || o.Similarity > 1 {
		return nil, fmt.Errorf("%w: batch of %d slots of %d positions, ubatch %d, similarity %g", stages.ErrConfig, o.Slots, o.Ctx, o.Ubatch, o.Similarity)
	}
	if o.Ubatch == 0 {
		o.Ubatch = stages.PrefillChunk
	}
	b := &Batch{m: m, o: o, submit: make(chan *request), events: make(chan event, o.Slots), ctl: make(chan *ctl),
		quit: make(chan struct{}), done: make(chan struct{})}
	states, err := m.slotStates(o)
	if err != nil {
		return nil, err
	}
	slots := make([]*slot, o.Slots)
	for i, st := range states {
		slots[i] = &slot{id: i, st: st}
	}
	b.publish(slots)
	go b.loop(slots)
	return b, nil
}

// slotStates are the states of o's slots: o.Ctx positions each, or one
// pool of o.Ctx positions with o.Unified.
func (m *Model) slotStates(o BatchOptions) ([]*model.State, error) {
	if o.Unified {
		return m.eng.NewPool(o.Slots, o.Ctx, m.o.KV)
	}
	out := make([]*model.State, o.Slots)
	for i := range out {
		st, err := m.eng.NewSession(o.Ctx, m.o.KV)
		if err != nil {
			return nil, fmt.Errorf("slot %d: %w", i, err)
		}
		out[i] = st.State
	}
	return out, nil
}

// Slots reports the slots as of the last pass.
func (b *Batch) Slots() []SlotInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.info)
}

// Counters are the engine's counters as of the last pass: the engine's own
// are the scheduler goroutine's to read while the Batch is open.
func (b *Batch) Counters() metrics.Counters {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counters
}

// Close stops the scheduler: requests still running end with
// ErrBatchClosed. It is safe to call twice.
func (b *Batch) Close() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
}

// Generate runs r on a slot (waiting for one while all are busy) and calls
// onToken (nil: none) for each generated token on the caller's goroutine;
// returning ErrStop ends the generation after that token (not fed), any
// other error aborts it. A cancelled ctx frees the slot before the next
// pass. The Result's PromptTokens are the prompt tokens fed (the rest were
// the slot's cache).
func (b *Batch) Generate(ctx context.Context, r Request, onToken func(Token) error) (Result, error) {
	if len(r.IDs) == 0 {
		return Result{}, ErrEmptyPrompt
	}
	if r.PinSlot && (r.Slot < 0 || r.Slot >= b.o.Slots) {
		return Result{}, fmt.Errorf("slot %d of %d: %w", r.Slot, b.o.Slots, ErrNoSlot)
	}
	if r.Given.IsZero() {
		r.Given = time.Now()
	}
	q := &request{ctx: ctx, r: r, tokens: make(chan Token, 1), fin: make(chan Result, 1)}
	if r.OnPrompt != nil { // the start and at most one report per pass's chunk
		q.prompt = make(chan [2]int, 2+len(r.IDs)/b.o.Ubatch)
	}
	select {
	case b.submit <- q:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-b.quit:
		return Result{}, ErrBatchClosed
	}
	return b.follow(q, onToken)
}

// follow hands q's tokens to onToken and its answers to the scheduler until
// q ends.
func (b *Batch) follow(q *request, onToken func(Token) error) (Result, error) {
	cancelled := false
	for {
		select {
		case p := <-q.prompt:
			if err := q.r.OnPrompt(p[0], p[1]); err != nil && !cancelled {
				cancelled = true
				b.send(event{req: q, err: err})
			}
		case t := <-q.tokens:
			err := b.drainPrompt(q)
			if err == nil {
				err = call(onToken, t)
			}
			if err == nil && t.EOG {
				err = ErrStop // the generation ends at an EOG either way
			}
			b.send(event{req: q, err: err})
		case res := <-q.fin:
			if err := b.drainPrompt(q); err != nil && q.err == nil {
				return res, err
			}
			return res, q.err
		case <-q.ctx.Done():
			if !cancelled {
				cancelled = true
				b.send(event{req: q, err: q.ctx.Err()})
			}
		}
	}
}

// drainPrompt hands OnPrompt the prompt reports queued before a token or
// the end (the scheduler sends them first).
func (b *Batch) drainPrompt(q *request) error {
	for {
		select {
		case p := <-q.prompt:
			if err := q.r.OnPrompt(p[0], p[1]); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// send hands the scheduler an event (dropped once it has stopped).
func (b *Batch) send(e event) {
	select {
	case b.events <- e:
	case <-b.done:
	}
}

// publish records the slots for Slots.
func (b *Batch) publish(slots []*slot) {
	info := make([]SlotInfo, len(slots))
	for i, s := range slots {
		info[i] = SlotInfo{ID: s.id, Ctx: s.st.NCtx, Processing: s.req != nil, Served: s.served, Tokens: len(s.hist)}
	}
	c := b.m.eng.Metrics().Counters
	b.mu.Lock()
	b.info, b.counters = info, c
	b.mu.Unlock()
}

// slot is one sequence of a Batch, owned by the scheduler goroutine.
type slot struct {
	id     int
	st     *model.State
	hist   []int32 // tokens in st, in order
	used   int64   // the pass it last served a request in (least recently used choice)
	served bool    // it has taken a request

	req     *request
	feed    []int32 // prompt tokens still to feed
	n       int     // tokens to generate at most
	res     Result
	io      ioShare // its share of the passes it took part in (Step)
	stream  textStream
	next    int32 // the last sampled token
	waiting bool  // its token is with the caller; feed it once answered
	ending  bool  // the last token is with the caller; end once answered
	t0      time.Time
	first   time.Time
}

// textStream is the tokenizer's incremental detokenizer.
type textStream interface {
	Add(id int32) string
	Flush() string
}

// now and since are the clock of the Batch's timings.
func now() time.Time                  { return time.Now() }
func since(t time.Time) time.Duration { return time.Since(t) }
