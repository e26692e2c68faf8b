package cache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAutoBudgetAndroid: the cgroup layouts of Android phones give no
// usable memory limit, so --cache-mb auto sizes the cache from MemAvailable:
// memcg v1 mounted at /dev/memcg (not under the cgroup root), cgroup v2
// per-app groups with memory.max "max", and cgroup files an app may not read
// (SELinux; simulated by a directory where the file should be).
func TestAutoBudgetAndroid(t *testing.T) {
	const gib = 1 << 30
	opts := AutoOptions{DenseBytes: 1 * gib, KVBytes: 256 * mib, FloorBytes: 512 * mib}
	want := int64(16*gib - 1*gib - 256*mib - 512*mib) // meminfo's 16 GiB MemAvailable
	for _, tc := range []struct {
		name  string
		files map[string]string
		dirs  []string
	}{
		{name: "memcg v1 at /dev/memcg", files: map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "5:memory:/\n4:cpuset:/top-app\n3:cpu:/\n0::/uid_10234/pid_4321\n",
		}},
		{name: "cgroup v2 per-app, no limit", files: map[string]string{
			"proc/meminfo":                         meminfo,
			"proc/self/cgroup":                     "0::/uid_10234/pid_4321\n",
			"cg/cgroup.controllers":                "cpuset cpu io memory\n",
			"cg/uid_10234/pid_4321/memory.max":     "max\n",
			"cg/uid_10234/pid_4321/memory.current": "104857600\n",
			"cg/uid_10234/memory.max":              "max\n",
		}},
		{name: "cgroup limit unreadable", files: map[string]string{
			"proc/meminfo":          meminfo,
			"proc/self/cgroup":      "0::/uid_10234/pid_4321\n",
			"cg/cgroup.controllers": "memory\n",
		}, dirs: []string{"cg/uid_10234/pid_4321/memory.max"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc, cg := fakeRoots(t, tc.files)
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(filepath.Dir(proc), filepath.FromSlash(d)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			o := opts
			m, err := ReadMemory(proc, cg)
			if err != nil {
				t.Fatal(err)
			}
			a := AutoBudget(m, o)
			if a.Budget != want || a.Source != "MemAvailable" || !strings.Contains(a.Explain, "MemAvailable 16384 MiB") {
				t.Errorf("budget %d MiB from %s (%s); want %d MiB from MemAvailable", a.Budget/mib, a.Source, a.Explain, want/mib)
			}
		})
	}
}
