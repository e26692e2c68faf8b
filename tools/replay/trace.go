// Package replay reads and writes expert-routing traces (the route_trace v1
// format of BigMoeOnEdge's --route-trace) and replays them offline through
// the cache package's replacement policies, so that a policy proven here runs
// unchanged in the engine.
//
// A trace is comment lines (`# route_trace v1`, `# model=… arch=… n_layer=…
// n_expert=… n_expert_used=…`, one `# layer=L expert_bytes=B dense_bytes=D`
// per layer) followed by a CSV with the header
// `turn,phase,step,layer,slot,expert,weight,residency,expert_bytes` and one row
// per routed (token, layer, slot). Phase 0 is prefill, 1 is decode.
//
// Replay semantics (they match the field's published curves): decode is one
// lookup batch per (token, layer); prefill is one batch per layer holding all
// prompt tokens' experts, token-major; inside a batch each distinct expert is
// looked up once (repeats only refresh it); a miss makes the expert resident
// at its layer's expert_bytes; eviction runs after the batch and never evicts
// an entry the batch touched, so the cache may exceed its budget inside a
// batch. Hit % is reported over decode lookups (or all lookups with
// CountAll).
//
// WarmStart (warm.go) replays the engine's warm start: the hot set of a
// trace's first half fills the cache of a new process replaying the second
// half, compared with a cold and a continued cache.
//
// Readers and writers are not safe for concurrent use; a *Trace is immutable
// after Read returns and may be replayed from several goroutines, each with
// its own Policy.
package replay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by every error about a trace that does not follow
// route_trace v1; the message names the line.
var ErrMalformed = errors.New("replay: malformed route trace")

// Magic is the first line of every route_trace v1 file.
const Magic = "# route_trace v1"

// Columns is the CSV header of route_trace v1.
const Columns = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes"

// Limits on what a trace may declare (far above every real model; they keep
// a hostile file from making the replay allocate without bound).
const (
	MaxLayers      = 1024
	MaxExperts     = 16384
	MaxExpertBytes = 1 << 36
)

// Phase of a row.
const (
	PhasePrefill = 0
	PhaseDecode  = 1
)

// LayerInfo is one `# layer=` line: the bytes of one routed expert of the
// layer and of the layer's dense weights.
type LayerInfo struct {
	ExpertBytes int64
	DenseBytes  int64
}

// Header is the comment preamble of a trace.
type Header struct {
	Model       string
	Arch        string
	NLayer      int
	NExpert     int
	NExpertUsed int
	Layers      []LayerInfo // len NLayer
}

// WorkingSet is the one-token working set T: Σ over layers of
// n_expert_used × expert_bytes.
func (h *Header) WorkingSet() int64 {
	var t int64
	for _, l := range h.Layers {
		t += int64(h.NExpertUsed) * l.ExpertBytes
	}
	return t
}

// Row is one routed (token, layer, slot).
type Row struct {
	Turn, Phase, Step, Layer, Slot, Expert int
	Weight                                 float32
	Resident                               bool  // engine-specific, informational
	ExpertBytes                            int64 // bytes the recording engine read for this row
}

// Trace is a whole parsed trace.
type Trace struct {
	Header Header
	Rows   []Row
}

// Read parses a complete route_trace v1 stream.
func Read(r io.Reader) (*Trace, error) {
	tr := NewReader(r)
	hdr, err := tr.Header()
	if err != nil {
		return nil, err
	}
	t := &Trace{Header: *hdr}
	for {
		row, err := tr.Next()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		t.Rows = append(t.Rows, row)
	}
}

// Reader streams a route_trace v1 file row by row.
type Reader struct {
	sc      *bufio.Scanner
	line    int
	hdr     *Header
	hdrErr  error
	pending string // first non-comment line, read while parsing the header
	hasPend bool
	fields  []string
}

// NewReader returns a Reader over r. Nothing is read until Header or Next.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	return &Reader{sc: sc}
}

func (r *Reader) errf(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrMalformed, r.line, fmt.Sprintf(format, args...))
}

func (r *Reader) scan() (string, bool, error) {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return "", false, fmt.Errorf("replay: line %d: %w", r.line+1, err)
		}
		return "", false, nil
	}
	r.line++
	return strings.TrimRight(r.sc.Text(), "\r"), true, nil
}

// Header parses (once) and returns the comment preamble and the CSV header line.
func (r *Reader) Header() (*Header, error) {
	if r.hdr != nil || r.hdrErr != nil {
		return r.hdr, r.hdrErr
	}
	r.hdr, r.hdrErr = r.readHeader()
	if r.hdrErr != nil {
		r.hdr = nil
	}
	return r.hdr, r.hdrErr
}

