package kernels

import (
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	recordTable = flag.Bool("record-table", false, "calibrate this CPU and write its entry into cputable.json")
	recordName  = flag.String("record-name", "", "with -record-table: what the CPU is, e.g. \"AMD EPYC (Zen 5)\"")
	recordNote  = flag.String("record-note", "", "with -record-table: when and under which load the entry was measured")
)

// recordRepeats is how many calibrations a recorded entry takes the best
// times of.
const recordRepeats = 7

// TestRecordTable is the benchmark that fills the measured table:
//
//	go test ./kernels -run TestRecordTable -record-table -record-name '…' -record-note '…'
//
// calibrates this CPU recordRepeats times and writes (or replaces) its
// entry in cputable.json with each set's best time and the set those times
// pick. Without -record-table it does nothing: it is a tool, not a check.
func TestRecordTable(t *testing.T) {
	if !*recordTable {
		t.Skip("a tool: run with -record-table to measure this CPU")
	}
	if *recordName == "" || *recordNote == "" {
		t.Fatal("-record-table needs -record-name and -record-note")
	}
	cands := usableImpls()
	best := map[string]float64{}
	for range recordRepeats {
		_, secs := calibrate(cands, measureSet, func(m string) { t.Fatal(m) })
		for n, s := range secs {
			if b, ok := best[n]; !ok || s < b {
				best[n] = s
			}
		}
	}
	names := setNames(cands)
	times := map[string][]time.Duration{}
	for n, s := range best {
		times[n] = []time.Duration{time.Duration(s * 1e9)}
	}
	pick, _ := calibrate(fakeSets(names...), (&scripted{times: times}).measure, nil)
	e := TableEntry{CPU: CPUKey(), Name: *recordName, Set: pick.name, Sets: names, Seconds: best, Measured: *recordNote}
	table := slices.DeleteFunc(slices.Clone(cpuTable()), func(o TableEntry) bool { return o.CPU == e.CPU })
	table = append(table, e)
	slices.SortFunc(table, func(a, b TableEntry) int { return strings.Compare(a.CPU, b.CPU) })
	b, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("cputable.json", append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s %v", e.CPU, e.Set, e.Seconds)
}
