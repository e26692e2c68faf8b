package kernels

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeSets are candidate sets for choose/calibrate with injected timings.
func fakeSets(names ...string) []*implementation {
	ms := make([]*implementation, len(names))
	for i, n := range names {
		m := *refImpl
		m.name = n
		ms[i] = &m
	}
	return ms
}

// scripted is a measureFunc returning each set's next scripted duration
// (the last one repeated) and writing the same results for every set
// except those named in differ. It counts its calls.
type scripted struct {
	times  map[string][]time.Duration
	differ string
	calls  map[string]int
}

func (s *scripted) measure(m *implementation, out [][]float32) time.Duration {
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	i := s.calls[m.name]
	s.calls[m.name]++
	for k := range out {
		for r := range out[k] {
			out[k][r] = float32(k + r)
			if m.name == s.differ {
				out[k][r] += 0.5
			}
		}
	}
	ts := s.times[m.name]
	return ts[min(i, len(ts)-1)]
}

func ms(v ...float64) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x * float64(time.Millisecond))
	}
	return d
}

// TestCalibratePicksFastest: the pick is the smallest best-of-rounds time
// (not the mean, not the first round), the earlier set on a tie; the
// number of rounds follows the measured time, not the clock.
func TestCalibratePicksFastest(t *testing.T) {
	for _, c := range []struct {
		name   string
		times  map[string][]time.Duration
		want   string
		rounds int
	}{
		{"best of rounds", map[string][]time.Duration{"a": ms(2, 2, 2), "b": ms(9, 9, 1.5)}, "b", maxRounds},
		{"first wins a tie", map[string][]time.Duration{"a": ms(3), "b": ms(3)}, "a", maxRounds},
		{"later wins", map[string][]time.Duration{"a": ms(3), "b": ms(2.9)}, "b", maxRounds},
		{"budget stops at min rounds", map[string][]time.Duration{"a": ms(40), "b": ms(30)}, "b", minRounds},
		{"negative timings are zero", map[string][]time.Duration{"a": ms(1), "b": ms(-5)}, "b", maxRounds},
	} {
		s := &scripted{times: c.times}
		got, secs := calibrate(fakeSets("a", "b"), s.measure, nil)
		if got.name != c.want {
			t.Errorf("%s: picked %s (%v), want %s", c.name, got.name, secs, c.want)
		}
		if s.calls["a"] != c.rounds || s.calls["b"] != c.rounds {
			t.Errorf("%s: %v measurements, want %d rounds", c.name, s.calls, c.rounds)
		}
	}
}

// TestCalibrateSkipsDiffering: a set whose results are not the first's is
// never picked, however fast, and says so.
func TestCalibrateSkipsDiffering(t *testing.T) {
	s := &scripted{times: map[string][]time.Duration{"a": ms(5), "b": ms(1), "c": ms(2)}, differ: "b"}
	var warned []string
	got, _ := calibrate(fakeSets("a", "b", "c"), s.measure, func(m string) { warned = append(warned, m) })
	if got.name != "c" || len(warned) != 1 || !strings.Contains(warned[0], "b differs") {
		t.Fatalf("picked %s, warnings %q; want c and one warning about b", got.name, warned)
	}
}

// TestChooseForced: a forced set is used without measuring; an unknown one
// is ErrUnknownSet naming what runs here.
func TestChooseForced(t *testing.T) {
	s := &scripted{times: map[string][]time.Duration{"a": ms(1), "b": ms(2)}}
	for _, f := range []string{"b", "purego"} {
		c, m, err := choose(ChooseOptions{Force: f}, "test-cpu", fakeSets("a", "b"), s.measure)
		if err != nil || m.name != f || c.Set != f || c.Source != SourceForced {
			t.Fatalf("force %s: %+v %v", f, c, err)
		}
	}
	if _, _, err := choose(ChooseOptions{Force: "avx9"}, "test-cpu", fakeSets("a", "b"), s.measure); !errors.Is(err, ErrUnknownSet) || !strings.Contains(err.Error(), "a, b, purego") {
		t.Fatalf("force avx9: %v, want ErrUnknownSet listing a, b, purego", err)
	}
	if len(s.calls) != 0 {
		t.Fatalf("measured %v", s.calls)
	}
	c, _, err := choose(ChooseOptions{}, "test-cpu", fakeSets("only"), s.measure)
	if err != nil || c.Source != SourceOnly || len(s.calls) != 0 {
		t.Fatalf("one set: %+v %v, measured %v", c, err, s.calls)
	}
}

// TestChooseCache: an unknown CPU is calibrated once and the result cached;
// the next choice reads the cache without measuring.
func TestChooseCache(t *testing.T) {
	dir := t.TempDir()
	s := &scripted{times: map[string][]time.Duration{"a": ms(2), "b": ms(1)}}
	o := ChooseOptions{CacheDir: dir, Warn: func(m string) { t.Errorf("warning: %s", m) }}
	c, m, err := choose(o, "test-cpu", fakeSets("a", "b"), s.measure)
	if err != nil || m.name != "b" || c.Source != SourceCalibrated || c.Seconds["b"] != 0.001 {
		t.Fatalf("first: %+v %v", c, err)
	}
	s.calls = nil
	c2, m, err := choose(o, "test-cpu", fakeSets("a", "b"), s.measure)
	if err != nil || m.name != "b" || c2.Source != SourceCached || len(s.calls) != 0 || c2.Seconds["a"] != c.Seconds["a"] {
		t.Fatalf("second: %+v %v, measured %v", c2, err, s.calls)
	}
	// Other candidates (a new binary): the cache is stale, calibrate again.
	var warned []string
	o.Warn = func(m string) { warned = append(warned, m) }
	c3, _, err := choose(o, "test-cpu", fakeSets("a", "b", "c"), (&scripted{times: map[string][]time.Duration{"a": ms(3), "b": ms(2), "c": ms(1)}}).measure)
	if err != nil || c3.Set != "c" || c3.Source != SourceCalibrated || len(warned) != 1 {
		t.Fatalf("stale: %+v %v %q", c3, err, warned)
	}
}

