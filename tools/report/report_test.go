package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"gonum.org/v1/plot/vg"

	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/metrics"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGoldenText locks the text report of reference files. The golden
// outputs were written by this package (-update): they catch unintended
// change, they do not prove the numbers right. Those are checked apart from
// them: the seed's published tables (TestSeedNumbers, TestSeedStepRows,
// TestSeedTablesInMarkdown) for the 9-column files, and
// TestPipeCSVRecomputed for the pipe-written 12-column one.
func TestGoldenText(t *testing.T) {
	for _, tc := range []struct{ name, format, golden string }{
		{"qwen_k8", FormatText, "qwen_k8.report.txt"},
		{"gptoss_k4", FormatMarkdown, "gptoss_k4.report.md"},
		// A 12-column file written by `pipe run --csv` (tiny generated model).
		{"pipe_tiny_qwen3moe", FormatText, "pipe_tiny_qwen3moe.report.txt"},
	} {
		a := analyzeFile(t, tc.name, Options{Warmup: -1})
		var buf bytes.Buffer
		if err := Write(&buf, []*Analysis{a}, tc.format); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", tc.golden)
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if got := buf.String(); got != string(want) {
			t.Errorf("%s %s output differs from %s:\n--- got\n%s\n--- want\n%s", tc.name, tc.format, path, got, want)
		}
	}
}

