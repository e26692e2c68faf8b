package stages

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
	_ "github.com/pipe-engine/pipe/model/archs"
	"github.com/pipe-engine/pipe/reader"
	"github.com/pipe-engine/pipe/warmstart"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const goldenF32 = "../testdata/golden/models/tiny-qwen3moe-F32.gguf"

var prompt = []int32{284, 444, 330, 107, 285, 426, 110, 458, 32, 106, 319, 112, 115}

func baseCfg() Config {
	return Config{Path: goldenF32, Stream: StreamOn, IO: IOConfig{Lanes: 2}, Cache: CacheConfig{Bytes: 4 << 20, Policy: "lru"},
		Dense: dense.Anon, Threads: 2, Log: zerolog.Nop(), NoHugePages: true, Prefetch: PrefetchConfig{NoPrompt: true}}
}

// mmapLogits is the reference every streaming run is held to: decode of the
// whole file mmap'd (no stream, no cache).
func mmapLogits(ctx context.Context, t *testing.T, n int) ([][]float32, error) {
	t.Helper()
	ref := baseCfg()
	ref.Stream, ref.Dense = StreamOff, "mmap"
	return decode(ctx, t, ref, n)
}

// decode runs the prompt and n greedy steps and returns every logit row.
func decode(ctx context.Context, t *testing.T, cfg Config, n int) ([][]float32, error) {
	t.Helper()
	return decodeWith(ctx, t, cfg, n, nil)
}

// decodeWith is decode calling done (if set) with the engine after the last
// step, before it is closed, and each of setup with it before the prompt.
func decodeWith(ctx context.Context, t *testing.T, cfg Config, n int, done func(*Engine), setup ...func(*Engine)) ([][]float32, error) {
	t.Helper()
	return decodeIn(ctx, t, cfg, Inputs{}, n, done, setup...)
}

// decodeIn is decodeWith with the caller's inputs in.
func decodeIn(ctx context.Context, t *testing.T, cfg Config, in Inputs, n int, done func(*Engine), setup ...func(*Engine)) ([][]float32, error) {
	t.Helper()
	e, err := Open(ctx, cfg, in)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if done != nil {
		defer done(e)
	}
	for _, f := range setup {
		f(e)
	}
	s, err := e.NewSession(len(prompt)+n, model.KVF32)
	if err != nil {
		return nil, err
	}
	rows, _, err := s.Prefill(ctx, prompt, false)
	if err != nil {
		return nil, err
	}
	out := [][]float32{rows[0]}
	for i := 0; i < n; i++ {
		next := int32(argmax(out[len(out)-1]))
		l, _, err := s.Step(ctx, next, n)
		if err != nil {
			return out, err
		}
		out = append(out, l)
	}
	return out, nil
}

func argmax(v []float32) int {
	b := 0
	for i, x := range v {
		if x > v[b] {
			b = i
		}
	}
	return b
}

