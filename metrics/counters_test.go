package metrics

import (
	"testing"
	"time"
)

func TestCounters(t *testing.T) {
	c := Counters{Decode: Lookups{Hits: 6, Joins: 2, Misses: 2}, Prompt: Lookups{Hits: 1, Misses: 9},
		ReadBytes: 100, Stall: time.Second, Streaming: true, Cached: true}
	if pct, ok := c.HitPct(); !ok || pct != 60 {
		t.Errorf("HitPct = %v, %v; want 60 (a join is not a hit, prompt lookups do not count)", pct, ok)
	}
	b := Counters{Decode: Lookups{Hits: 1, Misses: 1}, ReadBytes: 40, Stall: time.Millisecond}
	d := c.Sub(b)
	if want := (Lookups{Hits: 5, Joins: 2, Misses: 1}); d.Decode != want || d.ReadBytes != 60 || d.Stall != 999*time.Millisecond || !d.Cached {
		t.Errorf("Sub = %+v", d)
	}
	if _, ok := (Counters{Decode: Lookups{Hits: 3}, Streaming: true}).HitPct(); ok {
		t.Error("a hit rate without a cache")
	}
	if _, ok := (Counters{Cached: true}).HitPct(); ok {
		t.Error("a hit rate without lookups")
	}
	if l := (Lookups{Hits: 1, Joins: 2, Misses: 3}).Add(Lookups{Hits: 1}); l.Total() != 7 {
		t.Errorf("Add: %+v", l)
	}
}
