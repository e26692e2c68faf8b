package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestParallelSlots: with Parallel 3 the server has 3 slots of Ctx/3
// positions (/slots, /props), 4 concurrent greedy /completion requests —
// one more than the slots, so one queues — each get llama.cpp's greedy
// continuation, and a request whose prompt extends an earlier one of the
// same tenant goes to that request's slot and reuses its KV.
func TestParallelSlots(t *testing.T) {
	h := start(t, func(o *Options) { o.Parallel, o.SlotSimilarity = 3, 0.1 })
	slots := h.get("/slots").([]any)
	if len(slots) != 3 {
		t.Fatalf("/slots: %d slots, want 3", len(slots))
	}
	for i, s := range slots {
		m := s.(map[string]any)
		if _, ok := m["params"]; m["id"] != float64(i) || m["n_ctx"] != float64(256/3) || m["is_processing"] != false || ok {
			t.Fatalf("/slots[%d] before any request (llama-server shows no params yet): %v", i, m)
		}
	}
	if p := h.get("/props").(map[string]any); p["total_slots"] != 3.0 {
		t.Fatalf("/props total_slots %v", p["total_slots"])
	}
	names := []string{"p1_village", "p2_capital", "p1_village", "p2_capital"}
	var wg sync.WaitGroup
	got := make([]map[string]any, len(names))
	errs := make([]error, len(names))
	for i, name := range names {
		g := loadGolden(t, name)
		ids, _ := json.Marshal(g.PromptTokens)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = postJSON(h, "/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"return_tokens":true,"cache_prompt":false}`, ids))
		}()
	}
	wg.Wait()
	for i, name := range names {
		g := loadGolden(t, name)
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if r := got[i]; !slices.Equal(ints(r["tokens"]), g.GeneratedTokens[:8]) || r["content"] != h.expected(g.GeneratedTokens[:8]) {
			t.Errorf("request %d (%s): %v, want %v", i, name, r["tokens"], g.GeneratedTokens[:8])
		}
	}
	// every batched pass is logged (debug level) with the slots in it
	shared := 0
	for _, e := range h.logs.events(t, "step") {
		if e["slots"].(float64) > 1 && e["tokens"].(float64) >= e["slots"].(float64) {
			shared++
		}
	}
	if shared == 0 {
		t.Fatalf("no step event of a pass over several slots among %d", len(h.logs.events(t, "step")))
	}
	// the same tenant's prompt, then that prompt extended: the second goes
	// to the first's slot and reuses its whole prompt (the slots holding
	// the whole golden prompt share more of it, but the tenant rule lets a
	// prompt reuse only a cache whose whole prompt it extends), and
	// generates what the prompt fed whole does
	g := loadGolden(t, "p1_village")
	first, _ := json.Marshal(g.PromptTokens[:10])
	ext, _ := json.Marshal(g.PromptTokens[:13])
	a := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":1}`, first), 200)
	b := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"return_tokens":true}`, ext), 200)
	c := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"return_tokens":true,"cache_prompt":false}`, ext), 200)
	if b["id_slot"] != a["id_slot"] || b["timings"].(map[string]any)["cache_n"] != 10.0 || !slices.Equal(ints(b["tokens"]), ints(c["tokens"])) {
		t.Fatalf("extended prompt: slot %v after %v, cache_n %v, tokens %v, fed whole %v", b["id_slot"], a["id_slot"],
			b["timings"].(map[string]any)["cache_n"], b["tokens"], c["tokens"])
	}
	if s := h.get("/slots").([]any)[int(a["id_slot"].(float64))].(map[string]any); s["params"] == nil {
		t.Fatalf("/slots after a request: no params in %v", s)
	}
}

// TestParallelUnified: with KVUnified every slot's context is the whole -c
// (/slots), and a request longer than -c/--parallel runs and gets its
// greedy continuation.
func TestParallelUnified(t *testing.T) {
	h := start(t, func(o *Options) { o.Parallel, o.KVUnified = 8, true })
	for i, s := range h.get("/slots").([]any) {
		if m := s.(map[string]any); m["n_ctx"] != 256.0 {
			t.Fatalf("/slots[%d]: %v, want n_ctx 256 (the pool)", i, m)
		}
	}
	g := loadGolden(t, "p1_village")
	ids, _ := json.Marshal(g.PromptTokens)
	n := len(g.GeneratedTokens)
	if len(g.PromptTokens)+n <= 256/8 {
		t.Fatalf("prompt %d + %d tokens fits a split slot of %d: the test proves nothing", len(g.PromptTokens), n, 256/8)
	}
	r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":%d,"return_tokens":true}`, ids, n), 200)
	if !slices.Equal(ints(r["tokens"]), g.GeneratedTokens[:n]) {
		t.Fatalf("unified slot: %v, want %v", r["tokens"], g.GeneratedTokens[:n])
	}
}