// TestSeedTablesInMarkdown: the markdown step table prints the seed's rows.
func TestSeedTablesInMarkdown(t *testing.T) {
	a := analyzeFile(t, "qwen_k8", Options{Warmup: -1})
	var buf bytes.Buffer
	if err := Write(&buf, []*Analysis{a}, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| step | wall_ms | compute_ms | io_ms | cache_hit% | tok/s |",
		"| 1 | 742 | 521 | 841 | 4.5 | 1.35 |",
		"| 2 | 252 | 86 | 555 | 10.2 | 3.97 |",
		"| 3 | 276 | 87 | 634 | 14.2 | 3.62 |",
		"| … |  |  |  |  |  |",
		"| 255 | 151 | 100 | 142 | 77.2 | 6.62 |",
		"| mean tok/s | 4.92 ",
		"| regime | I/O-bound warm-up: ",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestJSON(t *testing.T) {
	as := []*Analysis{analyzeFile(t, "gptoss_k2", Options{Warmup: -1}), analyzeFile(t, "gptoss_k4", Options{Warmup: -1})}
	var buf bytes.Buffer
	if err := Write(&buf, as, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Name          string   `json:"name"`
			Tokens        int      `json:"tokens"`
			MeanTokS      float64  `json:"tok_s"`
			LastThirdTokS float64  `json:"last_third_tok_s"`
			CPUOccupancy  *float64 `json:"cpu_occupancy"`
			Regime        string   `json:"regime"`
			WarmupEndStep int      `json:"warmup_end_step"`
			Steps         []struct {
				Step int     `json:"step"`
				IOMS float64 `json:"io_ms"`
			} `json:"steps"`
			Trailer map[string]string `json:"trailer"`
		} `json:"runs"`
		Comparison []struct {
			Base, Run string
			Metrics   []Comparison
		} `json:"comparison"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(doc.Runs) != 2 || doc.Runs[0].Tokens != 24 || !near(doc.Runs[0].LastThirdTokS, 0.737, 0.001) ||
		doc.Runs[1].Regime != string(RegimeResidency) || doc.Runs[0].CPUOccupancy != nil ||
		len(doc.Runs[0].Steps) != 5 || doc.Runs[0].Steps[3].Step != 23 || doc.Runs[0].Trailer["tok/s"] != "0.163" ||
		doc.Runs[0].WarmupEndStep != 15 {
		t.Errorf("json runs: %+v", doc.Runs)
	}
	if len(doc.Comparison) != 1 || doc.Comparison[0].Base != "gptoss_k2" || doc.Comparison[0].Run != "gptoss_k4" || len(doc.Comparison[0].Metrics) == 0 {
		t.Errorf("json comparison: %+v", doc.Comparison)
	}
	if err := Write(&buf, as, "yaml"); !errors.Is(err, ErrFormat) {
		t.Errorf("format yaml: %v", err)
	}
}

// runOf builds an analysed run from CSV text.
func runOf(t *testing.T, name, csv string) *Analysis {
	t.Helper()
	run, err := Read(strings.NewReader(csv), name+".csv")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(run, Options{Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func constRun(wall float64, hit float64, budget string) string {
	var b strings.Builder
	b.WriteString("step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms\n")
	for i := 1; i <= 6; i++ {
		b.WriteString(strings.Join([]string{itoa(i), "6", ftoa(wall), "10", ftoa(wall / 2), "1048576", ftoa(hit), "1", "1"}, ",") + "\n")
	}
	b.WriteString("# summary cache_budget_MiB=" + budget + "\n")
	return b.String()
}

func itoa(i int) string     { return ftoa(float64(i)) }
func ftoa(v float64) string { return strings.TrimSuffix(strings.TrimRight(fnum(v, 3), "0"), ".") }

// TestCompareSeedStyle: the comparison cells read like the seed's table.
func TestCompareSeedStyle(t *testing.T) {
	before := runOf(t, "lazy", constRun(16641, 13.4, "3000"))
	after := runOf(t, "warm", constRun(829, 13.4, "3000"))
	cells := map[string]string{}
	for _, c := range Compare(before, after) {
		cells[c.Metric] = c.Text
	}
	for metric, want := range map[string]string{
		"first-5 wall avg": "16641 → 829 ms (20×)",
		"mean tok/s":       "0.060 → 1.21 (20×)",
		"final hit":        "13.4 = 13.4",
		"budget":           "3000 = 3000",
		"read/token":       "1.0 = 1.0",
		"regime":           "steady = steady",
	} {
		if cells[metric] != want {
			t.Errorf("%s: %q, want %q", metric, cells[metric], want)
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, []*Analysis{before, after}, FormatText); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "comparison (against lazy)") || !strings.Contains(buf.String(), "lazy → warm") {
		t.Errorf("text comparison:\n%s", buf.String())
	}
}

func TestRead(t *testing.T) {
	header := "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms"
	ok := []struct {
		name, csv string
		check     func(*testing.T, *Run)
	}{
		{"legacy without trailer", header + "\n1,2,100,1,50,10,-1,0,0\n2,2,100,1,50,10,-1,0,0\n", func(t *testing.T, r *Run) {
			if len(r.Rows) != 2 || r.Trailer != nil || r.Has("majflt") || r.Rows[0].ResidentFrac != -1 {
				t.Errorf("%+v", r)
			}
		}},
		{"pipe columns reordered, extras, CRLF, comments", "# pipe run\r\nwall_ms,step,steps,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac,spec\r\n\r\n250.5,1,1,1,50,7,12.5,0,0,3,400,0.9,2\r\n# summary a=1 b=x=y\r\n", func(t *testing.T, r *Run) {
			w := metrics.Token{Step: 1, Steps: 1, WallMS: 250.5, IOMS: 1, ComputeMS: 50, ReadBytes: 7, CacheHitPct: 12.5, Majflt: 3, CPUMS: 400, ResidentFrac: 0.9}
			got := r.Rows[0]
			if len(got.Extra) != 1 || got.Extra[0] != 2 || r.Extra[0] != "spec" {
				t.Errorf("extras %v %v", r.Extra, got.Extra)
			}
			got.Extra = nil
			if !reflect.DeepEqual(got, w) || !r.Has("cpu_ms") {
				t.Errorf("row %+v, want %+v", got, w)
			}
			if v, _ := r.TrailerValue("b"); v != "x=y" || len(r.Trailer) != 2 {
				t.Errorf("trailer %v", r.Trailer)
			}
		}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Read(strings.NewReader(tc.csv), "x.csv")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
	bad := []struct{ name, csv, want string }{
		{"empty", "", "x.csv: malformed per-token CSV: no header line"},
		{"comments only", "# summary tokens=0\n", "no header line"},
		{"missing column", "step,steps,wall_ms\n1,1,1\n", `x.csv:1: malformed per-token CSV: header lacks column "io_ms"`},
		{"repeated column", header + ",wall_ms\n", `x.csv:1: malformed per-token CSV: header column "wall_ms" repeated`},
		{"empty column", header + ",\n", `header column 10 is empty`},
		{"short row", header + "\n1,2,100,1,50,10,4,0,0\n2,2,100\n", "x.csv:3: malformed per-token CSV: 3 fields, header has 9"},
		{"not a number", header + "\n1,2,abc,1,50,10,4,0,0\n", `x.csv:2: malformed per-token CSV: column "wall_ms": "abc" is not a finite number`},
		{"nan", header + "\n1,2,NaN,1,50,10,4,0,0\n", `"NaN" is not a finite number`},
		{"negative wall", header + "\n1,2,-5,1,50,10,4,0,0\n", `column "wall_ms": -5 is negative`},
		{"fractional step", header + "\n1.5,2,5,1,50,10,4,0,0\n", `column "step": 1.5 is not an integer`},
		{"negative bytes", header + "\n1,2,5,1,50,-10,4,0,0\n", `column "read_bytes": -10 is negative`},
		{"bad extra", header + ",x\n1,2,5,1,50,10,4,0,0,y\n", `column "x": "y" is not a number`},
		{"row after trailer", header + "\n1,2,5,1,50,10,4,0,0\n# summary a=1\n2,2,5,1,50,10,4,0,0\n", "x.csv:4: malformed per-token CSV: token row after the # summary trailer"},
		{"two trailers", header + "\n# summary a=1\n# summary b=2\n", "x.csv:3: malformed per-token CSV: second # summary line"},
		{"bad trailer", header + "\n# summary tokens\n", `x.csv:2: malformed per-token CSV: summary field "tokens" is not key=value`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.csv), "x.csv")
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrMalformed containing %q", err, tc.want)
			}
		})
	}
	long := header + "\n" + strings.Repeat("1", 17<<20) + "\n"
	if _, err := Read(strings.NewReader(long), "x.csv"); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "x.csv:2:") {
		t.Errorf("17 MiB line: %v", err)
	}
	if _, err := ReadFile(filepath.Join("testdata", "nope.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	r, err := Read(strings.NewReader(header+"\n"), "empty.csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Analyze(r, Options{Warmup: -1}); !errors.Is(err, ErrNoTokens) || !strings.Contains(err.Error(), "empty.csv") {
		t.Errorf("no rows: %v", err)
	}
}

func TestWarmupForcedAndThreads(t *testing.T) {
	a := analyzeFile(t, "gptoss_k4", Options{Warmup: 16, Threads: 4})
	if !a.Summary.WarmupForced || a.Summary.WarmupTokens != 16 || !near(a.Summary.SteadyTokS, a.Summary.LastThirdTokS, 1e-12) {
		t.Errorf("forced warm-up 16 of 24 = last third: %+v", a.Summary)
	}
	if a.Threads != 4 || !math.IsNaN(a.Summary.CPUOccupancy) {
		t.Errorf("no cpu_ms column: occupancy must stay unknown: %v", a.Summary.CPUOccupancy)
	}
	// A 12-column run: occupancy and faults come out, threads from the trailer.
	csv := "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac\n" +
		"1,3,100,1,90,0,-1,0,0,300,200,1\n2,3,100,1,90,0,-1,0,0,300,200,1\n3,3,100,1,90,0,-1,0,0,300,200,1\n# summary threads=4\n"
	b := runOf(t, "faulty", csv)
	if b.Threads != 4 || !near(b.Summary.CPUOccupancy, 0.5, 1e-12) || b.Summary.MajfltPerToken != 300 {
		t.Errorf("occupancy %v faults %v threads %d", b.Summary.CPUOccupancy, b.Summary.MajfltPerToken, b.Threads)
	}
	if b.Verdict.Regime != RegimeResidency || !strings.Contains(b.Verdict.Reason, "300 major faults/token") {
		t.Errorf("verdict %+v", b.Verdict)
	}
	var buf bytes.Buffer
	if err := Write(&buf, []*Analysis{b}, FormatText); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpu occupancy       0.50  (cpu_ms / (wall_ms × 4 threads))", "major faults/token  300.0", "final hit           — (no expert cache)", "     1      100          90      1           —  10.00"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestClassify(t *testing.T) {
	nan := math.NaN()
	base := metrics.Summary{ComputeHeadMS: 100, ComputeTailMS: 100, FirstHitPct: 50, FinalHitPct: 55, MajfltPerToken: nan}
	tests := []struct {
		name string
		mod  func(*metrics.Summary)
		want Regime
	}{
		{"steady", func(*metrics.Summary) {}, RegimeSteady},
		{"no cache", func(s *metrics.Summary) { s.FirstHitPct, s.FinalHitPct = -1, -1 }, RegimeSteady},
		{"hit climbs", func(s *metrics.Summary) { s.FirstHitPct = 5 }, RegimeIOWarmup},
		{"hit climbs just below", func(s *metrics.Summary) { s.FirstHitPct = 35.5 }, RegimeSteady},
		{"compute collapse", func(s *metrics.Summary) { s.ComputeHeadMS = 300; s.FirstHitPct = 5 }, RegimeResidency},
		{"compute collapse with faults", func(s *metrics.Summary) { s.ComputeHeadMS = 300; s.MajfltPerToken = 40 }, RegimeResidency},
		{"compute collapse, no faults, hit climbs", func(s *metrics.Summary) { s.ComputeHeadMS = 300; s.FirstHitPct = 5; s.MajfltPerToken = 0 }, RegimeIOWarmup},
		{"compute collapse, no faults", func(s *metrics.Summary) { s.ComputeHeadMS = 300; s.MajfltPerToken = 0.2 }, RegimeSteady},
		{"compute 2.9x", func(s *metrics.Summary) { s.ComputeHeadMS = 290 }, RegimeSteady},
		{"faults", func(s *metrics.Summary) { s.MajfltPerToken = 150 }, RegimeResidency},
		{"few faults", func(s *metrics.Summary) { s.MajfltPerToken = 8 }, RegimeSteady},
	}
	for _, tc := range tests {
		s := base
		tc.mod(&s)
		if v := Classify(s); v.Regime != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, v.Regime, v.Reason, tc.want)
		}
	}
}

// TestPlot writes a PNG and an SVG of the reference runs and checks them.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	as := []*Analysis{analyzeFile(t, "qwen_k8", Options{Warmup: -1}), analyzeFile(t, "gptoss_k4", Options{Warmup: -1})}
	pngPath := filepath.Join(dir, "runs.png")
	if err := PlotFile(as, pngPath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", pngPath, err)
	}
	wantW, wantH := int(PlotWidth/vg.Inch*PlotDPI), int(PlotHeight/vg.Inch*PlotDPI)
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH || wantW != 960 || wantH != 720 {
		t.Errorf("PNG is %v, want %dx%d", b, wantW, wantH)
	}
	// The plot is not blank: many distinct colours.
	colours := map[uint32]bool{}
	for y := 0; y < wantH; y += 3 {
		for x := 0; x < wantW; x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("only %d colours: blank plot?", len(colours))
	}
	svgPath := filepath.Join(dir, "runs.svg")
	if err := PlotFile(as[:1], svgPath); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("warm-up end (step 1)")) {
		t.Errorf("SVG lacks <svg or the warm-up label (%d bytes)", len(svg))
	}
	if err := PlotFile(as, filepath.Join(dir, "runs.gif")); !errors.Is(err, ErrPlotFormat) {
		t.Errorf("gif: %v", err)
	}
	if err := PlotFile(nil, pngPath); !errors.Is(err, ErrNoTokens) {
		t.Errorf("no runs: %v", err)
	}
	// --plot naming an input CSV (here through a hard link with a .png
	// name) is refused and leaves it intact.
	in := filepath.Join(dir, "in.csv")
	b, err := os.ReadFile(filepath.Join("testdata", "qwen_k8.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(run, Options{Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	same := filepath.Join(dir, "same.png")
	if err := os.Link(in, same); err != nil {
		t.Fatal(err)
	}
	if err := PlotFile([]*Analysis{a}, same); !errors.Is(err, safefile.ErrSameFile) {
		t.Errorf("--plot on the input: %v", err)
	}
	if got, _ := os.ReadFile(in); !bytes.Equal(got, b) {
		t.Error("--plot on the input changed it")
	}
}

// FuzzRead: arbitrary input never panics, and whatever parses analyses.
func FuzzRead(f *testing.F) {
	f.Add("step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms\n1,1,0,0,0,0,0,0,0\n# summary a=b\n")
	f.Add("step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms,majflt,cpu_ms,resident_frac,x\n1,1,5,1,1,1,1,1,1,1,1,1,1e308\n")
	f.Add("#\n\n,,,\n")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Read(strings.NewReader(s), "fuzz.csv")
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		a, err := Analyze(r, Options{Warmup: -1, Threads: 2})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		for _, f := range []string{FormatText, FormatMarkdown, FormatJSON} {
			if err := Write(&buf, []*Analysis{a, a}, f); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestReadRefusesBinaryAndDisorder: a binary file is named as such and no raw
// control byte reaches the message; steps that do not increase are refused
// with their line.
func TestReadRefusesBinaryAndDisorder(t *testing.T) {
	_, err := Read(strings.NewReader("GGUF\x03\x00\x00\x00\x1b[2J\xff\xfe,step\n"), "model.gguf")
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "binary") {
		t.Fatalf("binary: err = %v", err)
	}
	for _, r := range err.Error() {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			t.Fatalf("raw byte %#x in the message %q", r, err.Error())
		}
	}
	_, err = Read(strings.NewReader("step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms\x1b\n"), "ctl.csv")
	if !errors.Is(err, ErrMalformed) || strings.ContainsRune(err.Error(), 0x1b) {
		t.Fatalf("control byte in a header: err = %q", err)
	}
	head := "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms\n"
	row := func(step int) string { return fmt.Sprintf("%d,3,10,1,9,0,0,0,0\n", step) }
	_, err = Read(strings.NewReader(head+row(1)+row(2)+row(2)), "dup.csv")
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "dup.csv:4") || !strings.Contains(err.Error(), "step 2 after step 2") {
		t.Fatalf("repeated step: err = %v", err)
	}
	if _, err := Read(strings.NewReader(head+row(2)+row(1)), "back.csv"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("decreasing step: err = %v", err)
	}
}

// TestIncompleteRunFlagged: a pipe CSV without its trailer (a killed run) or
// with status other than ok is flagged in the text and JSON reports; a
// complete one and the older trailer-less format are not.
func TestIncompleteRunFlagged(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "pipe_tiny_qwen3moe.csv"))
	if err != nil {
		t.Fatal(err)
	}
	full := string(b)
	noTrailer := full[:strings.Index(full, "# summary")]
	canceled := strings.Replace(full, "status=ok", "status=canceled", 1)
	if canceled == full {
		t.Fatal("the test CSV has no status=ok")
	}
	for _, c := range []struct {
		name, csv, want string
	}{
		{"complete", full, ""},
		{"killed", noTrailer, "no # summary trailer"},
		{"canceled", canceled, "status=canceled"},
	} {
		run, err := Read(strings.NewReader(c.csv), c.name+".csv")
		if err != nil {
			t.Fatal(err)
		}
		why := run.Incomplete()
		if (c.want == "") != (why == "") || !strings.Contains(why, c.want) {
			t.Fatalf("%s: Incomplete() = %q, want %q", c.name, why, c.want)
		}
		a, err := Analyze(run, Options{Warmup: -1})
		if err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"text", "json"} {
			var out bytes.Buffer
			if err := Write(&out, []*Analysis{a}, format); err != nil {
				t.Fatal(err)
			}
			flagged := strings.Contains(out.String(), "INCOMPLETE") || strings.Contains(out.String(), `"incomplete"`)
			if flagged != (c.want != "") {
				t.Fatalf("%s %s: flagged %v:\n%s", c.name, format, flagged, out.String())
			}
		}
	}
	old, err := ReadFile(filepath.Join("testdata", "qwen_k8.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if why := old.Incomplete(); why != "" {
		t.Fatalf("9-column file flagged: %q", why)
	}
}

// TestPipeCSVRecomputed recomputes, with a parser of its own, what the
// report of the pipe-written CSV says: token count, mean tok/s (tokens over
// the summed wall time), final hit % (the last row's running rate) and read
// MiB, so the golden report is not the only check of pipe's 12-column path.
func TestPipeCSVRecomputed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "pipe_tiny_qwen3moe.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var wallMS, readBytes, lastHit float64
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i == 0 || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		num := func(j int) float64 {
			v, err := strconv.ParseFloat(f[j], 64)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			return v
		}
		n++
		wallMS += num(2)
		readBytes += num(5)
		lastHit = num(6)
	}
	s := analyzeFile(t, "pipe_tiny_qwen3moe", Options{Warmup: -1}).Summary
	if s.Tokens != n || n != 40 {
		t.Fatalf("tokens %d, recomputed %d", s.Tokens, n)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"mean tok/s", s.MeanTokS, float64(n) / (wallMS / 1000)},
		{"final hit %", s.FinalHitPct, lastHit},
		{"read MiB", s.ReadMiB, readBytes / (1 << 20)},
	} {
		if math.Abs(c.got-c.want) > 1e-9*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s: report %v, recomputed %v", c.name, c.got, c.want)
		}
	}
}

// TestReadErrorsCutLongValues: an error quotes at most the start of a long
// field, header name or summary field (a 5 MB one printed 5 MB of error),
// and still names the file, the line and the column.
func TestReadErrorsCutLongValues(t *testing.T) {
	const header = "step,steps,wall_ms,io_ms,compute_ms,read_bytes,cache_hit_pct,stall_ms,mgmt_ms"
	long := strings.Repeat("x", 5<<20)
	for name, csv := range map[string]string{
		"field":   header + "\n1,2," + long + ",1,1,1,1,1,1\n",
		"extra":   header + ",extra\n1,2,1,1,1,1,1,1,1," + long + "\n",
		"header":  header + "," + long + "," + long + "\n",
		"summary": header + "\n1,2,1,1,1,1,1,1,1\n# summary " + long + "\n",
		"missing": strings.Replace(header, ",mgmt_ms", ","+long, 1) + "\n",
	} {
		_, err := Read(strings.NewReader(csv), "x.csv")
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if msg := err.Error(); len(msg) > 1000 || !strings.HasPrefix(msg, "x.csv:") {
			t.Errorf("%s: error of %d bytes: %.300s", name, len(msg), msg)
		}
	}
}

// Compare returns the comparison of run b against base for every metric.
func Compare(base, b *Analysis) []Comparison {
	return compare([]*Analysis{base, b}, base, b)
}
