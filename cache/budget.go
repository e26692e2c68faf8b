package cache

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pipe-engine/pipe/internal/sysmem"
)

// Memory sizing for --cache-mb auto, and the cliff guard.

// ErrNoMemInfo: neither a cgroup limit nor /proc/meminfo could be read.
var ErrNoMemInfo = errors.New("cache: cannot determine available memory")

const mib = 1 << 20

// DefaultFloorMB is the default of --cache-floor-mb: RAM left free when the
// budget is sized automatically (runtime, compute buffers, page cache for the
// file's metadata, other processes).
const DefaultFloorMB = 512

// SlotSize returns the slot size that fits every span: the largest, rounded
// up to SlotAlign. Pass reader.SpanBytes of every expert's ranges (of every
// layer): spans differ between experts of one layer because their offsets
// have different alignments. It returns 0 for no positive span.
func SlotSize(spans ...int64) int64 {
	var m int64
	for _, s := range spans {
		m = max(m, s)
	}
	return (m + SlotAlign - 1) &^ (SlotAlign - 1)
}

// TokenWorkingSet is one decode token's working set in budget terms: every
// layer's k routed experts, each occupying a whole slot.
func TokenWorkingSet(layers, k int, slotBytes int64) int64 {
	return int64(layers) * int64(k) * slotBytes
}

// CliffWarning returns a warning when 0 < budget < workingSet (both in slot
// bytes, see TokenWorkingSet), saying by how much the budget falls short, and
// "" otherwise. Below one token's working set a global LRU evicts every
// expert just before it is needed again (the layers are walked in a fixed
// cycle), so its hit rate is 0 % while the cache still costs RAM and
// bookkeeping. A budget of 0 is an explicit choice to stream without caching.
func CliffWarning(budget, workingSet int64) string {
	if budget <= 0 || budget >= workingSet {
		return ""
	}
	short := workingSet - budget
	return fmt.Sprintf("cache budget %s is %s (%.1f %%) below one token's working set of %s (layers x k x slot): "+
		"a global LRU will hit ~0 %%; raise --cache-mb to at least %d, or use --cache-mb 0 to stream without caching",
		fmtMiB(budget), fmtMiB(short), 100*float64(short)/float64(workingSet), fmtMiB(workingSet),
		(workingSet+mib-1)/mib)
}

// AutoOptions are the inputs of AutoBudget. All byte counts are >= 0.
type AutoOptions struct {
	DenseBytes    int64 // dense weights that will be resident
	KVBytes       int64 // KV cache
	OverheadBytes int64 // other known allocations (transient slots, compute buffers)
	FloorBytes    int64 // RAM to leave free (--cache-floor-mb)
	CeilBytes     int64 // upper clamp (--cache-ceil-mb); 0 = none
	AllBytes      int64 // every expert of the model in slots: a larger cache holds nothing more (0 = unknown)
	SlotBytes     int64 // if > 0, the budget is rounded down to whole slots
}

// Auto is AutoBudget's answer.
type Auto struct {
	Budget    int64  // bytes for the expert cache (>= 0)
	Available int64  // memory the process may still use
	Source    string // where Available came from
	Explain   string // one human line: the arithmetic, for the load log
}

// Memory is what the process may still use (ReadMemory's answer).
type Memory struct {
	Avail  int64  // bytes
	Source string // where the figure comes from: "MemAvailable" or "cgroup vN PATH"
	Why    string // the arithmetic in words
}

// ReadMemory reads the memory the process may still use: the tightest cgroup
// memory limit minus that cgroup's non-reclaimable usage, never more than
// MemAvailable. procRoot and cgroupRoot ("" for /proc and /sys/fs/cgroup;
// tests point them at a fake tree) are where it reads.
func ReadMemory(procRoot, cgroupRoot string) (Memory, error) {
	if procRoot == "" {
		procRoot = "/proc"
	}
	if cgroupRoot == "" {
		cgroupRoot = "/sys/fs/cgroup"
	}
	memAvail, memErr := sysmem.MemAvailable(procRoot)
	lim, limOK, limErr := sysmem.CgroupLimit(procRoot, cgroupRoot)
	var m Memory
	switch {
	case limOK:
		m.Avail = max(lim.Limit-lim.Usage, 0)
		m.Source = fmt.Sprintf("cgroup v%d %s", lim.Version, lim.Path)
		m.Why = fmt.Sprintf("cgroup v%d limit %s - used %s = %s", lim.Version, fmtMiB(lim.Limit), fmtMiB(lim.Usage), fmtMiB(m.Avail))
		if memErr == nil && memAvail < m.Avail {
			m.Avail, m.Source = memAvail, "MemAvailable"
			m.Why += fmt.Sprintf("; capped by MemAvailable %s", fmtMiB(memAvail))
		}
	case memErr == nil:
		m.Avail, m.Source = memAvail, "MemAvailable"
		m.Why = fmt.Sprintf("no cgroup limit; MemAvailable %s", fmtMiB(memAvail))
	default:
		return Memory{}, fmt.Errorf("%w: %w", ErrNoMemInfo, errors.Join(memErr, limErr))
	}
	return m, nil
}

// AutoBudget sizes the expert cache from m, the memory available to the
// process (ReadMemory): minus dense weights, KV cache, overhead and the
// floor, clamped to [0, CeilBytes] and rounded down to whole slots.
func AutoBudget(m Memory, o AutoOptions) Auto {
	a := Auto{Available: m.Avail, Source: m.Source}
	parts := []string{m.Why}
	b := a.Available - o.DenseBytes - o.KVBytes - o.OverheadBytes - o.FloorBytes
	parts = append(parts, fmt.Sprintf("- dense %s - KV %s - overhead %s - floor %s = %s",
		fmtMiB(o.DenseBytes), fmtMiB(o.KVBytes), fmtMiB(o.OverheadBytes), fmtMiB(o.FloorBytes), fmtMiB(b)))
	if b < 0 {
		b = 0
		parts = append(parts, "nothing left: budget 0 (experts stream through transient slots)")
	}
	if o.CeilBytes > 0 && b > o.CeilBytes {
		b = o.CeilBytes
		parts = append(parts, fmt.Sprintf("clamped by --cache-ceil-mb to %s", fmtMiB(b)))
	}
	if o.AllBytes > 0 && b > o.AllBytes {
		b = o.AllBytes
		parts = append(parts, fmt.Sprintf("clamped to every expert, %s", fmtMiB(b)))
	}
	if o.SlotBytes > 0 {
		n := b / o.SlotBytes
		b = n * o.SlotBytes
		parts = append(parts, fmt.Sprintf("%d slots of %s", n, fmtMiB(o.SlotBytes)))
	}
	a.Budget = b
	a.Explain = fmt.Sprintf("cache budget %s: %s", fmtMiB(b), strings.Join(parts, "; "))
	return a
}

func fmtMiB(b int64) string {
	if b%mib == 0 {
		return fmt.Sprintf("%d MiB", b/mib)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/mib)
}
