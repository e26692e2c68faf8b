package serve

// slotfile.go: llama-server's slot persistence, POST /slots/{id}?action=
// save|restore|erase, with files in Options.SlotSavePath (--slot-save-path;
// without it every action is 501, as llama-server's), named and opened as
// slotname.go checks them. The file is llama-server 3f545becc's sequence
// state framing (the 'ggsq' header and its packed token list; a plain
// token list is read too) around pipe's own state (decode/slotfile.go), not
// llama.cpp's KV bytes; a file restores only into a model and slot context
// of the shape it was saved from. An action on a busy slot waits until
// its request ends (llama-server defers it; decode.Batch.SaveSlot), or the
// client goes. The answers are llama-server's: save
// {id_slot, filename, n_saved, n_written, timings.save_ms}, restore
// {…, n_restored, n_read, timings.restore_ms}, erase {id_slot, n_erased};
// a bad slot ID, action or file name is 400 ("Invalid slot ID", "Invalid
// action", "Invalid filename"), a failed restore 400 "Unable to restore
// slot: …" naming the file and field, leaving the slot empty, and a failed
// save 500 "Unable to save slot: …". The restoring request's tenant
// becomes the slot's owner (tenant.go) and may reuse any prefix of it (it
// chose the file; the file's prompt length is not kept). The actions are
// for whoever holds the API key: anyone who may call them may save any
// slot and restore it, so the tenant rule does not separate callers of
// them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
)

// slotAPI is POST /slots/{id}: a slot's cache saved, restored, erased.
type slotAPI struct{ parts }

// action is POST /slots/{id}?action=save|restore|erase.
func (s *slotAPI) action(x *exchange) {
	if s.o.SlotSavePath == "" {
		s.rq.fail(x, http.StatusNotImplemented, "not_supported_error", errors.New("This server does not support slots action. Start it with `--slot-save-path`"))
		return
	}
	id, err := strconv.Atoi(x.r.PathValue("id"))
	if err != nil || id < 0 || id >= s.gen.totalSlots() {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", fmt.Errorf("Invalid slot ID %q: %w", x.r.PathValue("id"), decode.ErrNoSlot))
		return
	}
	switch a := x.r.URL.Query().Get("action"); a {
	case "save", "restore":
		s.slotFileAction(x, id, a)
	case "erase":
		n, err := s.slotErase(x.r.Context(), id)
		if err != nil {
			s.slotFail(x, err, http.StatusInternalServerError)
			return
		}
		_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]any{"id_slot": id, "n_erased": n})
	default:
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", fmt.Errorf("Invalid action %q (save, restore or erase)", a))
	}
}

