package stages

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

// TestLimitsBeforeAllocation: a context whose KV cache exceeds the memory
// available and a --cache-mb that does are refused naming the flag to change
// (instead of a fatal out-of-memory); a budget above every expert is clamped;
// policy names are checked even when nothing streams.
func TestLimitsBeforeAllocation(t *testing.T) {
	ctx := context.Background()
	c := baseCfg()
	c.Cache.KVPositions, c.Cache.KVElemBytes = 1_000_000_000, 2
	if _, err := Open(ctx, c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "-c") {
		t.Fatalf("-c 1e9 at Open: err = %v, want ErrConfig naming -c", err)
	}
	e, err := Open(ctx, baseCfg())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewSession(1_000_000_000, model.KVF16); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "-c") {
		t.Fatalf("NewSession(1e9): err = %v, want ErrConfig naming -c", err)
	}
	e.Close()

	c = baseCfg()
	c.Cache.Bytes = 1 << 50 // far above every expert of the tiny model
	e, err = Open(ctx, c)
	if err != nil {
		t.Fatalf("a budget above every expert: %v", err)
	}
	if all := e.layout.count() * e.layout.slotBytes; e.Config().Cache.Bytes != all {
		t.Fatalf("budget %d, want it clamped to every expert (%d)", e.Config().Cache.Bytes, all)
	}
	e.Close()

	for _, mod := range []func(*Config){
		func(c *Config) { c.Stream = false; c.Cache.Policy = "foo" },
		func(c *Config) { c.Stream = false; c.Prefetch.Policy = "foo" },
	} {
		c := baseCfg()
		mod(&c)
		if _, err := Open(ctx, c); !errors.Is(err, ErrConfig) {
			t.Fatalf("bad policy without streaming: err = %v, want ErrConfig", err)
		}
	}
}

// TestBudgetAboveAvailable: an explicit budget the model could fill but the
// machine cannot hold is refused naming --cache-mb.
func TestBudgetAboveAvailable(t *testing.T) {
	r := Resolved{Config: baseCfg()}
	r.Cache.Bytes = 1 << 60
	if _, err := r.checkBudget(0); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--cache-mb") { // 0: nothing to clamp to
		t.Fatalf("err = %v, want ErrConfig naming --cache-mb", err)
	}
}
