package decode

// slotfile.go: a sequence's cache saved to a file and restored (llama-server's
// /slots/{id}?action=save|restore): the token count and tokens (little-endian
// int32s), then model.State.Save's bytes. A Batch's slot is saved and
// restored on the scheduler goroutine while the slot is idle; a Session's by
// its one goroutine.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pipe-engine/pipe/model"
)

// Sentinel errors of slot persistence.
var (
	ErrNoSlot   = errors.New("no such slot")
	ErrSlotBusy = errors.New("slot is processing a request")
)

// saveSeq writes hist and st to w; it returns the bytes written.
func saveSeq(w io.Writer, hist []int32, st *model.State) (int64, error) {
	bw := bufio.NewWriter(w)
	if err := errors.Join(binary.Write(bw, binary.LittleEndian, uint32(len(hist))), binary.Write(bw, binary.LittleEndian, hist), bw.Flush()); err != nil {
		return 0, err
	}
	n, err := st.Save(w)
	return 4 + 4*int64(len(hist)) + n, err
}

// loadSeq reads what saveSeq wrote into st and returns its tokens and the
// bytes read; on an error st is empty.
func loadSeq(r io.Reader, st *model.State) ([]int32, int64, error) {
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", model.ErrStateFile, err)
	}
	if int(n) > st.NCtx {
		return nil, 4, fmt.Errorf("%w: %d tokens for a context of %d", model.ErrStateFile, n, st.NCtx)
	}
	hist := make([]int32, n)
	if err := binary.Read(r, binary.LittleEndian, hist); err != nil {
		return nil, 4, fmt.Errorf("%w: %w", model.ErrStateFile, err)
	}
	read, err := st.Load(r)
	read += 4 + 4*int64(n)
	if pos := st.Pos; err == nil && pos != len(hist) {
		st.Rewind(0)
		st.Pos = 0
		err = fmt.Errorf("%w: %d tokens for %d positions", model.ErrStateFile, len(hist), pos)
	}
	if err != nil {
		return nil, read, err
	}
	return hist, read, nil
}

// SlotFile is what a save or restore moved.
type SlotFile struct {
	Tokens int   // tokens in the cache
	Bytes  int64 // bytes written or read
}

// SaveSlot writes slot id's cache to w (refused while it serves a request).
func (b *Batch) SaveSlot(id int, w io.Writer) (SlotFile, error) {
	var f SlotFile
	err := b.control(id, func(sl *slot) (err error) {
		f.Tokens = len(sl.hist)
		f.Bytes, err = saveSeq(w, sl.hist, sl.st)
		return err
	})
	return f, err
}

// RestoreSlot replaces slot id's cache with what SaveSlot wrote to r; on an
// error the slot is left empty.
func (b *Batch) RestoreSlot(id int, r io.Reader) (SlotFile, error) {
	var f SlotFile
	err := b.control(id, func(sl *slot) error {
		hist, n, err := loadSeq(r, sl.st)
		sl.hist, f = hist, SlotFile{Tokens: len(hist), Bytes: n}
		return err
	})
	return f, err
}

// EraseSlot empties slot id's cache and returns the tokens it held.
func (b *Batch) EraseSlot(id int) (int, error) {
	n := 0
	err := b.control(id, func(sl *slot) error {
		n = len(sl.hist)
		sl.st.Rewind(0)
		sl.hist = sl.hist[:0]
		return nil
	})
	return n, err
}

// control runs f on idle slot id on the scheduler goroutine.
func (b *Batch) control(id int, f func(*slot) error) error {
	if id < 0 || id >= b.o.Slots {
		return fmt.Errorf("slot %d of %d: %w", id, b.o.Slots, ErrNoSlot)
	}
	c := ctl{id: id, f: f, done: make(chan error, 1)}
	select {
	case b.ctl <- c:
	case <-b.quit:
		return ErrBatchClosed
	}
	return <-c.done
}

// ctl is a control request for the scheduler.
type ctl struct {
	id   int // -1: none (Batch.Exclusive)
	f    func(*slot) error
	done chan error
}

// control runs c on its slot, unless the slot is busy; c of no slot (id
// -1, Batch.Exclusive) runs at once.
func (s *sched) control(c ctl) {
	if c.id < 0 {
		c.done <- c.f(nil)
		return
	}
	sl := s.slots[c.id]
	if sl.req != nil {
		c.done <- fmt.Errorf("slot %d: %w", c.id, ErrSlotBusy)
		return
	}
	err := c.f(sl)
	s.b.publish(s.slots) // Slots shows the change once the call returns
	c.done <- err
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
	hist, n, err := loadSeq(r, s.st.State)
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
