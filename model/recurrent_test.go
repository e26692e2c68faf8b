package model

import (
	"fmt"
	"testing"
)

// TestHybridState: a recurrent layer keeps its floats instead of KV rows,
// Bytes counts both, and Rewind keeps a whole prefix only.
func TestHybridState(t *testing.T) {
	st, err := NewHybrid(4, []int{2, 0}, []int{0, 5}, KVF32)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Bytes(), int64(2*4*2*4+5*4); got != want {
		t.Fatalf("Bytes = %d, want %d", got, want)
	}
	if st.Recurrent(0) != nil || len(st.Recurrent(1)) != 5 {
		t.Fatalf("recurrent states %v %v", st.Recurrent(0), st.Recurrent(1))
	}
	st.Pos = 3
	st.Recurrent(1)[2] = 7
	if got := st.Rewind(3); got != 3 || st.Recurrent(1)[2] != 7 {
		t.Fatalf("Rewind(Pos) = %d, state %v: want 3, kept", got, st.Recurrent(1))
	}
	if got := st.Rewind(2); got != 0 || st.Pos != 0 || st.Recurrent(1)[2] != 0 {
		t.Fatalf("Rewind(2) = %d (Pos %d, state %v): want 0, state zeroed", got, st.Pos, st.Recurrent(1))
	}
	kv, _ := NewKV(4, []int{2}, KVF16)
	kv.Pos = 3
	if got := kv.Rewind(1); got != 1 || kv.Pos != 1 {
		t.Fatalf("KV Rewind(1) = %d, Pos %d", got, kv.Pos)
	}
	for _, c := range []struct{ w, r []int }{{[]int{0}, []int{0}}, {[]int{2}, []int{3}}, {[]int{2}, nil}} {
		if _, err := NewHybrid(4, c.w, c.r, KVF32); err == nil {
			t.Errorf("NewHybrid(widths %v, rec %v) accepted", c.w, c.r)
		}
	}
}

// TestSplitGate: per row, the query moves to the front and the gate out.
func TestSplitGate(t *testing.T) {
	q := []float32{1, 2, 10, 20, 3, 4, 30, 40, 5, 6, 50, 60}
	gate := make([]float32, 6)
	splitGate(q, gate, 3, 2)
	want, wantG := []float32{1, 2, 3, 4, 5, 6}, []float32{10, 20, 30, 40, 50, 60}
	for i := range want {
		if q[i] != want[i] || gate[i] != wantG[i] {
			t.Fatalf("q %v gate %v, want %v %v", q[:6], gate, want, wantG)
		}
	}
}

// TestIsRecurrent follows llama.cpp's is_recr: the stored array, else every
// full_attention_interval-th layer (default 4) is attention.
func TestIsRecurrent(t *testing.T) {
	g := SSMGeom{StateSize: 8}
	var got []bool
	for il := 0; il < 8; il++ {
		got = append(got, g.IsRecurrent(il))
	}
	if want := "[true true true false true true true false]"; fmt.Sprint(got) != want {
		t.Fatalf("default interval: %v, want %s", got, want)
	}
	g.FullAttentionInterval = 2
	if g.IsRecurrent(0) != true || g.IsRecurrent(1) != false {
		t.Fatal("interval 2")
	}
	g.Recurrent = []bool{false, true}
	if g.IsRecurrent(0) || !g.IsRecurrent(1) || g.IsRecurrent(2) {
		t.Fatal("stored array")
	}
	if (&SSMGeom{}).IsRecurrent(0) {
		t.Fatal("no SSM geometry: no recurrent layer")
	}
	h := HParams{NLayer: 4, SSM: SSMGeom{ConvKernel: 4, InnerSize: 8, StateSize: 4, GroupCount: 1}}
	if h.RecurrentLayers() != 3 || h.SSM.StateFloats() != 3*(8+2*4)+4*8 {
		t.Fatalf("RecurrentLayers %d StateFloats %d", h.RecurrentLayers(), h.SSM.StateFloats())
	}
}
