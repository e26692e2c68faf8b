package stages

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/pipe-engine/pipe/internal/sysmem"
	"github.com/pipe-engine/pipe/metrics"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sink"
)

// Session is one decode sequence on an Engine: its KV cache and its metrics.
// It is driven by one goroutine.
type Session struct {
	eng   *Engine
	State *model.State // the KV cache and position

	step int      // generated tokens so far (1-based step of the next one - 1)
	tok  [1]int32 // Step's one-token batch

	// cumulative counters at the last sample
	last         metrics.Counters
	lastProcRead int64
	lastMaj      int64
	lastCPU      time.Duration
	extra        [3]float64 // the skip columns (metrics.SkipColumns) of a lossy run

	prefill PrefillTimes // the last Prefill's
}

// PrefillTimes is where a Prefill's wall time went.
type PrefillTimes struct {
	Stall   time.Duration // the FFN stage waiting for expert bytes
	Compute time.Duration // measured compute (meter.take)
	// IOBusy is the reader lanes' busy time during the prefill, summed over
	// the lanes (warm-start reads included): ÷ (wall × lanes) is how busy
	// the lanes were.
	IOBusy time.Duration
	// SlotWait is the time demand lookups waited for a free cache slot
	// (metrics.Counters.SlotWait: a cause within Stall).
	SlotWait time.Duration
	// Layers is the pass layer by layer (one row per MoE layer of each
	// forward pass; metrics.Layer): the engine's buffer, valid until its
	// next prompt pass.
	Layers []metrics.Layer
}

// NewSession starts a sequence with a KV cache of nCtx positions.
func (e *Engine) NewSession(nCtx int, kv model.KVType) (*Session, error) {
	st, err := e.newState(nCtx, kv)
	if err != nil {
		return nil, err
	}
	return &Session{eng: e, State: st}, nil
}

// PrefillChunk is the most prompt tokens one forward pass takes: a longer
// prompt is fed in passes of this many, which bounds the pass's scratch
// memory and the time between cancellation checks (the model checks the
// context at every layer, Prefill between passes).
const PrefillChunk = 512

// Prefill feeds the prompt in batches of up to PrefillChunk tokens (each
// expert is read once for all the batch's tokens routed to it) and returns
// the logits of every position when all is set, else of the last one (valid
// until the next Prefill or Step).
func (s *Session) Prefill(ctx context.Context, tokens []int32, all bool) ([][]float32, time.Duration, error) {
	return s.PrefillBy(ctx, tokens, all, PrefillChunk, nil)
}

// PrefillBy is Prefill with the prompt cut into logical batches of batch
// tokens (llama.cpp's n_batch; <= 0: PrefillChunk), each fed in forward
// passes of up to min(batch, PrefillChunk) tokens; after, if set, is called
// after each batch with the tokens fed so far (an error from it ends the
// pass). The logits are the same bits whatever the batch.
func (s *Session) PrefillBy(ctx context.Context, tokens []int32, all bool, batch int, after func(fed int) error) ([][]float32, time.Duration, error) {
	defer s.beginPrompt()()
	if batch <= 0 {
		batch = PrefillChunk
	}
	clk := s.eng.meter.clock
	t0 := clk.Now()
	var out [][]float32
	var err error
	for b := 0; b < len(tokens) && err == nil; b += batch {
		end := min(b+batch, len(tokens))
		for i := b; i < end && err == nil; i += PrefillChunk {
			if err = ctx.Err(); err != nil {
				break
			}
			chunk := tokens[i:min(i+PrefillChunk, end)]
			var rows [][]float32
			rows, err = s.eng.Forward(ctx, s.State, chunk, all)
			switch {
			case all:
				out = append(out, rows...)
			case i+len(chunk) == len(tokens):
				out = rows
			}
		}
		if err == nil && after != nil {
			err = after(end)
		}
	}
	return out, clk.Since(t0), err
}

// beginPrompt starts a prompt pass (Prefill, Score) and returns the
// function that ends it: its times and lookups are accounted, and the
// counters sampled so that its I/O is not charged to the next generated
// token.
func (s *Session) beginPrompt() (end func()) {
	restore := s.eng.promptProcs()
	s.eng.setStep(0)
	c0, l0 := s.eng.Metrics().Counters, s.eng.lookups()
	s.eng.meter.layers.start(&s.eng.pipe)
	return func() {
		s.eng.meter.layers.stop()
		s.prefill.Stall, s.prefill.Compute = s.eng.meter.take()
		s.eng.meter.prompt = s.eng.meter.prompt.Add(s.eng.lookups().Sub(l0))
		d := s.eng.Metrics().Counters.Sub(c0)
		s.prefill.IOBusy, s.prefill.SlotWait = d.IOBusy, d.SlotWait
		s.prefill.Layers = s.eng.meter.layers.rows
		s.sample()
		restore()
	}
}

