package decode

// slotfile.go: a sequence's cache saved to a file and restored (llama-server's
// /slots/{id}?action=save|restore). The framing is llama.cpp's sequence state
// file as llama-server 3f545becc writes it (llama_state_seq_save_file of
// server_tokens::serialize): little-endian uint32s — the magic 'ggsq'
// (0x67677371), version 2, the payload's word count — then the payload: the
// marker -1 (LLAMA_TOKEN_NULL), the packed version 1, the token count, the
// tokens, and 0 media chunks. A payload that does not start with -1 is the
// plain token list older servers wrote, and is read as one too. After the
// payload comes pipe's own state (model.State.Save: "PIPEKV1\n", the shape,
// the KV rows and recurrent states), not llama.cpp's: a file restores only
// into a model and slot context of the shape it was saved from, and a
// llama-server file is refused at its state. A file is untrusted on
// restore: every count is bounded by the slot's context before anything is
// allocated, the tokens must be in the vocabulary, the token count must
// match the positions of the state and nothing may follow it; any other
// file is ErrStateFile naming the field, and leaves the slot empty. A
// Batch's slot is saved, restored and erased on the scheduler goroutine
// while the slot is idle: an action on a busy slot waits until its request
// ends (llama-server defers the task), before any request queued for the
// slot, unless its context ends first; a Session's runs on its one
// goroutine.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/pipe-engine/pipe/model"
)

// ErrNoSlot: a slot action named a slot the Batch does not have.
var ErrNoSlot = errors.New("no such slot")

// The sequence state file's header and the packed token payload's
// constants (llama.h's LLAMA_STATE_SEQ_MAGIC and _VERSION, llama-server's
// LLAMA_TOKEN_NULL and SERVER_TOKENS_STATE_VERSION).
const (
	seqMagic      = 0x67677371 // 'ggsq'
	seqVersion    = 2
	tokenNull     = -1
	packedVersion = 1
)

// saveSeq writes hist and st to w; it returns the bytes written.
func saveSeq(w io.Writer, hist []int32, st *model.State) (int64, error) {
	bw := bufio.NewWriter(w)
	head := []int32{seqMagic, seqVersion, int32(len(hist) + 4), tokenNull, packedVersion, int32(len(hist))}
	err := errors.Join(binary.Write(bw, binary.LittleEndian, head), binary.Write(bw, binary.LittleEndian, hist),
		binary.Write(bw, binary.LittleEndian, uint32(0)), bw.Flush()) // no media chunks
	if err != nil {
		return 0, err
	}
	n, err := st.Save(w)
	return 4*int64(len(head)+len(hist)+1) + n, err
}

// loadSeq reads what saveSeq wrote into st and returns its tokens and the
// bytes read; on an error st is empty.
func loadSeq(r io.Reader, st *model.State, nVocab int) ([]int32, int64, error) {
	br := bufio.NewReader(r) // st.Load reads on through the same buffer
	hist, read, err := loadTokens(br, st.NCtx, nVocab)
	if err == nil {
		var n int64
		n, err = st.Load(br)
		read += n
	}
	if err == nil {
		err = checkEnd(br, st, len(hist))
	}
	if err != nil {
		st.Rewind(0)
		st.Pos = 0
		return nil, read, fmt.Errorf("%w: %w", model.ErrStateFile, err)
	}
	return hist, read, nil
}

// checkEnd checks that the state holds a position per token and that
// nothing follows it.
func checkEnd(br *bufio.Reader, st *model.State, tokens int) error {
	if st.Pos != tokens {
		return fmt.Errorf("state: %d positions for %d tokens", st.Pos, tokens)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("data after the state (at most the state's %d positions are read)", st.Pos)
	}
	return nil
}

// loadTokens reads the header and the token payload, at most nCtx tokens,
// each below nVocab.
func loadTokens(br *bufio.Reader, nCtx, nVocab int) ([]int32, int64, error) {
	var head [3]uint32
	if err := binary.Read(br, binary.LittleEndian, &head); err != nil {
		return nil, 0, fmt.Errorf("header: %w", err)
	}
	if head[0] != seqMagic || head[1] != seqVersion {
		return nil, 12, fmt.Errorf("header: magic %#08x version %d, want %#08x ('ggsq') version %d", head[0], head[1], seqMagic, seqVersion)
	}
	if int64(head[2]) > int64(nCtx)+4 {
		return nil, 12, fmt.Errorf("payload: %d words for a context of %d tokens", head[2], nCtx)
	}
	words := make([]int32, head[2])
	if err := binary.Read(br, binary.LittleEndian, words); err != nil {
		return nil, 12, fmt.Errorf("payload of %d words: %w", len(words), err)
	}
	read := 12 + 4*int64(len(words))
	hist, err := unpackTokens(words)
	if err == nil && len(hist) > nCtx {
		err = fmt.Errorf("payload: %d tokens for a context of %d", len(hist), nCtx)
	}
	for i := 0; err == nil && i < len(hist); i++ {
		if hist[i] < 0 || int(hist[i]) >= nVocab {
			err = fmt.Errorf("payload: token %d is %d, not in the vocabulary (0..%d)", i, hist[i], nVocab-1)
		}
	}
	return hist, read, err
}