// postJSON posts body and decodes a 200 JSON answer (safe off the test's
// goroutine: it returns errors instead of failing).
func postJSON(h *harness, path, body string) (map[string]any, error) {
	resp, err := h.post(context.Background(), path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var m map[string]any
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

// TestParallelOptions: a split that leaves a slot too small, or a
// similarity outside 0..1, is refused by New.
func TestParallelOptions(t *testing.T) {
	h := start(t, nil)
	for _, o := range []Options{{Model: h.m, Ctx: 8, Parallel: 8}, {Model: h.m, Ctx: 64, Parallel: 2, SlotSimilarity: 1.5}, {Model: h.m, Ctx: 64, Parallel: -1}} {
		if s, err := New(o); err == nil {
			s.Close()
			t.Errorf("New(ctx %d, parallel %d, similarity %g): no error", o.Ctx, o.Parallel, o.SlotSimilarity)
		}
	}
}

// TestSlotSaveRestore: POST /slots/{id}?action=save|erase|restore moves a
// slot's cache to a file in SlotSavePath and back, with llama-server's
// answer fields; a restored cache is reused by its tenant's next prompt
// (cache_n) with the golden continuation — with one session and with 2
// slots. Without SlotSavePath the actions are 501; a path in the file
// name, an unknown slot or action, and a missing file are 400.
func TestSlotSaveRestore(t *testing.T) {
	g := loadGolden(t, "p1_village")
	head, _ := json.Marshal(g.PromptTokens[:10])
	whole, _ := json.Marshal(g.PromptTokens)
	for _, parallel := range []int{1, 2} {
		t.Run(fmt.Sprint("parallel ", parallel), func(t *testing.T) {
			dir := t.TempDir()
			h := start(t, func(o *Options) { o.Parallel, o.SlotSavePath, o.SlotSimilarity = parallel, dir, 0.1 })
			a := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":1}`, head), 200)
			id := int(a["id_slot"].(float64))
			path := fmt.Sprintf("/slots/%d?action=", id)
			sv := h.do(path+"save", `{"filename":"a.bin"}`, 200)
			if sv["id_slot"] != float64(id) || sv["filename"] != "a.bin" || sv["n_saved"].(float64) < 10 || sv["n_written"].(float64) <= 0 {
				t.Fatalf("save: %v", sv)
			}
			if er := h.do(path+"erase", `{}`, 200); er["n_erased"] != sv["n_saved"] {
				t.Fatalf("erase: %v after save %v", er, sv)
			}
			rs := h.do(path+"restore", `{"filename":"a.bin"}`, 200)
			if rs["n_restored"] != sv["n_saved"] || rs["n_read"] != sv["n_written"] {
				t.Fatalf("restore: %v after save %v", rs, sv)
			}
			b := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":8,"return_tokens":true}`, whole), 200)
			if b["id_slot"] != float64(id) || b["timings"].(map[string]any)["cache_n"] != 10.0 || !slices.Equal(ints(b["tokens"]), g.GeneratedTokens[:8]) {
				t.Fatalf("after the restore: slot %v, cache_n %v, tokens %v", b["id_slot"], b["timings"].(map[string]any)["cache_n"], b["tokens"])
			}
			h.do(path+"save", `{"filename":"../a.bin"}`, 400)
			h.do(path+"restore", `{"filename":"missing.bin"}`, 400)
			h.do(path+"shred", `{}`, 400)
			h.do("/slots/9?action=erase", `{}`, 400)
		})
	}
	h := start(t, nil)
	h.do("/slots/0?action=save", `{"filename":"a.bin"}`, 501)
}

// TestIDSlot: /completion's id_slot runs the request on that slot (the
// answer's id_slot, the slot's cache in /slots), with one session and
// with slots; a slot the server does not have is a 400 naming id_slot.
func TestIDSlot(t *testing.T) {
	g := loadGolden(t, "p1_village")
	ids, _ := json.Marshal(g.PromptTokens)
	for _, parallel := range []int{1, 3} {
		h := start(t, func(o *Options) { o.Parallel = parallel })
		for _, id := range []int{parallel - 1, -1} {
			r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":4,"id_slot":%d,"return_tokens":true}`, ids, id), 200)
			if id >= 0 && r["id_slot"] != float64(id) || !slices.Equal(ints(r["tokens"]), g.GeneratedTokens[:4]) {
				t.Fatalf("parallel %d, id_slot %d: ran on %v, %v", parallel, id, r["id_slot"], r["tokens"])
			}
		}
		r := h.do("/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":4,"id_slot":%d}`, ids, parallel), 400)
		if msg := fmt.Sprint(r["error"]); !strings.Contains(msg, "id_slot") {
			t.Fatalf("parallel %d, id_slot %d: %s", parallel, parallel, msg)
		}
	}
}