// PromptProcs is how many more Ps (GOMAXPROCS) than compute threads a
// streamed prompt pass runs with.
const PromptProcs = 2

// promptProcs raises GOMAXPROCS to the compute threads + PromptProcs for a
// streamed prompt pass and returns the function that puts it back. In a
// prompt pass the compute threads hold their Ps for milliseconds at a time
// (whole experts, attention over every token), so a reader goroutine whose
// pread returned waited for a P before it could hand its expert on and issue
// the next read; with Ps to spare it runs at once, the OS sharing the cores
// (docs/measurements.md, "Figures from code comments"). Decode keeps
// GOMAXPROCS as it is: there the runtime's spinning on idle Ps costs time
// (its kernels wake the pool's threads many times per token). A
// GOMAXPROCS set in the environment is left alone, as is a runtime already
// running with that many Ps.
func (e *Engine) promptProcs() (restore func()) {
	want := e.cfg.Threads + PromptProcs
	prev := runtime.GOMAXPROCS(0)
	if !e.cfg.Streams() || prev >= want || os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	runtime.GOMAXPROCS(want)
	return func() { runtime.GOMAXPROCS(prev) }
}

// PrefillTimes is the breakdown of the last Prefill.
func (s *Session) PrefillTimes() PrefillTimes { return s.prefill }

// Step feeds one token and returns its logits (the session's reused
// buffer, valid until the next Step) and the token's metrics (Step/Steps
// filled by the caller's numbering).
func (s *Session) Step(ctx context.Context, tok int32, steps int) ([]float32, sink.TokenMetrics, error) {
	s.step++
	s.eng.setStep(s.step)
	clk := s.eng.meter.clock
	t0 := clk.Now()
	s.tok[0] = tok
	out, err := s.eng.Forward(ctx, s.State, s.tok[:], false)
	wall := clk.Since(t0)
	stall, compute := s.eng.meter.take()
	m := s.sample()
	m.Step, m.Steps = s.step, steps
	m.WallMS = ms(wall)
	m.StallMS = ms(stall)
	m.ComputeMS = ms(compute)
	if err != nil {
		return nil, m, err
	}
	if len(out) != 1 {
		return nil, m, fmt.Errorf("stages: forward returned %d logit rows", len(out))
	}
	return out[0], m, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// sample takes the deltas of the cumulative counters since the last call;
// cache_hit_pct is the running decode hit rate since Open
// (metrics.Counters.HitPct), 0 before any decode lookup, -1 without a cache.
func (s *Session) sample() sink.TokenMetrics {
	var m sink.TokenMetrics
	maj, cpu := sysmem.Rusage()
	m.Majflt = maj - s.lastMaj
	m.CPUMS = ms(cpu - s.lastCPU)
	s.lastMaj, s.lastCPU = maj, cpu
	c := s.eng.Metrics().Counters
	d := c.Sub(s.last)
	s.last = c
	if c.Streaming {
		m.IOMS = ms(d.IOBusy)
		m.ReadBytes = d.ReadBytes
		m.MgmtMS = ms(d.Mgmt)
	} else {
		pr := sysmem.ProcReadBytes()
		if pr >= 0 && s.lastProcRead >= 0 {
			m.ReadBytes = pr - s.lastProcRead
		}
		s.lastProcRead = pr
	}
	m.CacheHitPct = -1
	if c.Cached {
		m.CacheHitPct, _ = c.HitPct()
	}
	m.ResidentFrac = s.eng.residentFrac()
	if s.eng.pipe.lossy != nil {
		k := d.Skipped
		s.extra = [3]float64{float64(k.Dropped), float64(k.Substituted), float64(k.Trimmed)}
		m.Extra = s.extra[:]
	}
	return m
}

// NewPool makes slots states of nCtx positions each that share one pool of
// nCtx positions (llama-server's --kv-unified): the memory check counts the
// pool's KV rows once beside every slot's recurrent state, and each state
// holds rows only for the positions it fills (model.State.Growing). Keeping
// the slots' filled positions within the pool is the caller's part.
func (e *Engine) NewPool(slots, nCtx int, kv model.KVType) ([]*model.State, error) {
	size := stateOf(e.desc, nCtx, kvElemBytes(kv))
	size.kv += int64(slots-1) * size.recurrent
	if err := kvFits(size, nCtx, readMemory()); err != nil {
		return nil, err
	}
	out := make([]*model.State, slots)
	for i := range out {
		st, err := e.model.NewState(min(nCtx, model.GrowStep), kv)
		if err != nil {
			return nil, err
		}
		st.Growing(nCtx)
		out[i] = st
	}
	return out, nil
}
