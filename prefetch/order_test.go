package prefetch

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/reader"
)

// TestHitsBeforeMisses: with one slow lane and a demand queue of one, a
// layer's resident expert reaches the FFN at once even when it comes after
// more misses than the queue holds in router-rank order.
func TestHitsBeforeMisses(t *testing.T) {
	const delay = 80 * time.Millisecond
	const experts = 6
	var lay fileLayout
	row := make([][]reader.Range, experts)
	for e := range row {
		row[e] = []reader.Range{{Off: int64(e) * 8192, Len: 5000}}
	}
	lay.ranges = [][][]reader.Range{row}
	data := make([]byte, experts*8192)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := reader.Open([]string{path}, reader.Options{NoODirect: true, Open: func(p string, direct bool) (reader.File, error) {
		f, err := os.Open(p)
		return slowFile{f: f, delay: delay}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lanes, err := reader.Start(ctx, files, reader.LaneOptions{Lanes: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lanes.Close()
	pol, _ := cache.NewPolicy("lru", cache.PolicyOptions{})
	c, err := cache.New(cache.Config{BudgetBytes: 8 * 16384, SlotBytes: 16384, Policy: pol, TransientSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := New(c, lanes, lay, nil, 0)
	defer p.Close()
	// hitAt plans ids and returns when expert 5 reached the FFN.
	hitAt := func(step int, ids []int) time.Duration {
		out := make(chan expert.Ready, len(ids))
		t0 := time.Now()
		errc := make(chan error, 1)
		go func() { errc <- p.Plan(ctx, step, 0, ids, out) }()
		var at time.Duration
		for range ids {
			rd := <-out
			if rd.Err != nil {
				t.Fatal(rd.Err)
			}
			if rd.Expert == 5 {
				at = time.Since(t0)
			}
			rd.Release()
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		return at
	}
	hitAt(1, []int{5}) // expert 5 becomes resident
	if at := hitAt(2, []int{0, 1, 2, 3, 5}); at > delay/2 {
		t.Errorf("the hit arrived after %v, behind the misses' reads (one read takes %v)", at, delay)
	}
}
