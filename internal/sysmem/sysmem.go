// Package sysmem holds the engine's operating-system probes, in one place so
// their parsing is written and tested once: the memory available to the
// process (MemAvailable from /proc/meminfo and the tightest cgroup v1/v2
// memory limit of its cgroup and ancestors, which --cache-mb auto sizes the
// expert cache from), the process's memory cgroup directories (where
// `pipe bench --mem-cap` nests its cgroups), and the per-token counters of
// the CSV (getrusage major faults and CPU time, /proc/self/io read_bytes)
// and the run's own peak resident set (/proc/self/status VmHWM, the
// summary's peak_rss_MiB).
//
// Probes take the proc and cgroup roots as arguments where tests need fake
// trees; "" means the system's. They only read files and never cache values;
// ProcReadBytes keeps /proc/self/io open so a per-token sample allocates
// nothing.
package sysmem

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

// Limit is a memory limit found in the cgroup hierarchy.
type Limit struct {
	Version int    // 1 or 2
	Path    string // file the limit was read from
	Limit   int64  // bytes
	Usage   int64  // bytes in use in that cgroup, minus reclaimable inactive file pages
}

// MemAvailable reads MemAvailable from <procRoot>/meminfo (falling back to
// MemFree+Cached on kernels without it).
func MemAvailable(procRoot string) (int64, error) {
	p := filepath.Join(procRoot, "meminfo")
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("sysmem: %w", err)
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
			return 0, fmt.Errorf("sysmem: %s: field %s: %w", p, name, err)
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
	return 0, fmt.Errorf("sysmem: %s: no MemAvailable or MemFree/Cached", p)
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
		return Limit{}, false, fmt.Errorf("sysmem: %w", err)
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
		return 0, false, fmt.Errorf("sysmem: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("sysmem: %s: %w", p, err)
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
		return 0, fmt.Errorf("sysmem: %w", err)
	}
	u, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("sysmem: %s: %w", filepath.Join(dir, usageFile), err)
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

// MemoryCgroupDirs returns the directory of the process's memory cgroup on a
// cgroup v2 (unified) hierarchy with the memory controller and on a v1
// memory hierarchy, whichever exist ("" otherwise), under the system's
// mounts.
func MemoryCgroupDirs() (v2dir, v1dir string) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				if b, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers")); err == nil {
					if strings.Contains(string(b), "memory") {
						v2dir = filepath.Join(mnt, parts[2])
					}
					break
				}
			}
		case strings.Contains(","+parts[1]+",", ",memory,"):
			v1dir = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		}
	}
	return v2dir, v1dir
}