func sameBits(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

// faultFile wraps a real file and fails reads at or past failAt.
type faultFile struct {
	reader.File
	failAt int64
	err    error
	short  bool
	hits   *atomic.Int64
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failAt {
		f.hits.Add(1)
		if f.short {
			n := max(0, int(f.failAt-off))
			if n > len(p) {
				n = len(p)
			}
			m, _ := f.File.ReadAt(p[:n], off)
			return m, nil
		}
		return 0, f.err
	}
	return f.File.ReadAt(p, off)
}

func expertStart(t *testing.T) int64 {
	e, err := Open(context.Background(), Config{Path: goldenF32, Stream: StreamOff, Threads: 1, Dense: dense.Mmap, Log: zerolog.Nop()}, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// the last layer's first expert: read only once the prompt reaches layer 3
	return e.layout.ranges[3][0][0].Off
}

func TestReadErrorsNameLayerAndExpert(t *testing.T) {
	at := expertStart(t)
	for _, tc := range []struct {
		name  string
		err   error
		short bool
		want  error
	}{
		{"EIO", syscall.EIO, false, reader.ErrRead},
		{"short", nil, true, reader.ErrShortRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			cfg := baseCfg()
			cfg.Dense = dense.Mmap // dense bytes via mmap: only expert reads hit the fault
			cfg.IO.Open = func(path string, direct bool) (reader.File, error) {
				f, err := reader.OpenOS(path, direct)
				if err != nil {
					return nil, err
				}
				return &faultFile{File: f, failAt: at + 1, err: tc.err, short: tc.short, hits: &hits}, nil
			}
			_, err := decode(context.Background(), t, cfg, 2)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if hits.Load() == 0 {
				t.Fatal("fault never triggered")
			}
			if msg := err.Error(); !strings.Contains(msg, "layer 3 expert") || !strings.Contains(msg, filepath.Base(goldenF32)) {
				t.Fatalf("error does not name the file, layer and expert: %v", err)
			}
		})
	}
}

// TestOpenFilesErrorCloses: when the reader cannot open the model's files
// (after the streamed source has made its cache), Open returns that error
// and closes what it made — a source without files — without a panic.
func TestOpenFilesErrorCloses(t *testing.T) {
	errDenied := errors.New("injected: permission denied")
	cfg := baseCfg()
	cfg.IO.Open = func(path string, direct bool) (reader.File, error) { return nil, errDenied }
	e, err := Open(context.Background(), cfg, Inputs{})
	if !errors.Is(err, errDenied) {
		if e != nil {
			e.Close()
		}
		t.Fatalf("err = %v, want the open error", err)
	}
}

// TestEINVALFallsBack: O_DIRECT refused at read time → buffered pread, same logits.
func TestEINVALFallsBack(t *testing.T) {
	want, err := decode(context.Background(), t, baseCfg(), 3)
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	cfg := baseCfg()
	cfg.IO.Open = func(path string, direct bool) (reader.File, error) {
		f, err := reader.OpenOS(path, direct)
		if err != nil || !direct {
			return f, err
		}
		return &faultFile{File: f, failAt: 0, err: syscall.EINVAL, hits: &hits}, nil
	}
	e, err := Open(context.Background(), cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Metrics().ODirect {
		t.Error("O_DIRECT still reported after EINVAL")
	}
	e.Close()
	got, err := decode(context.Background(), t, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBits(got, want) {
		t.Fatal("logits differ after the buffered fallback")
	}
	if hits.Load() == 0 {
		t.Fatal("EINVAL never injected")
	}
}

// TestCancelMidToken cancels inside a layer of a decode step: the step
// returns with the context's error before the next layer routes (counted
// in routings, not seconds) and nothing leaks (goleak).
func TestCancelMidToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := baseCfg()
	// The engine outlives the cancelled step (its lifetime is not ctx): the
	// pass must stop by its own context checks, not by the engine shutting
	// down.
	e, err := Open(context.Background(), cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if n := e.Desc().HParams.NLayer; n < 4 {
		t.Fatalf("the model has %d layers; the test cancels in layer 1 and needs layers after the next", n)
	}
	s, err := e.NewSession(64, model.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Prefill(ctx, prompt, false); err != nil {
		t.Fatal(err)
	}
	// Routings after the cancel: the layer checks stop the pass before the
	// next layer routes (layer 2 of step 2 at the latest), not at the end
	// of the token.
	var after []string
	cancelled := false
	e.Observe(func(step, layer int, _ [][]int, _ [][]float32) {
		if cancelled {
			after = append(after, fmt.Sprintf("step %d layer %d", step, layer))
		}
		if step == 2 && layer == 1 {
			cancel()
			cancelled = true
		}
	})
	var stepErr error
	steps := 0
	for i := 0; i < 5 && stepErr == nil; i++ {
		_, _, stepErr = s.Step(ctx, 100, 5)
		steps++
	}
	if !errors.Is(stepErr, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", stepErr)
	}
	if steps != 2 || len(after) > 1 || (len(after) == 1 && after[0] != "step 2 layer 2") {
		t.Fatalf("the token the cancel came in ran on: %d steps, routings after the cancel %v", steps, after)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"threads", func(c *Config) { c.Threads = -1 }},
		{"lanes", func(c *Config) { c.IO.Lanes = MaxLanes + 1 }},
		{"budget", func(c *Config) { c.Cache.Bytes = NoCache - 1 }},
		{"stream", func(c *Config) { c.Stream = "auto" }},
		{"prefetch lanes", func(c *Config) { c.Prefetch.Lanes = AllLanes - 1 }},
		{"dense", func(c *Config) { c.Dense = "swap" }},
		{"policy", func(c *Config) { c.Cache.Policy = "nope" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := baseCfg()
			tc.mod(&c)
			if _, err := Open(context.Background(), c, Inputs{}); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
	c := baseCfg()
	c.Path = filepath.Join(t.TempDir(), "missing.gguf")
	if _, err := Open(context.Background(), c, Inputs{}); err == nil {
		t.Fatal("missing file accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x09\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Path = bad
	if _, err := Open(context.Background(), c, Inputs{}); err == nil {
		t.Fatal("corrupt file accepted")
	}
}

// TestStreamMatchesMmap: streaming and whole-file mmap agree bit for bit,
// including with a cache below the working set and without overlap.
func TestStreamMatchesMmap(t *testing.T) {
	m := baseCfg()
	m.Stream = StreamOff
	m.Dense = dense.Mmap
	want, err := decode(context.Background(), t, m, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{baseCfg(), func() Config { c := baseCfg(); c.Cache.Bytes = NoCache; c.NoOverlap = true; return c }(),
		func() Config { c := baseCfg(); c.Cache.Bytes = 1 << 20; c.IO.Lanes = 1; c.Dense = dense.Warm; return c }()} {
		got, err := decode(context.Background(), t, c, 4)
		if err != nil {
			t.Fatal(err)
		}
		if !sameBits(got, want) {
			t.Fatalf("config %+v: logits differ from mmap", c)
		}
	}
}

// TestSteadyLayerAllocatesNothing: once the routed experts are resident, a
// layer's hand-offs (router → planner → cache → FFN) allocate nothing, in
// streaming and in mmap mode, with the prefetch policies on too. The cache
// (which holds every expert) is filled by a warm start of every expert and
// the test waits for it to complete: a speculative guess of an expert not
// yet resident takes a new cache entry, and which guesses are sent in the
// warm-up passes depends on the machine's load (a guess goes only when the
// planner's queue has room).
func TestSteadyLayerAllocatesNothing(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"stream":     func(c *Config) { c.Cache.Bytes = 64 << 20 },
		"next-layer": func(c *Config) { c.Cache.Bytes = 64 << 20; c.Prefetch = PrefetchConfig{N: 2, Policy: "next-layer"} },
		"temporal":   func(c *Config) { c.Cache.Bytes = 64 << 20; c.Prefetch = PrefetchConfig{N: 2, Policy: "temporal"} },
		"no-overlap": func(c *Config) { c.Cache.Bytes = 64 << 20; c.NoOverlap = true },
		"mmap":       func(c *Config) { c.Stream = StreamOff; c.Dense = dense.Mmap },
	} {
		t.Run(name, func(t *testing.T) {
			c := baseCfg()
			mod(&c)
			var all []warmstart.Key
			changed, note := poke()
			in := Inputs{onWarm: note, WarmKeys: func(d *model.Desc) []warmstart.Key {
				for l, exps := range d.Experts {
					for x := range exps {
						all = append(all, warmstart.Key{Layer: l, Expert: x})
					}
				}
				return all
			}}
			e, run := moeCaseWith(t, c, in)
			defer e.Close()
			if c.Stream != StreamOff {
				waitWarm(t, e, changed, func(ws warmstart.Stats) bool { return ws.Completed >= int64(len(all)) })
			}
			layers := e.Desc().HParams.NLayer
			pass := func() {
				for l := 0; l < layers; l++ {
					if err := run(l); err != nil {
						t.Fatal(err)
					}
				}
			}
			pass()
			pass()
			if n := testing.AllocsPerRun(20, pass); n != 0 {
				t.Errorf("%.1f allocations per pass of %d layers", n, layers)
			}
		})
	}
}

// TestSteadyDecodeAllocates: a steady decode step end to end — embedding,
// attention, router, planner, reader lanes, cache, FFN, head and the
// token's metrics — allocates nothing with the file mmap'd, with a cache
// holding every expert and with no cache at all (every expert read each
// step). The bound leaves room for a rare runtime allocation, not for one
// per layer or per expert. qwen2moe's shared expert and gemma4's dense MLP
// run in the layer's wait for reads (model.SideWork): that hand-off too.
func TestSteadyDecodeAllocates(t *testing.T) {
	for _, mod := range []string{"tiny-qwen3moe-Q4_K_M", "tiny-qwen2moe-Q4_K_M", "tiny-gemma4-Q4_K_M"} {
		for _, m := range decodeModes() {
			t.Run(mod+"/"+m.name, func(t *testing.T) { steadyDecodeAllocates(t, mod, m.cfg()) })
		}
	}
}

func steadyDecodeAllocates(t *testing.T, mod string, cfg Config) {
	const runs = 40
	s, done := steadySessionOf(t, mod, cfg, runs+1)
	defer done()
	ctx := context.Background()
	i := 0
	step := func() {
		if _, _, err := s.Step(ctx, int32(100+i%warmSteps), runs); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if n := testing.AllocsPerRun(runs, step); n > 0.5 {
		t.Errorf("%.2f allocations per decode step", n)
	}
}

// TestCancelCause: a pass ended by the caller's cancellation returns an
// error that is context.Canceled and carries the caller's cause.
func TestCancelCause(t *testing.T) {
	cause := errors.New("signal: terminated")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e, err := Open(ctx, baseCfg(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.NewSession(64, model.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Prefill(ctx, prompt, false); err != nil {
		t.Fatal(err)
	}
	cancel(cause)
	if err := e.life.stageErr(); !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("stageErr = %v, want context.Canceled wrapping the cause", err)
	}
	if _, _, err := s.Step(ctx, 100, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Step after cancel: %v", err)
	}
}

// waitWarm waits until the engine's warm-start statistics satisfy ok,
// looking again at every change signalled on changed (Inputs.onWarm, poke);
// it fails the test after a minute, a hang guard.
func waitWarm(t *testing.T, e *Engine, changed <-chan struct{}, ok func(warmstart.Stats) bool) {
	t.Helper()
	guard := time.After(time.Minute)
	for {
		ws := e.Metrics().Warm
		if ok(ws) {
			return
		}
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("the warm start did not get there in a minute: %+v", ws)
		}
	}
}

// poke is a hook that leaves a token in a channel of capacity one at every
// call and never blocks: a waiter that looks after each token it takes
// misses no change.
func poke() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
