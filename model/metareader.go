package model

// metareader.go: reading a family's metadata keys. MetaReader reads the
// keys of one file under its architecture's prefix with the bounds and
// error wording every family shares, and keeps the first error, so that a
// family's ReadHParams is a list of reads.

import (
	"math"

	"github.com/pipe-engine/pipe/gguf"
)

// Bounds for MetaReader reads: far beyond any real model's values.
const (
	// MaxDim bounds widths, lengths and counts of elements.
	MaxDim = 1 << 30
	// MaxLayers bounds layer counts (a hostile header cannot make
	// Describe allocate without bound).
	MaxLayers = maxLayers
	// MaxExperts bounds expert counts.
	MaxExperts = maxExperts
)

// MetaReader reads arch.-prefixed metadata keys of one file. Required keys
// are only enforced for a registered architecture (Known). The first
// error is kept (Err); reads after it still return values.
type MetaReader struct {
	d     *Desc
	pre   string
	known bool
	err   error
}

func newMetaReader(d *Desc, known bool) *MetaReader {
	return &MetaReader{d: d, pre: d.Arch + ".", known: known}
}

// Known reports whether required keys are enforced.
func (r *MetaReader) Known() bool { return r.known }

// Err is the first error met.
func (r *MetaReader) Err() error { return r.err }

func (r *MetaReader) note(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Bad is a family's refusal of the file's hyper-parameters: an ErrBadModel
// error naming the file.
func (r *MetaReader) Bad(format string, args ...any) error { return r.d.bad(format, args...) }

// Get returns the raw value of arch.key.
func (r *MetaReader) Get(key string) (Value, bool) { return r.d.File.Get(r.pre + key) }

// Int reads arch.key as a non-negative integer bounded by hi (0 when
// absent); a per-layer array yields its maximum.
func (r *MetaReader) Int(key string, required bool, hi int64) int {
	x, _ := r.Ints(key, required, hi)
	return x
}

// Ints reads arch.key as Int does and also returns the per-layer array
// when the key is stored as one.
func (r *MetaReader) Ints(key string, required bool, hi int64) (int, []int) {
	v, ok := r.Get(key)
	if !ok {
		if required && r.known {
			r.note(r.d.bad("missing key %s%s", r.pre, key))
		}
		return 0, nil
	}
	conv := func(x Value) (int, bool) {
		u, ok := x.Uint()
		if !ok || u > uint64(hi) {
			return 0, false
		}
		return int(u), true
	}
	if v.Type != gguf.TypeArray {
		x, ok := conv(v)
		if !ok {
			r.note(r.d.bad("%s%s = %v is not an integer in [0, %d]", r.pre, key, v, hi))
		}
		return x, nil
	}
	n := v.Len()
	if n > maxLayers {
		r.note(r.d.bad("%s%s has %d elements", r.pre, key, n))
		return 0, nil
	}
	arr := make([]int, n)
	best := 0
	for i := 0; i < n; i++ {
		e, _ := v.Index(i)
		x, ok := conv(e)
		if !ok {
			r.note(r.d.bad("%s%s[%d] = %v is not an integer in [0, %d]", r.pre, key, i, e, hi))
			return 0, nil
		}
		arr[i] = x
		best = max(best, x)
	}
	return best, arr
}

// Float reads arch.key as a finite number in [0, hi] (0 is also
// "absent"); NaN, an infinity, a negative value or one beyond hi would run
// and print garbage.
func (r *MetaReader) Float(key string, hi float64) float32 {
	v, ok := r.Get(key)
	if !ok {
		return 0
	}
	x, ok := v.Float()
	if !ok || !(x >= 0 && x <= hi) {
		r.note(r.d.bad("%s%s = %v is not a number in [0, %g]", r.pre, key, v, hi))
		return 0
	}
	return float32(x)
}

// refuseZeroRopeBase notes an error when arch.key, a RoPE base read as v,
// is present and 0: read as absent it would become 10000 (issue 35: it
// was accepted).
func (r *MetaReader) refuseZeroRopeBase(key string, v float32) {
	if _, present := r.Get(key); present && v == 0 {
		r.note(r.d.bad("%s%s = 0: a RoPE base must be > 0", r.pre, key))
	}
}

// Bool reads arch.key as a bool (false when absent).
func (r *MetaReader) Bool(key string) bool {
	v, ok := r.Get(key)
	if !ok {
		return false
	}
	b, isBool := v.Bool()
	if !isBool {
		r.note(r.d.bad("%s%s = %v is not a bool", r.pre, key, v))
	}
	return b
}

// String reads arch.key as a string ("" when absent or not a string).
func (r *MetaReader) String(key string) string {
	s, err := r.d.File.GetString(r.pre + key)
	if err != nil {
		return ""
	}
	return s
}

// Bools reads arch.key as an array of bools (nil when absent or of
// another type).
func (r *MetaReader) Bools(key string) []bool {
	v, ok := r.Get(key)
	if !ok || v.Type != gguf.TypeArray || v.Elem != gguf.TypeBool {
		return nil
	}
	b, _ := v.Any().([]bool)
	return b
}

// Limits reads arch.key as n per-layer limits: an array of n (or more)
// values, or one value for every layer (llama.cpp's get_key_or_arr); nil
// when absent. Each must be finite and ≥ 0 (the SwiGLU clamps).
func (r *MetaReader) Limits(key string, n int) ([]float32, error) {
	v, ok := r.Get(key)
	if !ok {
		return nil, nil
	}
	var xs []float64
	if arr, isArr := v.Floats(); isArr {
		xs = arr
	} else if x, isNum := v.Float(); isNum {
		xs = make([]float64, n)
		for i := range xs {
			xs[i] = x
		}
	}
	if len(xs) < n {
		return nil, r.Bad("%s%s = %v (want %d finite limits ≥ 0)", r.pre, key, v, n)
	}
	out := make([]float32, n)
	for i := range out {
		if !(xs[i] >= 0) || math.IsInf(xs[i], 0) {
			return nil, r.Bad("%s%s[%d] = %v (want a finite limit ≥ 0)", r.pre, key, i, xs[i])
		}
		out[i] = float32(xs[i])
	}
	return out, nil
}