func (r *Reader) readHeader() (*Header, error) {
	s, ok, err := r.scan()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: empty input (want %q)", ErrMalformed, Magic)
	}
	if strings.TrimSpace(s) != Magic {
		return nil, r.errf("want %q, got %q", Magic, clip(s))
	}
	h := &Header{NLayer: -1, NExpert: -1, NExpertUsed: -1}
	var layers []LayerInfo
	seen := map[int]bool{}
	for {
		s, ok, err = r.scan()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: line %d: end of input before the CSV header %q", ErrMalformed, r.line, Columns)
		}
		if !strings.HasPrefix(s, "#") {
			break
		}
		kv := parseKV(strings.TrimSpace(strings.TrimPrefix(s, "#")))
		if _, ok := kv["layer"]; ok {
			l, err := r.intField(kv, "layer", 0)
			if err != nil {
				return nil, err
			}
			eb, err := r.intField(kv, "expert_bytes", 0)
			if err != nil {
				return nil, err
			}
			if int64(eb) > MaxExpertBytes {
				return nil, r.errf("expert_bytes=%d: more than %d", eb, int64(MaxExpertBytes))
			}
			var db int
			if _, ok := kv["dense_bytes"]; ok {
				if db, err = r.intField(kv, "dense_bytes", 0); err != nil {
					return nil, err
				}
			}
			if l >= MaxLayers {
				return nil, r.errf("layer=%d: more than %d layers", l, MaxLayers)
			}
			if seen[l] {
				return nil, r.errf("layer %d described twice", l)
			}
			seen[l] = true
			for len(layers) <= l {
				layers = append(layers, LayerInfo{ExpertBytes: -1})
			}
			layers[l] = LayerInfo{ExpertBytes: int64(eb), DenseBytes: int64(db)}
			continue
		}
		if _, ok := kv["n_layer"]; ok {
			h.Model, h.Arch = kv["model"], kv["arch"]
			if h.NLayer, err = r.intField(kv, "n_layer", 1); err != nil {
				return nil, err
			}
			if h.NExpert, err = r.intField(kv, "n_expert", 1); err != nil {
				return nil, err
			}
			if h.NExpertUsed, err = r.intField(kv, "n_expert_used", 1); err != nil {
				return nil, err
			}
			if h.NExpertUsed > h.NExpert {
				return nil, r.errf("n_expert_used=%d > n_expert=%d", h.NExpertUsed, h.NExpert)
			}
			if h.NLayer > MaxLayers || h.NExpert > MaxExperts {
				return nil, r.errf("n_layer=%d n_expert=%d: more than %d layers or %d experts", h.NLayer, h.NExpert, MaxLayers, MaxExperts)
			}
		}
		// Other comments are free text.
	}
	if h.NLayer < 0 {
		return nil, r.errf("no `# model=… n_layer=… n_expert=… n_expert_used=…` line before the CSV")
	}
	if len(layers) != h.NLayer {
		return nil, r.errf("%d `# layer=` lines, want n_layer=%d", len(layers), h.NLayer)
	}
	for l, li := range layers {
		if li.ExpertBytes < 0 {
			return nil, r.errf("no `# layer=%d` line", l)
		}
	}
	h.Layers = layers
	if strings.ReplaceAll(strings.TrimSpace(s), " ", "") != Columns {
		return nil, r.errf("CSV header %q, want %q", clip(s), Columns)
	}
	return h, nil
}

// parseKV splits "a=1 b=x y c=2" into a map; a word without '=' continues the
// previous value (model paths may contain spaces).
func parseKV(s string) map[string]string {
	m := map[string]string{}
	last := ""
	for _, w := range strings.Fields(s) {
		if k, v, ok := strings.Cut(w, "="); ok && k != "" {
			m[k] = v
			last = k
		} else if last != "" {
			m[last] += " " + w
		}
	}
	return m
}

func (r *Reader) intField(kv map[string]string, key string, min int) (int, error) {
	v, ok := kv[key]
	if !ok {
		return 0, r.errf("missing %s=", key)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min {
		return 0, r.errf("%s=%q: want an integer ≥ %d", key, v, min)
	}
	return n, nil
}

// Next returns the next row, or io.EOF after the last one.
func (r *Reader) Next() (Row, error) {
	h, err := r.Header()
	if err != nil {
		return Row{}, err
	}
	var s string
	for {
		var ok bool
		s, ok, err = r.scan()
		if err != nil {
			return Row{}, err
		}
		if !ok {
			return Row{}, io.EOF
		}
		if strings.TrimSpace(s) != "" && !strings.HasPrefix(s, "#") {
			break
		}
	}
	r.fields = splitComma(r.fields[:0], s)
	f := r.fields
	if len(f) != 9 {
		return Row{}, r.errf("%d fields, want 9 (%s)", len(f), Columns)
	}
	var row Row
	ints := [...]struct {
		name string
		dst  *int
		max  int
	}{
		{"turn", &row.Turn, -1}, {"phase", &row.Phase, 1}, {"step", &row.Step, -1},
		{"layer", &row.Layer, h.NLayer - 1}, {"slot", &row.Slot, h.NExpert - 1}, {"expert", &row.Expert, h.NExpert - 1},
	}
	for i, c := range ints {
		n, err := strconv.Atoi(strings.TrimSpace(f[i]))
		if err != nil || n < 0 || (c.max >= 0 && n > c.max) {
			if c.max >= 0 {
				return Row{}, r.errf("%s=%q: want an integer in [0, %d]", c.name, f[i], c.max)
			}
			return Row{}, r.errf("%s=%q: want a non-negative integer", c.name, f[i])
		}
		*c.dst = n
	}
	w, err := strconv.ParseFloat(strings.TrimSpace(f[6]), 32)
	if err != nil {
		return Row{}, r.errf("weight=%q: want a number", f[6])
	}
	row.Weight = float32(w)
	switch strings.TrimSpace(f[7]) {
	case "0":
	case "1":
		row.Resident = true
	default:
		return Row{}, r.errf("residency=%q: want 0 or 1", f[7])
	}
	eb, err := strconv.ParseInt(strings.TrimSpace(f[8]), 10, 64)
	if err != nil || eb < 0 {
		return Row{}, r.errf("expert_bytes=%q: want a non-negative integer", f[8])
	}
	row.ExpertBytes = eb
	return row, nil
}

func splitComma(dst []string, s string) []string {
	for {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return append(dst, s)
		}
		dst = append(dst, s[:i])
		s = s[i+1:]
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
