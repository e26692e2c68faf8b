package stages

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
)

// TestLimitsBeforeAllocation: a context whose KV cache exceeds the memory
// available and a --cache-mb that does are refused naming the flag to change
// (instead of a fatal out-of-memory); a budget above every expert is clamped;
// policy names are checked even when nothing streams.
func TestLimitsBeforeAllocation(t *testing.T) {
	ctx := context.Background()
	c := baseCfg()
	if _, err := Open(ctx, c, Inputs{KVPositions: 1_000_000_000, KVElemBytes: 2}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "-c") {
		t.Fatalf("-c 1e9 at Open: err = %v, want ErrConfig naming -c", err)
	}
	e, err := Open(ctx, baseCfg(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewSession(1_000_000_000, model.KVF16); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "-c") {
		t.Fatalf("NewSession(1e9): err = %v, want ErrConfig naming -c", err)
	}
	e.Close()

	c = baseCfg()
	c.Cache.Bytes = 1 << 50 // far above every expert of the tiny model
	e, err = Open(ctx, c, Inputs{})
	if err != nil {
		t.Fatalf("a budget above every expert: %v", err)
	}
	if all := e.layout.count() * e.layout.slotBytes; e.Config().Cache.Bytes != all {
		t.Fatalf("budget %d, want it clamped to every expert (%d)", e.Config().Cache.Bytes, all)
	}
	e.Close()

	for _, mod := range []func(*Config){
		func(c *Config) { c.Stream = StreamOff; c.Cache.Policy = "foo" },
		func(c *Config) { c.Stream = StreamOff; c.Prefetch.Policy = "foo" },
	} {
		c := baseCfg()
		mod(&c)
		if _, err := Open(ctx, c, Inputs{}); !errors.Is(err, ErrConfig) {
			t.Fatalf("bad policy without streaming: err = %v, want ErrConfig", err)
		}
	}
}

// TestBudgetAboveAvailable: the memory check counts everything resident
// (anonymous dense weights, KV cache, expert cache, scratch slots, runtime)
// against the memory available: a budget just above what is left after the
// rest is refused naming --cache-mb and the budget that fits, one just
// below is accepted; dense weights that do not fit beside the cache are
// refused suggesting --dense-weights mmap, which is then accepted. The
// memory is a fixed figure (resolve reads it once and passes it down), so
// the edges are exact.
func TestBudgetAboveAvailable(t *testing.T) {
	const avail = 64 << 30
	mem := memory{Memory: cache.Memory{Avail: avail, Source: "test"}}
	d := &model.Desc{DenseBytes: 0}
	r := Resolved{Config: baseCfg(), KVBytes: 8 << 20, K: 2, SlotBytes: 1 << 20}
	r.Dense = dense.Anon
	fixed := r.KVBytes + int64(max(r.K, cache.DefaultTransientSlots))*r.SlotBytes + runtimeReserve
	const margin = 1 << 20
	for _, c := range []struct {
		name       string
		dense      int64
		budget     int64
		mode       dense.Mode
		ok         bool
		flag, want string
	}{
		{"budget far above", 0, 1 << 60, dense.Anon, false, "--cache-mb", "or less"},
		{"budget just above", 0, avail - fixed + margin, dense.Anon, false, "--cache-mb", "or less"},
		{"budget just below", 0, avail - fixed - margin, dense.Anon, true, "", ""},
		{"dense beside the budget", avail / 2, avail/2 - fixed + margin, dense.Anon, false, "--dense-weights mmap", "dense weights"},
		{"dense in the page cache", avail / 2, avail/2 - fixed + margin, dense.Mmap, true, "", ""},
		{"dense alone", avail + margin, 0, dense.Anon, false, "--dense-weights mmap", "dense weights"},
	} {
		d.DenseBytes = c.dense
		r.Cache.Bytes, r.Dense = c.budget, c.mode
		err := r.checkMemory(d, mem)
		if c.ok != (err == nil) || (err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), c.want))) {
			t.Errorf("%s: err = %v, want ok %v or an ErrConfig naming %q and %q", c.name, err, c.ok, c.flag, c.want)
		}
	}
}

// TestRecurrentStateRefusalNamesTheKeys: a recurrent state too large for
// memory at any context is refused naming the file's ssm.* keys, not
// advising a smaller -c, which cannot help (issue 35); a KV cache that a
// smaller context would fit still points at -c.
func TestRecurrentStateRefusalNamesTheKeys(t *testing.T) {
	hp := model.HParams{NLayer: 4, NEmbd: 64, NHead: 2, NHeadKV: 2, HeadDim: 32, HeadDimV: 32,
		SSM: model.SSMGeom{ConvKernel: 1 << 30, StateSize: 16, InnerSize: 64, GroupCount: 2, TimeStepRank: 4}}
	d := &model.Desc{Arch: "no-family", HParams: hp}
	gib := memory{Memory: cache.Memory{Avail: 1 << 30, Source: "test"}}
	err := kvFits(stateOf(d, 16, 2), 16, gib)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ssm.conv_kernel 1073741824") || strings.Contains(err.Error(), "lower -c") {
		t.Fatalf("enormous conv_kernel: %v", err)
	}
	d.HParams.SSM.ConvKernel = 4
	err = kvFits(stateOf(d, 1<<30, 2), 1<<30, gib)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "lower -c") {
		t.Fatalf("a long context: %v", err)
	}
	if err := kvFits(stateOf(d, 16, 2), 16, gib); err != nil {
		t.Fatalf("a small model: %v", err)
	}
}