// unpackTokens reads llama-server's packed payload (marker, version,
// tokens, no media), or a plain token list.
func unpackTokens(w []int32) ([]int32, error) {
	if len(w) == 0 || w[0] != tokenNull {
		return w, nil // a plain token list, as older servers wrote
	}
	if len(w) < 4 || w[1] != packedVersion {
		return nil, fmt.Errorf("payload: packed tokens of %d words, version %v; want version %d", len(w), w[1:min(2, len(w))], packedVersion)
	}
	n := int64(uint32(w[2]))
	if n > int64(len(w))-4 {
		return nil, fmt.Errorf("payload: %d tokens in %d words", n, len(w))
	}
	rest := w[3+n:]
	if rest[0] != 0 {
		return nil, fmt.Errorf("payload: %d media chunks (Cannot restore media tokens without an mmproj: pipe reads text only)", uint32(rest[0]))
	}
	if len(rest) > 1 {
		return nil, fmt.Errorf("payload: %d words after the tokens (Trailing data in server tokens state)", len(rest)-1)
	}
	return w[3 : 3+n], nil
}

// SlotFile is what a save or restore moved.
type SlotFile struct {
	Tokens int   // tokens in the cache
	Bytes  int64 // bytes written or read
}

// SaveSlot writes slot id's cache to w, once the slot is idle.
func (b *Batch) SaveSlot(ctx context.Context, id int, w io.Writer) (SlotFile, error) {
	var f SlotFile
	err := b.control(ctx, id, func(sl *slot) (err error) {
		f.Tokens = len(sl.hist)
		f.Bytes, err = saveSeq(w, sl.hist, sl.st)
		return err
	})
	return f, err
}

// RestoreSlot replaces slot id's cache with what SaveSlot wrote to r, once
// the slot is idle; on an error the slot is left empty.
func (b *Batch) RestoreSlot(ctx context.Context, id int, r io.Reader) (SlotFile, error) {
	var f SlotFile
	err := b.control(ctx, id, func(sl *slot) error {
		hist, n, err := loadSeq(r, sl.st, b.m.tok.NVocab())
		sl.hist, f = hist, SlotFile{Tokens: len(hist), Bytes: n}
		return err
	})
	return f, err
}

// EraseSlot empties slot id's cache, once the slot is idle, and returns
// the tokens it held.
func (b *Batch) EraseSlot(ctx context.Context, id int) (int, error) {
	n := 0
	err := b.control(ctx, id, func(sl *slot) error {
		n = len(sl.hist)
		sl.st.Rewind(0)
		sl.hist = sl.hist[:0]
		return nil
	})
	return n, err
}

// control runs f on slot id on the scheduler goroutine once the slot is
// idle; if ctx ends first, f never runs and the error is ctx's.
func (b *Batch) control(ctx context.Context, id int, f func(*slot) error) error {
	if id < 0 || id >= b.o.Slots {
		return fmt.Errorf("slot %d of %d: %w", id, b.o.Slots, ErrNoSlot)
	}
	c := &ctl{id: id, f: f, done: make(chan error, 1)}
	select {
	case b.ctl <- c:
	case <-b.quit:
		return ErrBatchClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		if c.state.CompareAndSwap(ctlWaiting, ctlAbandoned) {
			return ctx.Err()
		}
		return <-c.done // it is running: its result
	}
}

// ctl is a slot action for the scheduler.
type ctl struct {
	id    int // -1: none (Batch.Exclusive)
	f     func(*slot) error
	done  chan error   // capacity one
	state atomic.Int32 // ctlWaiting, then ctlRunning (the scheduler) or ctlAbandoned (the caller)
}

const (
	ctlWaiting = iota
	ctlRunning
	ctlAbandoned
)

// control runs c on its slot, or defers it while the slot is busy; c of
// no slot (id -1, Batch.Exclusive) runs at once.
func (s *sched) control(c *ctl) {
	if c.id < 0 {
		if c.state.CompareAndSwap(ctlWaiting, ctlRunning) {
			c.done <- c.f(nil)
		}
		return
	}
	if s.slots[c.id].req != nil {
		s.deferred = append(s.deferred, c)
		if s.b.onDefer != nil {
			s.b.onDefer()
		}
		return
	}
	if !c.state.CompareAndSwap(ctlWaiting, ctlRunning) {
		return // its caller has gone
	}
	err := c.f(s.slots[c.id])
	s.b.publish(s.slots) // Slots shows the change once the call returns
	c.done <- err
}

// runDeferred runs the deferred actions whose slots are idle now, in the
// order they came.
func (s *sched) runDeferred() {
	waiting := s.deferred[:0]
	for _, c := range s.deferred {
		if s.slots[c.id].req != nil {
			waiting = append(waiting, c)
			continue
		}
		s.control(c)
	}
	clear(s.deferred[len(waiting):])
	s.deferred = waiting
}

// Save writes the session's cache to w (as SaveSlot does a slot's).
func (s *Session) Save(w io.Writer) (SlotFile, error) {
	if s.st == nil {
		return SlotFile{}, fmt.Errorf("decode: save of a session without a cache (size it first)")
	}
	n, err := saveSeq(w, s.hist, s.st.State)
	return SlotFile{Tokens: len(s.hist), Bytes: n}, err
}

// Restore replaces the session's cache with what Save or SaveSlot wrote
// to r; on an error the cache is left empty.
func (s *Session) Restore(r io.Reader) (SlotFile, error) {
	if s.st == nil {
		return SlotFile{}, fmt.Errorf("decode: restore into a session without a cache (size it first)")
	}
	hist, n, err := loadSeq(r, s.st.State, s.m.tok.NVocab())
	s.hist, s.unfed = hist, -1
	return SlotFile{Tokens: len(hist), Bytes: n}, err
}

// Erase empties the session's cache and returns the tokens it held.
func (s *Session) Erase() int {
	n := len(s.hist)
	if s.st != nil {
		s.st.State.Rewind(0)
	}
	s.hist, s.unfed = s.hist[:0], -1
	return n
}
