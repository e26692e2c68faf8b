package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pipe-engine/pipe/internal/sysmem"
)

// ErrNotRoot reports --mem-cap or --cold without root privileges.
var ErrNotRoot = errors.New("needs root")

// ErrNoCgroup reports that no writable memory cgroup (v1 or v2) was found.
var ErrNoCgroup = errors.New("no writable memory cgroup")

// cgroup is one memory cgroup made by bench for one run, nested under the
// cgroup bench itself runs in (so it never escapes limits set above bench).
type cgroup struct {
	dir string
	v2  bool
}

var cgSeq atomic.Int64

// newCgroup makes a cgroup limited to limit bytes of memory (no swap).
func newCgroup(limit int64) (*cgroup, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("bench: --mem-cap %w (it makes a memory cgroup); run as root or drop --mem-cap", ErrNotRoot)
	}
	name := fmt.Sprintf("pipe-bench-%d-%d", os.Getpid(), cgSeq.Add(1))
	v2dir, v1dir := sysmem.MemoryCgroupDirs()
	var errs []error
	if v1dir != "" {
		cg := &cgroup{dir: filepath.Join(v1dir, name)}
		if err := cg.setupV1(limit); err == nil {
			return cg, nil
		} else {
			errs = append(errs, err)
		}
	}
	if v2dir != "" {
		cg := &cgroup{dir: filepath.Join(v2dir, name), v2: true}
		if err := cg.setupV2(v2dir, limit); err == nil {
			return cg, nil
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no memory controller in /proc/self/cgroup"))
	}
	return nil, fmt.Errorf("bench: --mem-cap: %w: %w", ErrNoCgroup, errors.Join(errs...))
}

func writeFile(path, s string) error {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", s, path, err)
	}
	return nil
}

func (c *cgroup) setupV1(limit int64) error {
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return fmt.Errorf("cgroup v1: %w", err)
	}
	lim := strconv.FormatInt(limit, 10)
	if err := writeFile(filepath.Join(c.dir, "memory.limit_in_bytes"), lim); err != nil {
		_ = os.Remove(c.dir)
		return fmt.Errorf("cgroup v1: %w", err)
	}
	// no swap either, where the kernel accounts it
	if _, err := os.Stat(filepath.Join(c.dir, "memory.memsw.limit_in_bytes")); err == nil {
		_ = writeFile(filepath.Join(c.dir, "memory.memsw.limit_in_bytes"), lim)
	}
	return nil
}

func (c *cgroup) setupV2(parent string, limit int64) error {
	// the memory controller must be enabled for children of parent
	sc := filepath.Join(parent, "cgroup.subtree_control")
	if b, err := os.ReadFile(sc); err == nil && !strings.Contains(string(b), "memory") {
		if err := writeFile(sc, "+memory"); err != nil {
			return fmt.Errorf("cgroup v2: %w", err)
		}
	}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	if err := writeFile(filepath.Join(c.dir, "memory.max"), strconv.FormatInt(limit, 10)); err != nil {
		_ = os.Remove(c.dir)
		return fmt.Errorf("cgroup v2: %w", err)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "memory.swap.max")); err == nil {
		_ = writeFile(filepath.Join(c.dir, "memory.swap.max"), "0")
	}
	return nil
}

// add moves process pid into the cgroup.
func (c *cgroup) add(pid int) error {
	return writeFile(filepath.Join(c.dir, "cgroup.procs"), strconv.Itoa(pid))
}

// oomKills returns the number of OOM kills the cgroup recorded (-1 unknown).
func (c *cgroup) oomKills() int64 {
	file, key := "memory.oom_control", "oom_kill"
	if c.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// peak returns the cgroup's peak memory use in bytes (-1 unknown).
func (c *cgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// close kills what is left in the cgroup (a peer's helper that outlived
// it, a child of a killed group still exiting) and removes the cgroup,
// trying again while the kernel still counts exiting processes in it.
func (c *cgroup) close() error {
	var err error
	for try := 0; try < 100; try++ {
		for _, pid := range c.procs() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err = c.remove(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

// procs lists the processes in the cgroup.
func (c *cgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// remove deletes the cgroup (its processes must have exited).
func (c *cgroup) remove() error {
	if err := os.Remove(c.dir); err != nil {
		return fmt.Errorf("bench: remove cgroup %s: %w", c.dir, err)
	}
	return nil
}

// dropCaches writes back dirty pages and drops the page cache (root only).
func dropCaches() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("bench: --cold %w (it writes /proc/sys/vm/drop_caches)", ErrNotRoot)
	}
	syncFS()
	if err := writeFile("/proc/sys/vm/drop_caches", "3"); err != nil {
		return fmt.Errorf("bench: --cold: %w", err)
	}
	return nil
}
