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

// TestHitsBeforeMisses: with one lane and a demand queue of one, a layer's
// resident expert reaches the FFN while no read has finished, even when it
// comes after more misses than the queue holds in router-rank order: the
// disk holds every read until the hit has arrived (planned behind the
// misses, it would never arrive: the hang guard fails the test).
func TestHitsBeforeMisses(t *testing.T) {
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
	disk := newHeldReads(false)
	files, err := reader.Open([]string{path}, reader.Options{NoODirect: true, Open: func(p string, direct bool) (reader.File, error) {
		f, err := os.Open(p)
		return hookFile{f: f, before: disk.hook}, err
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
	plan := func(step int, ids []int) (chan expert.Ready, chan error) {
		out := make(chan expert.Ready, len(ids))
		errc := make(chan error, 1)
		go func() { errc <- p.Plan(ctx, step, 0, ids, out) }()
		return out, errc
	}
	next := func(out chan expert.Ready) expert.Ready {
		select {
		case rd := <-out:
			if rd.Err != nil {
				t.Fatal(rd.Err)
			}
			return rd
		case <-time.After(hangGuard):
			disk.let()
			t.Fatalf("no expert reached the FFN in %v", hangGuard)
		}
		return expert.Ready{}
	}
	out, errc := plan(1, []int{5}) // expert 5 becomes resident
	next(out).Release()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	disk.hold()
	ids := []int{0, 1, 2, 3, 5}
	out, errc = plan(2, ids)
	if rd := next(out); rd.Expert != 5 {
		t.Errorf("expert %d reached the FFN first, want the resident 5", rd.Expert)
		rd.Release()
	} else {
		rd.Release()
	}
	disk.let()
	for range ids[1:] {
		next(out).Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
