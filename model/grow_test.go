package model

import (
	"bytes"
	"testing"
)

// TestGrowingState: a growing state holds rows only for the positions it
// fills (in GrowStep steps), keeps every filled row across a growth, gives
// rows back on Rewind, restores a saved state into fresh rows, and attends
// as a state of all its rows does.
func TestGrowingState(t *testing.T) {
	const w, nCtx = 8, 3 * GrowStep
	for _, kv := range []KVType{KVF32, KVF16} {
		full, err := NewHybrid(nCtx, []int{w, 0}, []int{0, 4}, kv)
		if err != nil {
			t.Fatal(err)
		}
		g, err := NewHybrid(1, []int{w, 0}, []int{0, 4}, kv)
		if err != nil {
			t.Fatal(err)
		}
		g.Growing(nCtx)
		if g.NCtx != nCtx || g.Bytes() != 16 {
			t.Fatalf("empty growing state: context %d, %d bytes (want %d, the recurrent state's 16)", g.NCtx, g.Bytes(), nCtx)
		}
		k, v := make([]float32, w), make([]float32, w)
		fill := func(st *State, n int) {
			for i := 0; i < n; i++ {
				pos, err := Reserve(st, 1)
				if err != nil {
					t.Fatal(err)
				}
				for j := range k {
					k[j], v[j] = float32(pos*w+j), -float32(pos*w+j)
				}
				st.Store(0, pos, k, v)
				st.Pos++
			}
		}
		fill(full, GrowStep+5)
		fill(g, GrowStep+5)
		per := int64(2 * w * 2)
		if kv == KVF32 {
			per *= 2
		}
		if got, want := g.Bytes(), 2*GrowStep*per+16; got != want {
			t.Fatalf("%d positions filled: %d bytes, want %d (two steps of rows)", g.Pos, got, want)
		}
		q := make([]float32, w)
		for i := range q {
			q[i] = float32(i%3) - 1
		}
		attend := func(st *State) []float32 {
			a := &AttnArgs{Layer: 0, Dim: w, Lo: 0, Hi: st.Pos - 1, Scale: 0.25}
			out := make([]float32, w)
			st.Attend(a, q, make([]float32, st.Pos), out)
			return out
		}
		if a, b := attend(full), attend(g); !equalF32(a, b) {
			t.Fatalf("%v: growing state attends %v, full state %v", kv, b, a)
		}
		var saved bytes.Buffer
		if _, err := g.Save(&saved); err != nil {
			t.Fatal(err)
		}
		if keep := g.Rewind(3); keep != 0 || g.Bytes() != 16 {
			t.Fatalf("rewound (recurrent: to 0): kept %d, %d bytes, want 0 and 16", keep, g.Bytes())
		}
		if _, err := g.Load(&saved); err != nil {
			t.Fatal(err)
		}
		if a, b := attend(full), attend(g); !equalF32(a, b) {
			t.Fatalf("%v: restored growing state attends %v, full state %v", kv, b, a)
		}
		if _, err := Reserve(g, nCtx-g.Pos+1); err == nil {
			t.Fatal("a growing state reserved past its context")
		}
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
