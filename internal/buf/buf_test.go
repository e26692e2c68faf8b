package buf

import "testing"

func TestGrow(t *testing.T) {
	s := make([]int, 2, 8)
	s[0] = 7
	g := Grow(s, 5)
	if len(g) != 5 || cap(g) != 8 || &g[0] != &s[0] || g[0] != 7 {
		t.Fatalf("within capacity: len %d cap %d, same array %v, g[0] %d", len(g), cap(g), &g[0] == &s[0], g[0])
	}
	g = Grow(s, 9)
	if len(g) != 9 || &g[0] == &s[0] || g[0] != 0 {
		t.Fatalf("past capacity: len %d, same array %v, g[0] %d", len(g), &g[0] == &s[0], g[0])
	}
	if g := Grow[float32](nil, 0); len(g) != 0 {
		t.Fatalf("Grow(nil, 0) has length %d", len(g))
	}
}