// TestChooseCorruptCache: a corrupt, hostile or foreign cache file is
// ignored with a warning, the CPU calibrated and the file replaced.
func TestChooseCorruptCache(t *testing.T) {
	path := func(dir string) string { return filepath.Join(dir, "kernels-test-cpu.json") }
	for name, body := range map[string][]byte{
		"garbage":     []byte("\x00\xffnot json"),
		"truncated":   []byte(`{"cpu":"test-cpu","set":"b"`),
		"huge":        append([]byte(`{"cpu":"test-cpu","set":"b","sets":["a","b"],"x":"`), make([]byte, maxCacheBytes)...),
		"other cpu":   []byte(`{"cpu":"other","set":"b","sets":["a","b"]}`),
		"unknown set": []byte(`{"cpu":"test-cpu","set":"evil","sets":["a","b"]}`),
		"wrong type":  []byte(`{"cpu":7,"set":["b"]}`),
		"null":        []byte(`null`),
	} {
		dir := t.TempDir()
		if err := os.WriteFile(path(dir), body, 0o644); err != nil {
			t.Fatal(err)
		}
		var warned []string
		o := ChooseOptions{CacheDir: dir, Warn: func(m string) { warned = append(warned, m) }}
		s := &scripted{times: map[string][]time.Duration{"a": ms(1), "b": ms(2)}}
		c, m, err := choose(o, "test-cpu", fakeSets("a", "b"), s.measure)
		if err != nil || m.name != "a" || c.Source != SourceCalibrated || len(warned) != 1 || !strings.Contains(warned[0], "ignoring cache") {
			t.Errorf("%s: %+v %v, warnings %q", name, c, err, warned)
			continue
		}
		if e, ok := readCache(path(dir), "test-cpu", []string{"a", "b"}, nil); !ok || e.Set != "a" {
			t.Errorf("%s: cache not replaced: %+v", name, e)
		}
	}
	// A cache directory that cannot be made: a warning, the choice stands.
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	var warned []string
	o := ChooseOptions{CacheDir: filepath.Join(file, "sub"), Warn: func(m string) { warned = append(warned, m) }}
	c, _, err := choose(o, "test-cpu", fakeSets("a", "b"), (&scripted{times: map[string][]time.Duration{"a": ms(2), "b": ms(1)}}).measure)
	if err != nil || c.Set != "b" || len(warned) == 0 || !strings.Contains(warned[len(warned)-1], "not cached") {
		t.Fatalf("unwritable: %+v %v %q", c, err, warned)
	}
}

// TestCalibrationSetsBitIdentical: every set that can run here computes the
// calibration workload bit for bit as the reference does, so the choice
// cannot change any output.
func TestCalibrationSetsBitIdentical(t *testing.T) {
	want := newCalibOut()
	runCalib(refImpl, want)
	for _, m := range usableImpls() {
		got := newCalibOut()
		runCalib(m, got)
		if !sameOut(want, got) {
			t.Errorf("set %s differs from the reference", m.name)
		}
	}
}

// TestCalibrateReal: the real measurement picks a usable set and reports a
// time for each.
func TestCalibrateReal(t *testing.T) {
	cands := usableImpls()
	got, secs := calibrate(cands, measureSet, func(m string) { t.Error(m) })
	if !slices.Contains(cands, got) || len(secs) != len(cands) {
		t.Fatalf("picked %s, times %v", got.name, secs)
	}
	t.Logf("CPU %s: %s %v", CPUKey(), got.name, secs)
}

// TestCPUTable: the shipped table parses, names each CPU once, and each
// entry's set is the one calibrate picks from the entry's times.
func TestCPUTable(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range cpuTable() {
		if e.CPU == "" || seen[e.CPU] || e.Measured == "" {
			t.Errorf("entry %+v: empty or repeated CPU, or no measurement note", e)
		}
		seen[e.CPU] = true
		times := map[string][]time.Duration{}
		for _, n := range e.Sets {
			times[n] = []time.Duration{time.Duration(e.Seconds[n] * 1e9)}
		}
		if got, _ := calibrate(fakeSets(e.Sets...), (&scripted{times: times}).measure, nil); len(e.Sets) == 0 || got.name != e.Set {
			t.Errorf("entry %s: set %s, its times %v pick %v", e.CPU, e.Set, e.Seconds, got)
		}
	}
}

// TestChooseInstalls: Choose installs the set it names and Chosen reports
// it; forcing each usable set in turn leaves a product's bits unchanged.
func TestChooseInstalls(t *testing.T) {
	saved, savedChoice := impl, Chosen()
	defer func() { impl, chosen = saved, savedChoice }()
	var first []float32
	p := calibWork()[0]
	for _, m := range append(usableImpls(), refImpl) {
		c, err := Choose(ChooseOptions{Force: m.name})
		if err != nil || impl != m || Chosen().Set != m.name || c.Source != SourceForced {
			t.Fatalf("force %s: %+v %v, in use %s", m.name, c, err, impl.name)
		}
		y := make([]float32, calibRows)
		var l Local
		if err := l.MatMul(p.t, p.w, calibRows, calibCols, p.x, 1, y); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = y
		} else if !sameOut([][]float32{first}, [][]float32{y}) {
			t.Errorf("set %s: product differs", m.name)
		}
	}
}
