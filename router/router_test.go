package router

import (
	"math"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

func TestTopK(t *testing.T) {
	cases := []struct {
		v    []float32
		k    int
		want []int
	}{
		{[]float32{1, 5, 3, 4}, 2, []int{1, 3}},
		{[]float32{1, 1, 1, 1}, 3, []int{0, 1, 2}},
		{[]float32{-1, float32(math.NaN()), 2, 2}, 3, []int{2, 3, 0}},
		{[]float32{9}, 1, []int{0}},
		{[]float32{0, 1, 2, 3, 4, 5, 6, 7}, 8, []int{7, 6, 5, 4, 3, 2, 1, 0}},
	}
	for _, c := range cases {
		ids := make([]int, c.k)
		topK(c.v, ids)
		for i := range ids {
			if ids[i] != c.want[i] {
				t.Errorf("topK(%v,%d) = %v, want %v", c.v, c.k, ids, c.want)
				break
			}
		}
	}
}

func TestRouteSoftmaxNorm(t *testing.T) {
	logits := []float32{0, float32(math.Log(3)), float32(math.Log(2)), float32(math.Log(4) / 2)}
	ids := make([]int, 2)
	w := make([]float32, 2)
	p := make([]float32, 4)
	if err := Route(model.RouterSpec{Gating: model.SoftmaxTopK, K: 2, Normalize: true}, logits, ids, w, p); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("ids %v", ids)
	}
	if math.Abs(float64(w[0])-0.6) > 1e-6 || math.Abs(float64(w[1])-0.4) > 1e-6 {
		t.Fatalf("weights %v, want 0.6 0.4", w)
	}
}

func TestRouteTopKSoftmax(t *testing.T) {
	logits := []float32{3, 0, 3 + float32(math.Log(3)), -1}
	ids := make([]int, 2)
	w := make([]float32, 2)
	if err := Route(model.RouterSpec{Gating: model.TopKSoftmax, K: 2}, logits, ids, w, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	if ids[0] != 2 || ids[1] != 0 || math.Abs(float64(w[0])-0.75) > 1e-6 {
		t.Fatalf("ids %v w %v", ids, w)
	}
}

func TestRouteBadK(t *testing.T) {
	if err := Route(model.RouterSpec{K: 5}, make([]float32, 4), make([]int, 5), make([]float32, 5), make([]float32, 4)); err == nil {
		t.Fatal("k > n accepted")
	}
}
