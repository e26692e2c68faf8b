package cache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
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
	// ProcRoot is the proc file system ("/proc" when empty); tests point it at a fake tree.
	ProcRoot string
	// CgroupRoot is where cgroup file systems are mounted ("/sys/fs/cgroup" when empty).
	CgroupRoot string

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

// Limit is a memory limit found in the cgroup hierarchy.
type Limit struct {
	Version int    // 1 or 2
	Path    string // file the limit was read from
	Limit   int64  // bytes
	Usage   int64  // bytes in use in that cgroup, minus reclaimable inactive file pages
}

// AutoBudget sizes the expert cache: memory available to the process (the
// tightest cgroup memory limit minus that cgroup's non-reclaimable usage, and
// never more than MemAvailable), minus dense weights, KV cache, overhead and
// the floor, clamped to [0, CeilBytes] and rounded down to whole slots. Call it
// before loading the dense weights (their bytes are subtracted here).
func AutoBudget(o AutoOptions) (Auto, error) {
	proc, cg := o.ProcRoot, o.CgroupRoot
	if proc == "" {
		proc = "/proc"
	}
	if cg == "" {
		cg = "/sys/fs/cgroup"
	}
	memAvail, memErr := MemAvailable(proc)
	lim, limOK, limErr := CgroupLimit(proc, cg)
	var a Auto
	var parts []string
	switch {
	case limOK:
		a.Available = max(lim.Limit-lim.Usage, 0)
		a.Source = fmt.Sprintf("cgroup v%d %s", lim.Version, lim.Path)
		parts = append(parts, fmt.Sprintf("cgroup v%d limit %s - used %s = %s", lim.Version,
			fmtMiB(lim.Limit), fmtMiB(lim.Usage), fmtMiB(a.Available)))
		if memErr == nil && memAvail < a.Available {
			a.Available = memAvail
			a.Source = "MemAvailable"
			parts = append(parts, fmt.Sprintf("capped by MemAvailable %s", fmtMiB(memAvail)))
		}
	case memErr == nil:
		a.Available = memAvail
		a.Source = "MemAvailable"
		parts = append(parts, fmt.Sprintf("no cgroup limit; MemAvailable %s", fmtMiB(memAvail)))
	default:
		return Auto{}, fmt.Errorf("%w: %w", ErrNoMemInfo, errors.Join(memErr, limErr))
	}
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
	return a, nil
}

// MemAvailable reads MemAvailable from <procRoot>/meminfo (falling back to
// MemFree+Cached on kernels without it).
func MemAvailable(procRoot string) (int64, error) {
	p := filepath.Join(procRoot, "meminfo")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("cache: %w", err)
	}
	var free, cached int64 = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cache: %s: field %s: %w", p, name, err)
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		switch name {
		case "MemAvailable":
			return v, nil
		case "MemFree":
			free = v
		case "Cached":
			cached = v
		}
	}
	if free >= 0 && cached >= 0 {
		return free + cached, nil
	}
	return 0, fmt.Errorf("cache: %s: no MemAvailable or MemFree/Cached", p)
}

// CgroupLimit finds the tightest memory limit applying to the process: its own
// cgroup (from <procRoot>/self/cgroup) and its ancestors, cgroup v1
// (<cgroupRoot>/memory/<path>/memory.limit_in_bytes) if the memory controller
// is on a v1 hierarchy, else v2 (<cgroupRoot>/<path>/memory.max, or under
// <cgroupRoot>/unified on hybrid systems). If the process's path does not exist
// under the mount (a cgroup namespace), the mount root is used. ok is false
// when no limit is set (or no cgroup is found); err reports unreadable files.
func CgroupLimit(procRoot, cgroupRoot string) (lim Limit, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return Limit{}, false, fmt.Errorf("cache: %w", err)
	}
	var v1Path, v2Path string
	hasV1, hasV2 := false, false
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2Path, hasV2 = f[2], true
			continue
		}
		for c := range strings.SplitSeq(f[1], ",") {
			if c == "memory" {
				v1Path, hasV1 = f[2], true
			}
		}
	}
	switch {
	case hasV1:
		return walkLimits(1, filepath.Join(cgroupRoot, "memory"), v1Path)
	case hasV2:
		root := cgroupRoot
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
			if _, err2 := os.Stat(filepath.Join(root, "unified", "cgroup.controllers")); err2 == nil {
				root = filepath.Join(root, "unified")
			}
		}
		return walkLimits(2, root, v2Path)
	}
	return Limit{}, false, nil
}

// walkLimits reads the limit of cg and each ancestor under mount and returns
// the smallest, with its cgroup's usage.
func walkLimits(version int, mount, cg string) (Limit, bool, error) {
	cg = path.Clean("/" + cg)
	if _, err := os.Stat(filepath.Join(mount, filepath.FromSlash(cg))); err != nil {
		cg = "/" // namespaced: our cgroup is the mount root
	}
	limFile, usageFile, inactive := "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
	if version == 2 {
		limFile, usageFile, inactive = "memory.max", "memory.current", "inactive_file"
	}
	var best Limit
	found := false
	for dir := cg; ; dir = path.Dir(dir) {
		d := filepath.Join(mount, filepath.FromSlash(dir))
		p := filepath.Join(d, limFile)
		v, set, err := readLimit(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Limit{}, false, err
		}
		if err == nil && set && (!found || v < best.Limit) {
			u, err := readUsage(d, usageFile, inactive)
			if err != nil {
				return Limit{}, false, err
			}
			best = Limit{Version: version, Path: p, Limit: v, Usage: u}
			found = true
		}
		if dir == "/" {
			break
		}
	}
	return best, found, nil
}

// noLimit: v1 reports "unlimited" as a huge page-rounded number.
const noLimit = int64(1) << 60

func readLimit(p string) (int64, bool, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, false, fmt.Errorf("cache: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("cache: %s: %w", p, err)
	}
	if v >= noLimit || v < 0 {
		return 0, false, nil
	}
	return v, true, nil
}

// readUsage returns usage minus inactive file pages (reclaimable), as
// container tools report "used" memory. Missing files count as 0.
func readUsage(dir, usageFile, inactiveKey string) (int64, error) {
	data, err := os.ReadFile(filepath.Join(dir, usageFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cache: %w", err)
	}
	u, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cache: %s: %w", filepath.Join(dir, usageFile), err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err == nil {
		for line := range strings.SplitSeq(string(stat), "\n") {
			k, v, ok := strings.Cut(line, " ")
			if ok && k == inactiveKey {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n <= u {
					u -= n
				}
			}
		}
	}
	return u, nil
}

// PeakRSS returns the process's peak resident set (VmHWM) and current RSS
// (VmRSS) in bytes from <procRoot>/self/status.
func PeakRSS(procRoot string) (peak, cur int64, err error) {
	if procRoot == "" {
		procRoot = "/proc"
	}
	p := filepath.Join(procRoot, "self", "status")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, 0, fmt.Errorf("cache: %w", err)
	}
	peak, cur = -1, -1
	for line := range strings.SplitSeq(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cache: %s: %s: %w", p, name, err)
		}
		if name == "VmHWM" {
			peak = v * 1024
		} else {
			cur = v * 1024
		}
	}
	if peak < 0 || cur < 0 {
		return 0, 0, fmt.Errorf("cache: %s: no VmHWM/VmRSS", p)
	}
	return peak, cur, nil
}

func fmtMiB(b int64) string {
	if b%mib == 0 {
		return fmt.Sprintf("%d MiB", b/mib)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/mib)
}
