package model

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// standInFamily is a Family with one key of its own ("standin.window"),
// a state of one row of window floats per layer, and one inspect row.
type standInFamily struct{}

type standInHP struct{ Window int }

func (standInFamily) Arch() string { return "standin" }
func (standInFamily) ReadHParams(r *MetaReader, h *HParams) (any, error) {
	w := r.Int("window", true, 1<<10)
	if w > h.NEmbd {
		return nil, r.Bad("%swindow %d is wider than n_embd %d", "standin.", w, h.NEmbd)
	}
	return standInHP{Window: w}, nil
}
func (standInFamily) New(*Desc, DenseSource, Options) (Model, error) { return nil, errStandIn }
func (standInFamily) StateBytes(d *Desc, positions, elemBytes int) int64 {
	return KVStateBytes(d.HParams.NLayer, d.FamilyHP.(standInHP).Window, positions, elemBytes)
}
func (standInFamily) TokenWork(d *Desc, positions int) TokenWork { return TokenWork{} }
func (standInFamily) InspectRows(d *Desc) []InspectRow {
	return []InspectRow{{"window", "w"}}
}

func init() { RegisterFamily(standInFamily{}) }

func standInFile(t *testing.T, window any) *Desc {
	t.Helper()
	kv := map[string]any{"block_count": uint32(2), "embedding_length": uint32(64), "attention.head_count": uint32(4),
		"expert_count": uint32(4), "expert_used_count": uint32(2)}
	if window != nil {
		kv["window"] = window
	}
	d, err := Describe(headerOnly(t, "standin", kv, nil))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFamilySeam: Describe hands a registered family its own keys
// (FamilyHP), the engine's state size and inspect rows come from the
// family, and an architecture that is not registered is sized from
// HParams (EstimateStateBytes).
func TestFamilySeam(t *testing.T) {
	d := standInFile(t, uint32(16))
	if hp, ok := d.FamilyHP.(standInHP); !ok || hp.Window != 16 || !d.Supported {
		t.Fatalf("FamilyHP %#v, Supported %v", d.FamilyHP, d.Supported)
	}
	if got := StateBytes(d, 100, 2); got != 2*16*2*100 {
		t.Fatalf("StateBytes = %d, want the family's 2 layers × 16 × 2 bytes × 100", got)
	}
	if rows := InspectRows(d); len(rows) != 1 || rows[0].Key != "window" {
		t.Fatalf("InspectRows = %v", rows)
	}
	d.Arch = "unregistered"
	if got, want := StateBytes(d, 100, 2), EstimateStateBytes(&d.HParams, 100, 2); got != want || want != 2*2*64*2*100 {
		t.Fatalf("unregistered StateBytes = %d, want EstimateStateBytes %d (= %d)", got, want, 2*2*64*2*100)
	}
	if InspectRows(d) != nil {
		t.Fatal("unregistered architecture has inspect rows")
	}
}

// TestFamilyKeyErrors: a family's missing required key, a key out of its
// bound and the family's own refusal are Describe errors naming the file
// and key (ErrBadModel for the reader's).
func TestFamilyKeyErrors(t *testing.T) {
	for _, c := range []struct {
		window any
		want   string
	}{
		{nil, "missing key standin.window"},
		{uint32(1 << 20), "standin.window = 1048576 is not an integer in [0, 1024]"},
		{"wide", "standin.window = "},
	} {
		kv := map[string]any{"block_count": uint32(2), "embedding_length": uint32(64), "attention.head_count": uint32(4),
			"expert_count": uint32(4), "expert_used_count": uint32(2)}
		if c.window != nil {
			kv["window"] = c.window
		}
		_, err := Describe(headerOnly(t, "standin", kv, nil))
		if !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("window %v: %v, want ErrBadModel with %q", c.window, err, c.want)
		}
	}
	kv := map[string]any{"block_count": uint32(2), "embedding_length": uint32(8), "attention.head_count": uint32(4),
		"expert_count": uint32(4), "expert_used_count": uint32(2), "window": uint32(16)}
	if _, err := Describe(headerOnly(t, "standin", kv, nil)); !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), "standin.window 16 is wider than n_embd 8") {
		t.Errorf("the family's own refusal: %v", err)
	}
}

// TestRegisterTwicePanics: a second family of one architecture is a
// programming error met at init.
func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "standin") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	RegisterFamily(standInFamily{})
}

// TestMetaReaderLimits: per-layer limits as llama.cpp's get_key_or_arr —
// absent is nil, one value is every layer's, an array is per layer, and a
// short array, a negative or an infinite limit is ErrBadModel naming the key.
func TestMetaReaderLimits(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []float32
		err  string
	}{
		{nil, nil, ""},
		{float32(7), []float32{7, 7}, ""},
		{[]float32{0, 2.5}, []float32{0, 2.5}, ""},
		{[]float32{1}, nil, "standin.clamp = "},
		{[]float32{1, -1}, nil, "standin.clamp[1] = -1"},
		{float32(math.Inf(1)), nil, "standin.clamp[0] = +Inf"},
	} {
		d := standInFile(t, uint32(16))
		kv := map[string]any{"block_count": uint32(2), "embedding_length": uint32(64), "attention.head_count": uint32(4),
			"expert_count": uint32(4), "expert_used_count": uint32(2), "window": uint32(16)}
		if c.v != nil {
			kv["clamp"] = c.v
		}
		d.File = headerOnly(t, "standin", kv, nil)
		got, err := newMetaReader(d, true).Limits("clamp", 2)
		if c.err != "" {
			if !errors.Is(err, ErrBadModel) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v, want ErrBadModel with %q", c.v, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v: %v %v, want %v", c.v, got, err, c.want)
		}
	}
}
