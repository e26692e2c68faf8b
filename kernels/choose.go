package kernels

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// How the kernel set in use was chosen (Choice.Source).
const (
	SourceTable      = "table"      // the measured table shipped with pipe (cputable.json)
	SourceCached     = "cached"     // an earlier calibration on this machine
	SourceCalibrated = "calibrated" // a calibration just now
	SourceForced     = "forced"     // ChooseOptions.Force (pipe --kernels, PIPE_KERNELS)
	SourceOnly       = "only"       // a single set can run here
	SourceDefault    = "default"    // at init, before Choose: the first usable set
)

// ErrUnknownSet is returned by Choose for a forced set that does not exist
// or cannot run on this CPU.
var ErrUnknownSet = errors.New("kernels: unknown kernel set")

// Choice says which kernel set is in use, for which CPU and why.
type Choice struct {
	CPU    string `json:"cpu"`    // CPUKey()
	Set    string `json:"set"`    // Implementation()
	Source string `json:"source"` // one of the Source constants
	// Sets are the candidate sets in calibration order; Seconds their
	// calibration scores (the table's, the cache's or this run's).
	Sets    []string           `json:"sets,omitempty"`
	Seconds map[string]float64 `json:"seconds,omitempty"`
}

// ChooseOptions configures Choose.
type ChooseOptions struct {
	// Force names the set to use ("" or "auto": choose by measurement).
	Force string
	// CacheDir holds calibrations as kernels-<CPUKey>.json ("": none kept).
	CacheDir string
	// Warn receives the problems Choose works around (a corrupt cache
	// file, one it cannot write); nil drops them.
	Warn func(msg string)
}

var (
	chosenMu sync.Mutex
	chosen   = Choice{CPU: CPUKey(), Set: impl.name, Source: SourceDefault}
)

func init() {
	if len(usableImpls()) == 1 {
		chosen.Source = SourceOnly
	} else if e, ok := tableEntry(CPUKey()); ok && e.Set == impl.name {
		chosen.Source, chosen.Sets, chosen.Seconds = SourceTable, e.Sets, e.Seconds
	}
}

// Chosen is the choice in use: Choose's last, or the one made at init.
func Chosen() Choice {
	chosenMu.Lock()
	defer chosenMu.Unlock()
	return chosen
}

// Choose picks the kernel set and installs it: the forced one if named,
// else the table's entry for this CPU, else a cached calibration, else a
// calibration now (a few tens of milliseconds, cached in o.CacheDir).
// Every set computes bit-identical results, so the choice changes only the
// speed. It must run before any product is computed (a command calls it
// at start-up); it is not safe concurrently with products.
func Choose(o ChooseOptions) (Choice, error) {
	c, m, err := choose(o, CPUKey(), usableImpls(), measureSet)
	if err != nil {
		return Choice{}, err
	}
	chosenMu.Lock()
	defer chosenMu.Unlock()
	if impl != m { // the same set again (the table's, at init) writes nothing
		impl = m
	}
	chosen = c
	return c, nil
}

// usableImpls lists the sets that can run here, the default first: the
// native ones, else the reference.
func usableImpls() []*implementation {
	if n := nativeImpls(); len(n) > 0 {
		return n
	}
	return []*implementation{refImpl}
}

func setNames(ms []*implementation) []string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.name
	}
	return names
}

// choose is Choose without installing, with the CPU, the candidates and
// the measurement given (tests inject them).
func choose(o ChooseOptions, key string, cands []*implementation, measure measureFunc) (Choice, *implementation, error) {
	names := setNames(cands)
	c := Choice{CPU: key, Sets: names}
	if o.Force != "" && o.Force != "auto" {
		if o.Force == refImpl.name {
			c.Set, c.Source = refImpl.name, SourceForced
			return c, refImpl, nil
		}
		if i := slices.Index(names, o.Force); i >= 0 {
			c.Set, c.Source = o.Force, SourceForced
			return c, cands[i], nil
		}
		return Choice{}, nil, fmt.Errorf("%w %q: this CPU (%s) runs %s", ErrUnknownSet, o.Force, key, strings.Join(append(names, refImpl.name), ", "))
	}
	if len(cands) == 1 {
		c.Set, c.Source = names[0], SourceOnly
		return c, cands[0], nil
	}
	if e, ok := tableEntry(key); ok {
		if i := slices.Index(names, e.Set); i >= 0 {
			c.Set, c.Source, c.Seconds = e.Set, SourceTable, e.Seconds
			return c, cands[i], nil
		}
	}
	path := ""
	if o.CacheDir != "" {
		path = filepath.Join(o.CacheDir, "kernels-"+key+".json")
		if e, ok := readCache(path, key, names, o.Warn); ok {
			c.Set, c.Source, c.Seconds = e.Set, SourceCached, e.Seconds
			return c, cands[slices.Index(names, e.Set)], nil
		}
	}
	best, secs := calibrate(cands, measure, o.Warn)
	c.Set, c.Source, c.Seconds = best.name, SourceCalibrated, secs
	if path != "" {
		if err := writeCache(path, c); err != nil {
			warn(o.Warn, fmt.Sprintf("kernels: calibration not cached: %v", err))
		}
	}
	return c, best, nil
}

func warn(f func(string), msg string) {
	if f != nil {
		f(msg)
	}
}

// maxCacheBytes bounds what is read of a cache file.
const maxCacheBytes = 64 << 10

// readCache returns the calibration cached at path if it is for this CPU
// and these candidate sets and names one of them; anything else (missing:
// silently; unreadable, corrupt or stale: with a warning) is ignored.
func readCache(path, key string, names []string, w func(string)) (Choice, bool) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Choice{}, false
	}
	if err != nil {
		warn(w, fmt.Sprintf("kernels: ignoring cache %s: %v", path, err))
		return Choice{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
	var e Choice
	switch {
	case err != nil:
	case len(b) > maxCacheBytes:
		err = fmt.Errorf("over %d bytes", maxCacheBytes)
	default:
		err = json.Unmarshal(b, &e)
	}
	if err == nil && (e.CPU != key || !slices.Equal(e.Sets, names) || !slices.Contains(names, e.Set)) {
		err = fmt.Errorf("made for CPU %q sets %q choosing %q, not CPU %q sets %q", e.CPU, e.Sets, e.Set, key, names)
	}
	if err != nil {
		warn(w, fmt.Sprintf("kernels: ignoring cache %s: %v", path, err))
		return Choice{}, false
	}
	return e, true
}

// writeCache stores c at path (a temporary file renamed into place).
func writeCache(path string, c Choice) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kernels-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// TableEntry is one CPU's row of the measured table (cputable.json).
type TableEntry struct {
	CPU     string             `json:"cpu"`
	Name    string             `json:"name"` // what the CPU is, for people
	Set     string             `json:"set"`
	Sets    []string           `json:"sets"`
	Seconds map[string]float64 `json:"seconds"`
	// Measured: when, with what, under which load.
	Measured string `json:"measured"`
}

// cpuTable is the measured table, written by
// `go test ./kernels -run TestRecordTable -record-table` on each CPU class.
//
//go:embed cputable.json
var cpuTableJSON []byte

var cpuTable = sync.OnceValue(func() []TableEntry {
	var t []TableEntry
	if err := json.Unmarshal(cpuTableJSON, &t); err != nil {
		panic(fmt.Sprintf("kernels: cputable.json: %v", err)) // checked by TestCPUTable
	}
	return t
})

func tableEntry(key string) (TableEntry, bool) {
	for _, e := range cpuTable() {
		if e.CPU == key {
			return e, true
		}
	}
	return TableEntry{}, false
}
