package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/model/gen"
	"github.com/pipe-engine/pipe/stages"
)

// openPreset generates a tiny model of preset and opens it.
func openPreset(t *testing.T, preset string) *Model {
	t.Helper()
	path := filepath.Join(t.TempDir(), preset+".gguf")
	if _, err := gen.GenerateFile(context.Background(), gen.Options{Preset: preset, Quant: "Q8_0", Seed: 5, RoutingSkew: gen.DefaultRoutingSkew}, path); err != nil {
		t.Fatal(err)
	}
	m, err := Open(context.Background(), Options{
		Engine: stages.Config{Path: path, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 1 << 20, Policy: "lru"},
			Threads: 2, Log: zerolog.Nop()},
		KV: model.KVF32,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSlotFileContinues: on 2 slots, a request stopped after k tokens, its
// slot saved, erased and restored into the other slot, then continued with
// its prompt and those k tokens, generates exactly the tokens of an
// uninterrupted run — for an attention family (qwen3moe) and recurrent ones
// (qwen3next, nemotron-h), with the other slot decoding a request of its
// own beside the continuation. The legacy plain token list (the file
// rewritten as test_slot_restore_legacy_token_list does) restores the same.
func TestSlotFileContinues(t *testing.T) {
	const n, k = 10, 4
	prompt := []int32{300, 32, 113, 117, 105, 278, 293, 372, 110, 287, 111, 120}
	other := []int32{77, 78, 79, 80, 81, 82, 83}
	for _, preset := range []string{"qwen3moe", "qwen3next-tiny", "nemotron-h-moe-tiny"} {
		t.Run(preset, func(t *testing.T) {
			var m *Model
			if preset == "qwen3moe" {
				m = open(t, stages.StreamOn, 0)
			} else {
				m = openPreset(t, preset)
			}
			want := [][]int32{pinned(t, nil, m, 0, prompt, n, false), pinned(t, nil, m, 0, other, n, false)}
			b := newBatch(t, m, BatchOptions{Slots: 2, Ctx: 64})
			first := pinned(t, b, m, 1, prompt, k, false)
			if !slices.Equal(first, want[0][:k]) {
				t.Fatalf("first %d tokens %v, want %v", k, first, want[0][:k])
			}
			var file bytes.Buffer
			saved, err := b.SaveSlot(context.Background(), 1, &file)
			if err != nil || saved.Tokens != len(prompt)+k-1 || saved.Bytes != int64(file.Len()) {
				t.Fatalf("save: %+v (%d bytes) %v", saved, file.Len(), err)
			}
			if _, err := b.EraseSlot(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			for name, f := range map[string][]byte{"packed": file.Bytes(), "plain list": plainList(t, file.Bytes())} {
				if got, err := b.RestoreSlot(context.Background(), 0, bytes.NewReader(f)); err != nil || got.Tokens != saved.Tokens || got.Bytes != int64(len(f)) {
					t.Fatalf("%s: restore %+v %v", name, got, err)
				}
				var wg sync.WaitGroup
				var beside []int32
				wg.Go(func() { beside = pinned(t, b, m, 1, other, n, false) })
				rest := pinned(t, b, m, 0, append(slices.Clone(prompt), first...), n-k, true)
				wg.Wait()
				if !slices.Equal(append(slices.Clone(first), rest...), want[0]) || !slices.Equal(beside, want[1]) {
					t.Fatalf("%s: restored and continued %v+%v, uninterrupted %v; beside it %v, alone %v", name, first, rest, want[0], beside, want[1])
				}
			}
		})
	}
}

// pinned runs ids on slot id of b (nil: a fresh Session of m) for n
// greedy tokens; with reuse it checks that only the prompt's tokens beyond
// the slot's cache were fed.
func pinned(t *testing.T, b *Batch, m *Model, id int, ids []int32, n int, reuse bool) []int32 {
	t.Helper()
	if b == nil {
		s, err := m.NewSession(SessionOptions{Sampling: greedy, Ctx: 64})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(context.Background(), ids, GenOptions{MaxTokens: n, IgnoreEOS: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	cached := b.Slots()[id].Tokens
	res, err := b.Generate(context.Background(), Request{IDs: ids, Chain: greedyChain(t), MaxTokens: n, IgnoreEOS: true, PinSlot: true, Slot: id}, nil)
	if err != nil {
		t.Error(err)
		return nil
	}
	if reuse && res.PromptTokens != len(ids)-cached {
		t.Errorf("slot %d held %d tokens of %d: fed %d", id, cached, len(ids), res.PromptTokens)
	}
	return res.Tokens
}

// plainList rewrites a slot file's packed payload into the plain token
// list older servers wrote (as llama.cpp's test does).
func plainList(t *testing.T, f []byte) []byte {
	t.Helper()
	words := binary.LittleEndian.Uint32(f[8:])
	n := binary.LittleEndian.Uint32(f[20:])
	out := append([]byte{}, f[:8]...)
	out = binary.LittleEndian.AppendUint32(out, n)
	out = append(out, f[24:24+4*n]...)
	return append(out, f[12+4*words:]...)
}

// TestSlotFileUntrusted: a slot file is untrusted input. Every truncation
// of a good file, and every corruption of a field (magic, version, counts
// beyond the context, a token outside the vocabulary, media chunks, data
// after the tokens or the state, positions that are not the tokens'), is
// refused with ErrStateFile naming the field, never a panic, and leaves
// the session empty; the good file then restores.
func TestSlotFileUntrusted(t *testing.T) {
	m := open(t, stages.StreamOn, 0)
	s, err := m.NewSession(SessionOptions{Sampling: greedy, Ctx: 32})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Generate(context.Background(), []int32{300, 32, 113, 117, 105}, GenOptions{MaxTokens: 3}, nil); err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	if _, err := s.Save(&good); err != nil {
		t.Fatal(err)
	}
	f := good.Bytes()
	set := func(off int, v uint32) []byte {
		c := slices.Clone(f)
		binary.LittleEndian.PutUint32(c[off:], v)
		return c
	}
	nTok := int(binary.LittleEndian.Uint32(f[20:]))
	afterTok := 24 + 4*nTok
	bad := map[string]struct {
		f     []byte
		field string
	}{
		"magic":          {set(0, 0x67676c61), "header"},
		"version":        {set(4, 1), "header"},
		"huge payload":   {set(8, 1<<31), "payload"},
		"packed version": {set(16, 9), "payload"},
		"huge tokens":    {set(20, 1<<30), "payload"},
		"vocabulary":     {set(24, 1<<20), "token 0"},
		"negative token": {set(28, 0xfffffff0), "token 1"},
		"media":          {set(afterTok, 1), "media"},
		"payload words":  {set(8, binary.LittleEndian.Uint32(f[8:])+1), ""},
		"state after":    {append(slices.Clone(f), 0), "after the state"},
		"positions":      {plainDrop(f), "positions"},
	}
	for name, c := range bad {
		checkRefused(t, s, name, c.f, c.field)
	}
	for cut := range len(f) {
		checkRefused(t, s, "truncated", f[:cut], "")
	}
	if got, err := s.Restore(bytes.NewReader(f)); err != nil || got.Tokens != nTok || len(s.Tokens()) != nTok {
		t.Fatalf("the good file: %+v %v", got, err)
	}
}

// plainDrop rewrites f as a plain token list one token short of the
// state's positions.
func plainDrop(f []byte) []byte {
	n := binary.LittleEndian.Uint32(f[20:])
	words := binary.LittleEndian.Uint32(f[8:])
	out := binary.LittleEndian.AppendUint32(slices.Clone(f[:8]), n-1)
	out = append(out, f[24:24+4*(n-1)]...)
	return append(out, f[12+4*words:]...)
}

// checkRefused restores f into s and wants ErrStateFile naming field and
// an empty session.
func checkRefused(t *testing.T, s *Session, name string, f []byte, field string) {
	t.Helper()
	_, err := s.Restore(bytes.NewReader(f))
	if !errors.Is(err, model.ErrStateFile) || !strings.Contains(err.Error(), field) || len(s.Tokens()) != 0 || s.st.State.Pos != 0 {
		t.Fatalf("%s (%d bytes): %v (want ErrStateFile naming %q), %d tokens, %d positions left", name, len(f), err, field, len(s.Tokens()), s.st.State.Pos)
	}
}

// FuzzSlotFile: no bytes make a restore panic, and any it accepts hold a
// position per token, each in the vocabulary.
func FuzzSlotFile(f *testing.F) {
	m, err := Open(context.Background(), Options{
		Engine: stages.Config{Path: tinyQ8, IO: stages.IOConfig{Lanes: 1}, Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"}, Threads: 1, Log: zerolog.Nop()},
		KV:     model.KVF32,
	})
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{Sampling: greedy, Ctx: 16})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.Generate(context.Background(), []int32{300, 32, 113}, GenOptions{MaxTokens: 2}, nil); err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	if _, err := s.Save(&good); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := s.Restore(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, model.ErrStateFile) {
				t.Fatalf("%v is not ErrStateFile", err)
			}
			return
		}
		for _, id := range s.Tokens() {
			if id < 0 || int(id) >= m.Tokenizer().NVocab() {
				t.Fatalf("restored token %d", id)
			}
		}
		if got.Tokens != s.st.State.Pos {
			t.Fatalf("%d tokens for %d positions", got.Tokens, s.st.State.Pos)
		}
	})
}
