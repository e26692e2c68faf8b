package model

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestPool: none keeps the rows, cls the first, last the last, mean each
// row times 1/n summed in order; rank and unknown names are ErrPooling.
func TestPool(t *testing.T) {
	rows := [][]float32{{1, 2}, {3, -4}, {8, 5}}
	for _, c := range []struct {
		p    Pooling
		want [][]float32
	}{
		{PoolNone, rows},
		{PoolCLS, [][]float32{{1, 2}}},
		{PoolLast, [][]float32{{8, 5}}},
		{PoolMean, [][]float32{{1*(float32(1)/3) + 3*(float32(1)/3) + 8*(float32(1)/3), 2*(float32(1)/3) - 4*(float32(1)/3) + 5*(float32(1)/3)}}},
	} {
		got, err := Pool(rows, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%v: %v, want %v", c.p, got, c.want)
		}
		if back, err := ParsePooling(c.p.String()); err != nil || back != c.p {
			t.Errorf("ParsePooling(%q) = %v, %v", c.p.String(), back, err)
		}
	}
	for _, bad := range []string{"rank", "max", ""} {
		if _, err := ParsePooling(bad); !errors.Is(err, ErrPooling) {
			t.Errorf("ParsePooling(%q): %v, want ErrPooling", bad, err)
		} else if bad == "rank" && !strings.Contains(err.Error(), "rank") {
			t.Errorf("rank: %v does not name it", err)
		}
	}
	if _, err := Pool(nil, PoolMean); err == nil {
		t.Error("pooling no rows: no error")
	}
}

// TestNormalize: common_embd_normalize's four kinds.
func TestNormalize(t *testing.T) {
	v := []float32{3, -4, 0}
	for _, c := range []struct {
		norm int
		want []float32
	}{
		{-1, []float32{3, -4, 0}},
		{0, []float32{3 * float32(32760.0/4), -4 * float32(32760.0/4), 0}},
		{2, []float32{0.6, -0.8, 0}},
		{1, []float32{3 * float32(1.0/7), -4 * float32(1.0/7), 0}},
		{3, []float32{3 * float32(1/math.Cbrt(91)), -4 * float32(1/math.Cbrt(91)), 0}},
	} {
		got := make([]float32, len(v))
		Normalize(got, v, c.norm)
		for i := range got {
			if math.Abs(float64(got[i]-c.want[i])) > 1e-6*max(1, math.Abs(float64(c.want[i]))) {
				t.Errorf("norm %d: %v, want %v", c.norm, got, c.want)
				break
			}
		}
	}
	z := []float32{0, 0}
	Normalize(z, z, 2)
	if z[0] != 0 || z[1] != 0 {
		t.Errorf("zero vector: %v", z)
	}
}
