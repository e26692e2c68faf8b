package stages

import (
	"context"
	"fmt"
	"testing"

	"github.com/pipe-engine/pipe/model"
)

// batchSeq is one sequence driven by runBatch: its prompt, fed in chunks,
// then greedy steps; rows collects a copy of every logits row it gets (the
// prompt's last, then one per step).
type batchSeq struct {
	st     *model.State
	prompt []int32
	fed    int // prompt tokens fed
	next   int32
	rows   [][]float32
	join   int // the pass it joins at
}

// batchPrompt is sequence i's prompt: 5 to 12 tokens, different for each i.
func batchPrompt(i int) []int32 {
	n := 5 + (i*3)%8
	p := make([]int32, n)
	for j := range p {
		p[j] = (prompt[(i+j)%len(prompt)]*int32(i+1) + int32(7*j)) % 480
	}
	return p
}

// runBatch drives seqs through e.ForwardBatch until each has taken steps
// greedy steps after its prompt: in each pass every joined sequence feeds
// its next prompt chunk (of up to chunk tokens) or its next token.
func runBatch(ctx context.Context, t *testing.T, e *Engine, seqs []*batchSeq, chunk, steps int) {
	t.Helper()
	for pass := 0; ; pass++ {
		var in []model.Seq
		var who []*batchSeq
		for _, s := range seqs {
			if s.join > pass || len(s.rows) > steps {
				continue
			}
			toks := []int32{s.next}
			if s.fed < len(s.prompt) {
				toks = s.prompt[s.fed:min(s.fed+chunk, len(s.prompt))]
				s.fed += len(toks)
			}
			in = append(in, model.Seq{State: s.st, Tokens: toks})
			who = append(who, s)
		}
		if len(in) == 0 {
			if pass > 1000 {
				t.Fatal("runBatch: no sequence left to join")
			}
			done := true
			for _, s := range seqs {
				done = done && len(s.rows) > steps
			}
			if done {
				return
			}
			continue
		}
		out, err := e.ForwardBatch(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range who {
			if s.fed < len(s.prompt) {
				if len(out[i]) != 1 {
					t.Fatalf("a prompt chunk got %d rows, want its last", len(out[i]))
				}
				continue
			}
			if len(out[i]) != 1 {
				t.Fatalf("got %d rows, want 1", len(out[i]))
			}
			row := append([]float32(nil), out[i][0]...)
			s.rows = append(s.rows, row)
			s.next = int32(argmax(row))
		}
	}
}

// newBatchSeqs makes n sequences (prompts batchPrompt(0…n-1)) with fresh
// states on e, joining at the passes in join (nil: all at pass 0).
func newBatchSeqs(t *testing.T, e *Engine, n, steps int, join []int) []*batchSeq {
	t.Helper()
	seqs := make([]*batchSeq, n)
	for i := range seqs {
		p := batchPrompt(i)
		st, err := e.newState(len(p)+steps+1, model.KVF32)
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = &batchSeq{st: st, prompt: p}
		if join != nil {
			seqs[i].join = join[i]
		}
	}
	return seqs
}

// TestBatchInvariance is issue 34's guarantee: a sequence's logits are bit
// for bit the same whatever else shares its forward passes — alone (its
// prompt in one pass), with 1 or 7 other sequences, or joining mid-way
// (its prompt in chunks of 3 beside sequences that decode) — on every
// family's tiny model, at 1 and 2 threads, streaming experts or mapped.
// With -short (the race and arm64 passes) each model runs two of the four
// combinations, 1 thread mapped and 2 threads streaming: every thread count
// and mode still, and the most concurrent one under -race.
func TestBatchInvariance(t *testing.T) {
	models := []string{"tiny-qwen3moe-Q4_K_M", "tiny-gemma4-Q4_K_M", "tiny-gptoss-MXFP4_MOE", "tiny-lfm2moe-Q4_K_M",
		"tiny-olmoe-Q4_K_M", "tiny-qwen2moe-Q4_K_M", "tiny-qwen35moe-Q4_K_M", "tiny-deepseek2-Q4_K_M", "tiny-deepseek2-lite-Q4_K_M",
		"tiny-glm4moe-Q4_K_M", "tiny-bailingmoe2-Q4_K_M", "tiny-qwen3next-Q4_K_M"}
	if !testing.Short() {
		models = append(models, "tiny-qwen3moe-F32", "tiny-gemma4-F32", "tiny-qwen35moe-F32", "tiny-deepseek2-F32",
			"tiny-glm4moe-F32", "tiny-bailingmoe2-F32", "tiny-qwen3next-F32")
	}
	const steps = 5
	ctx := context.Background()
	for _, m := range models {
		for _, threads := range []int{1, 2} {
			for _, stream := range []StreamMode{StreamOn, StreamOff} {
				if testing.Short() && (threads == 2) != (stream == StreamOn) {
					continue
				}
				cfg := baseCfg()
				cfg.Path = fmt.Sprintf("../testdata/golden/models/%s.gguf", m)
				cfg.Threads, cfg.Stream = threads, stream
				t.Run(fmt.Sprintf("%s/t%d/stream-%v", m, threads, stream == StreamOn), func(t *testing.T) {
					e, err := Open(ctx, cfg, Inputs{})
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close()
					solo := newBatchSeqs(t, e, 8, steps, nil)
					for _, s := range solo {
						runBatch(ctx, t, e, []*batchSeq{s}, len(s.prompt), steps)
					}
					scenarios := []struct {
						name  string
						n     int
						chunk int
						join  []int
					}{
						{"with 1 other", 2, 64, nil},
						{"with 7 others", 8, 64, nil},
						{"joining mid-way", 8, 3, []int{0, 0, 2, 3, 3, 5, 6, 9}},
					}
					for _, sc := range scenarios {
						seqs := newBatchSeqs(t, e, sc.n, steps, sc.join)
						runBatch(ctx, t, e, seqs, sc.chunk, steps)
						for i, s := range seqs {
							if !sameBits(s.rows, solo[i].rows) {
								t.Errorf("%s: sequence %d's logits differ from its solo run", sc.name, i)
							}
						}
					}
				})
			}
		}
	}
}

// TestBatchReadsEachExpertOnce: in a pass over 8 sequences each distinct
// expert a layer's tokens route to is looked up once — the union of their
// choices — not once per token that chose it.
func TestBatchReadsEachExpertOnce(t *testing.T) {
	const steps = 2
	ctx := context.Background()
	cfg := baseCfg()
	cfg.Path = "../testdata/golden/models/tiny-qwen3moe-Q4_K_M.gguf"
	cfg.Cache.Bytes = NoCache
	e, err := Open(ctx, cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	seqs := newBatchSeqs(t, e, 8, steps+1, nil)
	runBatch(ctx, t, e, seqs, 64, steps)
	union, choices := 0, 0
	e.Observe(func(_, _ int, ids [][]int, _ [][]float32) {
		seen := map[int]bool{}
		for _, row := range ids {
			for _, x := range row {
				seen[x] = true
				choices++
			}
		}
		union += len(seen)
	})
	c0 := e.Metrics().Counters
	in := make([]model.Seq, len(seqs))
	for i, s := range seqs {
		in[i] = model.Seq{State: s.st, Tokens: []int32{s.next}}
	}
	if _, err := e.ForwardBatch(ctx, in); err != nil {
		t.Fatal(err)
	}
	c1 := e.Metrics().Counters
	got := c1.Decode.Total() + c1.Prompt.Total() - c0.Decode.Total() - c0.Prompt.Total()
	if union == 0 || union >= choices {
		t.Fatalf("%d distinct experts for %d choices: the batch does not overlap, the test proves nothing", union, choices)
	}
	if got != int64(union) {
		t.Fatalf("%d expert lookups in the batch pass, want %d (the union over its 8 tokens; %d choices)", got, union, choices)
	}
}

// TestBatchOverBudget: 8 sequences decoding together (and joining in
// prompt chunks) under an expert cache of 2 slots — far below a layer's
// union over the batch — keep resident expert bytes within the budget, and
// each sequence's logits are its solo run's on the whole-file mmap.
func TestBatchOverBudget(t *testing.T) {
	const steps = 4
	ctx := context.Background()
	ref := baseCfg()
	ref.Stream = StreamOff
	mm, err := Open(ctx, ref, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	solo := newBatchSeqs(t, mm, 8, steps, nil)
	for _, s := range solo {
		runBatch(ctx, t, mm, []*batchSeq{s}, len(s.prompt), steps)
	}
	probe, err := Open(ctx, baseCfg(), Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	slot := probe.layout.slotBytes
	probe.Close()
	cfg := baseCfg()
	cfg.Cache.Bytes = 2 * slot
	e, err := Open(ctx, cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	union := 0
	e.Observe(func(_, _ int, ids [][]int, _ [][]float32) {
		seen := map[int]bool{}
		for _, row := range ids {
			for _, x := range row {
				seen[x] = true
			}
		}
		union = max(union, len(seen))
	})
	seqs := newBatchSeqs(t, e, 8, steps, []int{0, 0, 0, 1, 1, 2, 4, 5})
	runBatch(ctx, t, e, seqs, 3, steps)
	for i, s := range seqs {
		if !sameBits(s.rows, solo[i].rows) {
			t.Errorf("sequence %d's logits differ from its solo mmap run", i)
		}
	}
	if union <= 2 {
		t.Fatalf("a layer's batch routes to at most %d experts: not over the budget of 2", union)
	}
	if st := cacheOf(e).Stats(); st.PeakResidentBytes > cfg.Cache.Bytes || st.PeakResidentBytes == 0 {
		t.Fatalf("peak resident expert bytes %d > budget %d", st.PeakResidentBytes, cfg.Cache.Bytes)
	}
}

// TestBatchDecodeSpeculation: a pass of decode steps of several sequences
// speculates as each step alone would (--prefetch, 0 here: no speculative
// read), not as a prompt pass, whose guesses of the next layer's routed set
// the same pass would otherwise make (it did, reading more wrong guesses
// than right ones); a prompt pass still guesses.
func TestBatchDecodeSpeculation(t *testing.T) {
	ctx := context.Background()
	cfg := baseCfg()
	cfg.Path = "../testdata/golden/models/tiny-qwen3moe-Q4_K_M.gguf"
	cfg.Prefetch.NoPrompt = false
	e, err := Open(ctx, cfg, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	seqs := newBatchSeqs(t, e, 4, 2, nil)
	runBatch(ctx, t, e, seqs, 64, 1)
	prompted := e.Metrics().Speculation.Speculative
	if prompted == 0 {
		t.Fatal("the prompt passes guessed nothing: the test proves nothing")
	}
	in := make([]model.Seq, len(seqs))
	for i, s := range seqs {
		in[i] = model.Seq{State: s.st, Tokens: []int32{s.next}}
	}
	if _, err := e.ForwardBatch(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := e.Metrics().Speculation.Speculative - prompted; got != 0 {
		t.Fatalf("a batch of 4 decode steps issued %d speculative reads at --prefetch 0", got)
	}
}