// slotFileAction is a save or restore of slot id to or from the file the
// body names.
func (s *slotAPI) slotFileAction(x *exchange, id int, action string) {
	body, ok := s.rq.readBody(x)
	if !ok {
		return
	}
	var r struct {
		Filename string `json:"filename"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", jsonError(err))
		return
	}
	if !validSlotFile(r.Filename) {
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", fmt.Errorf("%w %q: llama-server's file name rules (no path separators, no '..')", errSlotName, r.Filename))
		return
	}
	t0 := time.Now()
	if action == "save" {
		f, err := s.slotSave(x.r.Context(), id, r.Filename)
		if err != nil {
			s.slotFail(x, fmt.Errorf("Unable to save slot: %w", err), http.StatusInternalServerError)
			return
		}
		_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]any{"id_slot": id, "filename": r.Filename,
			"n_saved": f.Tokens, "n_written": f.Bytes, "timings": map[string]float64{"save_ms": ms(time.Since(t0))}})
		return
	}
	f, err := s.slotRestore(x.r.Context(), id, r.Filename, tenantOf(x.r, ""))
	if err != nil {
		s.slotFail(x, fmt.Errorf("Unable to restore slot: slot file %s: %w", r.Filename, err), http.StatusBadRequest)
		return
	}
	_ = writeJSON(x.w, s.o.WriteTimeout, http.StatusOK, map[string]any{"id_slot": id, "filename": r.Filename,
		"n_restored": f.Tokens, "n_read": f.Bytes, "timings": map[string]float64{"restore_ms": ms(time.Since(t0))}})
}

// slotFail answers a failed slot action: an unknown slot, a file name
// refused, a missing file or one of another shape 400, else status.
func (s *slotAPI) slotFail(x *exchange, err error, status int) {
	switch {
	case errors.Is(err, decode.ErrNoSlot) || errors.Is(err, model.ErrStateFile) || errors.Is(err, os.ErrNotExist) || errors.Is(err, errSlotName) || status == http.StatusBadRequest:
		s.rq.fail(x, http.StatusBadRequest, "invalid_request_error", err)
	default:
		s.rq.fail(x, status, "server_error", err)
	}
}

// slotSave writes slot id to the file name in SlotSavePath.
func (s *slotAPI) slotSave(ctx context.Context, id int, name string) (decode.SlotFile, error) {
	var f decode.SlotFile
	err := writeSlotFile(s.o.SlotSavePath, name, func(w io.Writer) (err error) {
		f, err = s.onSlot(ctx, id, func(save func(io.Writer) (decode.SlotFile, error)) (decode.SlotFile, error) { return save(w) }, nil)
		return err
	})
	return f, err
}

// slotRestore reads slot id from the file name in SlotSavePath; who owns
// the restored cache.
func (s *slotAPI) slotRestore(ctx context.Context, id int, name string, who tenant) (decode.SlotFile, error) {
	in, err := openSlotFile(s.o.SlotSavePath, name)
	if err != nil {
		_, _ = s.slotErase(ctx, id) // as llama-server's: a failed restore leaves the slot empty
		return decode.SlotFile{}, err
	}
	defer in.Close()
	return s.onSlot(ctx, id, nil, func(restore func(io.Reader) (decode.SlotFile, error)) (decode.SlotFile, error) {
		f, err := restore(in)
		s.setOwner(id, kvOwner{who: who, seen: err == nil}) // n 0: any prefix of it
		return f, err
	})
}

// slotErase empties slot id.
func (s *slotAPI) slotErase(ctx context.Context, id int) (int, error) {
	if s.gen.batch != nil {
		s.setOwner(id, kvOwner{})
		return s.gen.batch.b.EraseSlot(ctx, id)
	}
	release, err := s.gen.slot.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	s.gen.slot.ownerSeen = false
	return s.gen.slot.sess.Erase(), nil
}

// onSlot runs a save (save set) or a restore of slot id: the batch's, or
// the one session's in the decode slot.
func (s *slotAPI) onSlot(ctx context.Context, id int,
	save func(func(io.Writer) (decode.SlotFile, error)) (decode.SlotFile, error),
	restore func(func(io.Reader) (decode.SlotFile, error)) (decode.SlotFile, error)) (decode.SlotFile, error) {
	saver, restorer := func(w io.Writer) (decode.SlotFile, error) { return s.gen.batch.b.SaveSlot(ctx, id, w) },
		func(r io.Reader) (decode.SlotFile, error) { return s.gen.batch.b.RestoreSlot(ctx, id, r) }
	if s.gen.batch == nil {
		release, err := s.gen.slot.acquire(ctx)
		if err != nil {
			return decode.SlotFile{}, err
		}
		defer release()
		saver, restorer = s.gen.slot.sess.Save, s.gen.slot.sess.Restore
	}
	if save != nil {
		return save(saver)
	}
	return restore(restorer)
}

// setOwner sets slot id's KV owner.
func (s *slotAPI) setOwner(id int, o kvOwner) {
	if s.gen.batch != nil {
		s.gen.batch.mu.Lock()
		s.gen.batch.owners[id] = o
		s.gen.batch.mu.Unlock()
		return
	}
	s.gen.slot.owner, s.gen.slot.ownerSeen, s.gen.slot.ownerLen = o.who, o.seen, o.n // in the decode slot
}
