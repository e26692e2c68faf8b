package cache

import (
	"context"
	"testing"
)

// coldAdmitter is LRU that refuses every key of expert ≥ 100 in place of a
// resident one, and counts the refusals it was told about.
type coldAdmitter struct {
	Policy
	refused []Key
}

func (p *coldAdmitter) Admit(k, victim Key) bool { return k.Expert < 100 }
func (p *coldAdmitter) OnRefuse(k Key)           { p.refused = append(p.refused, k) }

// TestAdmissionRefusal: a miss the policy refuses is served from a
// transient slot and used, the victim stays resident, resident bytes stay
// within the budget, and the refused key leaves with its last pin; a miss
// that finds a free slot is never asked about, and without a free
// transient slot a refused key is admitted rather than made to wait.
func TestAdmissionRefusal(t *testing.T) {
	pol := &coldAdmitter{Policy: lru(t)}
	c, err := New(Config{BudgetBytes: slot, SlotBytes: slot, Policy: pol, TransientSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	acquire := func(k Key, want Status) *Handle {
		t.Helper()
		h, st, err := c.Acquire(ctx, k, slot)
		if err != nil || st != want {
			t.Fatalf("%v: %v %v, want %v", k, st, err, want)
		}
		if st == Miss {
			fill(h.Buf(), k)
			h.Complete(nil)
		}
		return h
	}
	hot, cold := Key{0, 1}, Key{0, 100}
	c.Batch(0, 0)
	acquire(hot, Miss).Release() // a free slot: admitted without asking
	c.Batch(1, 0)
	h := acquire(cold, Miss)
	if !h.Transient() || !checkFill(h.Buf(), cold) {
		t.Fatal("refused miss not served from a transient slot")
	}
	if st := c.Stats(); st.Refused != 1 || st.ResidentBytes > st.BudgetBytes || !c.Contains(hot) || len(pol.refused) != 1 {
		t.Fatalf("after a refusal: %+v, hot resident %v, policy told %v", st, c.Contains(hot), pol.refused)
	}
	// The only transient slot is taken: the next cold miss is admitted.
	c.Batch(2, 0)
	h2 := acquire(Key{0, 101}, Miss)
	if h2.Transient() || c.Contains(hot) {
		t.Fatal("with no transient slot free, the refused key should evict the victim")
	}
	h.Release()
	h2.Release()
	if c.Contains(cold) {
		t.Error("a refused key stayed in the cache")
	}
	if st := c.Stats(); st.Refused != 1 || st.ResidentBytes > st.BudgetBytes {
		t.Errorf("stats %+v", st)
	}
}

// TestLayerAdmit: "layer+admit" refuses a key never seen in place of an
// expert its layer keeps using, counts every refused lookup, and admits
// the newcomer once its estimate passes the victim's; "layer" admits all.
func TestLayerAdmit(t *testing.T) {
	p, err := NewPolicy("layer+admit", PolicyOptions{Layers: 1})
	if err != nil {
		t.Fatal(err)
	}
	adm := p.(Admitter)
	hot, cand := Key{0, 1}, Key{0, 2}
	for v := 0; v < 20; v++ {
		p.Batch(v, 0)
		if v == 0 {
			p.OnAdmit(hot, 1)
		} else {
			p.OnHit(hot)
		}
	}
	if adm.Admit(cand, hot) {
		t.Fatal("a key never seen admitted in place of one used at every visit")
	}
	admitted := -1
	for v := 20; v < 200 && admitted < 0; v++ {
		p.Batch(v, 0) // hot is no longer used; cand is looked up at every visit
		if adm.Admit(cand, hot) {
			admitted = v
			break
		}
		adm.OnRefuse(cand)
	}
	if admitted < 0 {
		t.Fatal("a key looked up at every visit never admitted over one no longer used")
	}
	t.Logf("admitted at visit %d", admitted)
	plain, _ := NewPolicy("layer", PolicyOptions{Layers: 1})
	for v := 0; v < 20; v++ {
		plain.Batch(v, 0)
		if v == 0 {
			plain.OnAdmit(hot, 1)
		} else {
			plain.OnHit(hot)
		}
	}
	if !plain.(Admitter).Admit(cand, hot) {
		t.Error(`"layer" refused a key`)
	}
}
