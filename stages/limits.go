package stages

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/pipe-engine/pipe/cache"
	"github.com/pipe-engine/pipe/dense"
	"github.com/pipe-engine/pipe/model"
)

// stateSize is one sequence's state as the model's family sizes it
// (model.StateBytes; the stages know no family's layout), asked once and
// passed down to the checks: kv for a context of the positions asked
// (the KV cache and any recurrent state), recurrent the part no context
// size changes, and keys the file's metadata keys that size that part
// (model.StateKeys).
type stateSize struct {
	kv, recurrent int64
	keys          string
}

func stateOf(d *model.Desc, positions, elemBytes int) stateSize {
	return stateSize{kv: model.StateBytes(d, positions, elemBytes), recurrent: model.StateBytes(d, 0, elemBytes),
		keys: model.StateKeys(d)}
}

// memory is the memory the process may still use, read once for all of a
// check's questions (readMemory) and passed down to them; err is why there
// is no figure, and the checks then allow the run.
type memory struct {
	cache.Memory
	err error
}

func readMemory() memory {
	m, err := cache.ReadMemory("", "")
	return memory{m, err}
}

// kvFits refuses, before allocating it, a state st (for a context of
// positions) larger than mem. Without memory information it allows the
// cache. When the recurrent states alone exceed it, -c cannot help: the
// refusal names the file's keys that size them.
func kvFits(st stateSize, positions int, mem memory) error {
	avail, source := mem.Avail, mem.Source
	need := st.kv
	if mem.err != nil || need <= avail {
		return nil
	}
	if rec, keys := st.recurrent, st.keys; rec > avail {
		return fmt.Errorf("%w: the recurrent layers' state needs %s whatever the context, more than the %s available (%s): the model file's %s are not runnable here (-c does not change this)",
			ErrConfig, mib(rec), mib(avail), source, keys)
	}
	return fmt.Errorf("%w: the KV cache for a context of %d positions needs %s, more than the %s available (%s): lower -c (the context size)",
		ErrConfig, positions, mib(need), mib(avail), source)
}

// checkBudget is an explicit --cache-mb (or Inputs.AutoBytes) clamped to all, what every expert of
// the model needs (a larger cache holds nothing more); checkMemory then
// weighs it with everything else resident.
func (r *Resolved) checkBudget(b, all int64) (int64, error) {
	if all > 0 && b > all {
		r.Log.Info().Str("event", "cache_budget").Int64("budget_bytes", all).Int64("asked_bytes", b).
			Msgf("--cache-mb %d is more than every expert of the model needs: cache budget %s", b>>20, mib(all))
		b = all
	}
	return b, nil
}

// runtimeReserve is what the process holds besides the parts checkMemory
// counts: the Go runtime, the tokenizer, per-thread scratch, the sink.
const runtimeReserve = 64 << 20

// memoryNeed is what a run keeps resident that the kernel cannot reclaim
// (an OOM kill, not a page-out, when it does not fit): dense weights in
// anonymous memory (--dense-weights anon; warm and mmap are page cache), the
// KV cache, the expert cache, the transient slots experts stream through
// when the cache holds none of them, and the runtime.
type memoryNeed struct {
	dense, kv, cache, scratch, runtime int64
}

func (n memoryNeed) total() int64 { return n.dense + n.kv + n.cache + n.scratch + n.runtime }

func (r *Resolved) need(d *model.Desc) memoryNeed {
	n := memoryNeed{kv: r.KVBytes, cache: r.Cache.Bytes, runtime: runtimeReserve}
	if r.Dense == dense.Anon || r.Dense == "" {
		n.dense = d.DenseBytes
	}
	if r.Streams() {
		n.scratch = int64(max(r.K, cache.DefaultTransientSlots)) * r.SlotBytes
	}
	return n
}

// checkMemory is the one memory check of a run, before anything is
// allocated: it refuses a configuration whose resident memory (need) exceeds
// mem, what the process may use (the cgroup limit or MemAvailable), and says
// what would fit. Without memory information it allows the run.
func (r *Resolved) checkMemory(d *model.Desc, mem memory) error {
	avail, source := mem.Avail, mem.Source
	n := r.need(d)
	if mem.err != nil || n.total() <= avail {
		return nil
	}
	var fixes []string
	if n.dense > 0 && n.total()-n.dense <= avail {
		fixes = append(fixes, "--dense-weights mmap (the dense weights in the page cache, which the kernel can reclaim)")
	}
	if rest := avail - (n.total() - n.cache); n.cache > 0 && rest >= 0 {
		fixes = append(fixes, fmt.Sprintf("--cache-mb %d or less", rest>>20))
	}
	if n.kv > 0 && n.total()-n.kv <= avail {
		fixes = append(fixes, "a smaller -c (the KV cache)")
	}
	if len(fixes) == 0 {
		least := n
		least.dense, least.cache = 0, 0
		fixes = append(fixes, fmt.Sprintf("--dense-weights mmap, --cache-mb 0 and a smaller -c together, or more memory (the KV cache, scratch and runtime alone need %s)", mib(least.total())))
	}
	return fmt.Errorf("%w: the run needs %s resident (dense weights %s + KV cache %s + expert cache %s + scratch %s + runtime %s), more than the %s available (%s); it would be killed for want of memory: use %s",
		ErrConfig, mib(n.total()), mib(n.dense), mib(n.kv), mib(n.cache), mib(n.scratch), mib(n.runtime), mib(avail), source, strings.Join(fixes, ", or "))
}

// kvElemBytes is the size of one KV element of type kv.
func kvElemBytes(kv model.KVType) int {
	if kv == model.KVF32 {
		return 4
	}
	return 2
}

// mib formats a byte count in MiB, or GiB from 10 GiB up.
func mib(b int64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// ErrModelChanged: the model file changed under the run (a memory fault on
// its mapping, e.g. it was truncated).
var ErrModelChanged = errors.New("the model file changed during the run")

// faultError turns a recovered memory fault into an error naming the model
// file; any other panic is re-raised.
func (e *Engine) faultError(r any) error {
	if re, ok := r.(runtime.Error); ok {
		if a, ok := re.(interface{ Addr() uintptr }); ok {
			return fmt.Errorf("%s: %w (memory fault at %#x reading its mapping: truncated or rewritten?)", e.cfg.Path, ErrModelChanged, a.Addr())
		}
	}
	panic(r)
}
