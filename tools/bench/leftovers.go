package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// runMarkEnv is the environment variable every child run carries, with a
// value of its own: descendants inherit it, so the ones still running when
// the run ends are found even after leaving the run's process group (setsid,
// a daemon's double fork).
const runMarkEnv = "PIPE_BENCH_RUN"

// newRunMark is a fresh value for runMarkEnv.
func newRunMark() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// killLeftovers ends what a finished run left behind: its process group
// (pgid is the run's pid, see ownGroup), then every process whose
// environment holds mark, until none is left (a few rounds: one may fork
// while the others die). It returns how many marked processes it killed.
func killLeftovers(pgid int, mark string) int {
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH: the group is gone
	needle := []byte(runMarkEnv + "=" + mark + "\x00")
	killed := 0
	for round := 0; round < 8; round++ {
		pids := markedProcs(needle)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	return killed
}

// markedProcs lists the processes (other than this one) whose environment
// holds needle; where /proc is missing it finds none.
func markedProcs(needle []byte) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := os.Getpid()
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, needle) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && isZombie(b) {
			continue // already dead, its parent has not reaped it
		}
		pids = append(pids, pid)
	}
	return pids
}

// isZombie reads a /proc/PID/stat line's state.
func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
