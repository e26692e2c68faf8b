//go:build !linux

package affinity

// Pin fails: this OS has no thread CPU affinity the engine uses.
func Pin(cpus []int) error { return ErrUnsupported }
