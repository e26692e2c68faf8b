package warmstart

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-engine/pipe/internal/safefile"
)

// Version is the version of the hot-set file format.
const Version = 1

// Decay is the weight of the previous runs' popularity when a run's
// counts are added to a loaded hot set (Merge): the last run counts as much
// as all earlier ones together.
const Decay = 0.5

// Hot-set errors.
var (
	// ErrStale: the hot set belongs to another model (size, header
	// hash or shape differ) or another format version.
	ErrStale = errors.New("hot set is stale")
	// ErrCorrupt: the hot set does not parse or fails its checksum.
	ErrCorrupt = errors.New("hot set is corrupt")
	// ErrNotHotSet: Save's path holds a file that is not a hot set (it does
	// not begin with the format's first line), which it never replaces.
	ErrNotHotSet = errors.New("not a hot set")
)

// Key names one expert: its layer and its id within the layer. It has the
// shape of cache.Key, which a caller converts it to (cache.Key(k)).
type Key struct{ Layer, Expert int }

// String renders k as "L<layer>/E<expert>", as cache.Key does.
func (k Key) String() string { return fmt.Sprintf("L%d/E%d", k.Layer, k.Expert) }

// ModelID ties a hot set to a model file: the total size of its shards and
// the SHA-256 of the first shard's header (metadata and tensor infos).
type ModelID struct {
	Size      int64
	HeaderSHA string // lower-case hex
}

func (id ModelID) String() string {
	return fmt.Sprintf("size=%d header_sha256=%s", id.Size, id.HeaderSHA)
}

// HotSet is the per-expert popularity of one model. It is not safe for
// concurrent use.
type HotSet struct {
	Model ModelID
	Pop   [][]float64 // [layer][expert]
}

// NewHotSet returns an empty hot set for a model whose layer i has
// experts[i] experts.
func NewHotSet(id ModelID, experts []int) *HotSet {
	h := &HotSet{Model: id, Pop: make([][]float64, len(experts))}
	for i, n := range experts {
		h.Pop[i] = make([]float64, n)
	}
	return h
}

// Add counts one routing of experts at layer (ids out of range are ignored).
func (h *HotSet) Add(layer int, experts []int) {
	if layer < 0 || layer >= len(h.Pop) {
		return
	}
	row := h.Pop[layer]
	for _, e := range experts {
		if e >= 0 && e < len(row) {
			row[e]++
		}
	}
}

// Clone returns a deep copy of h.
func (h *HotSet) Clone() *HotSet {
	c := &HotSet{Model: h.Model, Pop: make([][]float64, len(h.Pop))}
	for i, row := range h.Pop {
		c.Pop[i] = slices.Clone(row)
	}
	return c
}

// Shape returns the expert count of every layer.
func (h *HotSet) Shape() []int {
	s := make([]int, len(h.Pop))
	for i, row := range h.Pop {
		s[i] = len(row)
	}
	return s
}

// Merge adds Decay × old's popularity to h (same shape required).
func (h *HotSet) Merge(old *HotSet) error {
	if !slices.Equal(h.Shape(), old.Shape()) {
		return fmt.Errorf("%w: shape %v, want %v", ErrStale, old.Shape(), h.Shape())
	}
	for l, row := range old.Pop {
		for e, p := range row {
			h.Pop[l][e] += float64(Decay * p) // rounded apart: no FMA on arm64
		}
	}
	return nil
}

// Empty reports whether no expert has any popularity.
func (h *HotSet) Empty() bool {
	for _, row := range h.Pop {
		for _, p := range row {
			if p > 0 {
				return false
			}
		}
	}
	return true
}

// Hottest returns up to n experts with a positive popularity, hottest first
// (ties: lower layer, then lower expert id).
func (h *HotSet) Hottest(n int) []Key {
	type kp struct {
		k Key
		p float64
	}
	var all []kp
	for l, row := range h.Pop {
		for e, p := range row {
			if p > 0 {
				all = append(all, kp{Key{l, e}, p})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b kp) int { return cmp.Compare(b.p, a.p) })
	out := make([]Key, 0, min(n, len(all)))
	for _, x := range all[:min(n, len(all))] {
		out = append(out, x.k)
	}
	return out
}

// WriteTo writes h in the file format.
func (h *HotSet) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pipe hot set v%d\nmodel %s\nlayers=%d\n", Version, h.Model, len(h.Pop))
	for l, row := range h.Pop {
		fmt.Fprintf(&b, "L %d %d", l, len(row))
		for _, p := range row {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatFloat(p, 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	b.WriteString(crcLine(b.String()))
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

// crcLine is the end line of a hot set whose preceding bytes are body.
func crcLine(body string) string {
	return fmt.Sprintf("end crc32=%08x\n", crc32.ChecksumIEEE([]byte(body)))
}

// Read parses a hot set and checks that it belongs to the model want
// with the given per-layer expert counts.
func Read(r io.Reader, want ModelID, experts []int) (*HotSet, error) {
	data, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, err
	}
	end := bytes.LastIndex(data, []byte("end crc32="))
	if end < 0 || (end > 0 && data[end-1] != '\n') {
		return nil, fmt.Errorf("%w: no end line", ErrCorrupt)
	}
	sum, err := strconv.ParseUint(strings.TrimSpace(string(data[end+len("end crc32="):])), 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE(data[:end]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	sc := bufio.NewScanner(bytes.NewReader(data[:end]))
	sc.Buffer(nil, 1<<20)
	line := func() string {
		if sc.Scan() {
			return sc.Text()
		}
		return ""
	}
	if v := line(); v != fmt.Sprintf("pipe hot set v%d", Version) {
		if strings.HasPrefix(v, "pipe hot set v") {
			return nil, fmt.Errorf("%w: format %q, want v%d", ErrStale, strings.TrimPrefix(v, "pipe hot set "), Version)
		}
		return nil, fmt.Errorf("%w: not a hot set (first line %q)", ErrCorrupt, v)
	}
	if m := line(); m != "model "+want.String() {
		return nil, fmt.Errorf("%w: made for the model %q, this one is %q", ErrStale, strings.TrimPrefix(m, "model "), want.String())
	}
	if l := line(); l != "layers="+strconv.Itoa(len(experts)) {
		return nil, fmt.Errorf("%w: %q, the model has %d layers", ErrStale, l, len(experts))
	}
	h := NewHotSet(want, experts)
	for l, n := range experts {
		f := strings.Fields(line())
		if len(f) < 3 || f[0] != "L" || f[1] != strconv.Itoa(l) {
			return nil, fmt.Errorf("%w: no line for layer %d", ErrCorrupt, l)
		}
		if f[2] != strconv.Itoa(n) {
			return nil, fmt.Errorf("%w: layer %d has %s experts in the hot set, %d in the model", ErrStale, l, f[2], n)
		}
		if len(f) != 3+n {
			return nil, fmt.Errorf("%w: layer %d has %d values, want %d", ErrCorrupt, l, len(f)-3, n)
		}
		for e, s := range f[3:] {
			p, err := strconv.ParseFloat(s, 64)
			if err != nil || !(p >= 0) || p > 1e300 {
				return nil, fmt.Errorf("%w: layer %d expert %d popularity %q", ErrCorrupt, l, e, s)
			}
			h.Pop[l][e] = p
		}
	}
	if rest := line(); rest != "" || sc.Err() != nil {
		return nil, fmt.Errorf("%w: trailing data %q", ErrCorrupt, rest)
	}
	return h, nil
}

// Load reads the hot set at path (see Read). A missing file is
// an error wrapping fs.ErrNotExist.
func Load(path string, want ModelID, experts []int) (*HotSet, error) {
	f, err := safefile.OpenInput(path)
	if err != nil {
		return nil, fmt.Errorf("hot set: %w", err)
	}
	defer f.Close()
	h, err := Read(f, want, experts)
	if err != nil {
		return nil, fmt.Errorf("hot set %s: %w", path, err)
	}
	return h, nil
}

// hotSetMagic begins every hot-set file of every version.
const hotSetMagic = "pipe hot set v"

// CheckReplace reports whether Save may replace path: nothing is there, or
// an empty file, or a regular file that begins like a hot set (of any
// version; stale or corrupt ones included). Anything else — a CSV, notes, a
// model, a FIFO or device — is refused (ErrNotHotSet, or
// safefile.ErrNotRegular), so that a mistyped --hot-set never destroys a
// file.
func CheckReplace(path string) error {
	var guard safefile.Guard
	if err := guard.CheckReplace(path); err != nil {
		return err
	}
	f, err := safefile.OpenInput(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, len(hotSetMagic))
	n, err := io.ReadFull(f, head)
	if n == 0 || string(head) == hotSetMagic {
		return nil
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	return fmt.Errorf("%s: refusing to replace it: %w (it begins %q)", path, ErrNotHotSet, head[:n])
}

// Save writes h to path atomically (a temporary file in the same directory,
// then a rename), creating the directory if needed. It refuses a path that
// exists and is not a regular file (the rename would replace it), is one of
// the protect files (the model, an input) or is not a hot set (CheckReplace).
// Temporaries of earlier saves of path that were killed before their rename
// are removed (removeStaleTemps).
func (h *HotSet) Save(path string, protect ...string) error {
	var guard safefile.Guard
	for _, p := range protect {
		guard.Protect("an input", p)
	}
	if err := guard.CheckReplace(path); err != nil {
		return fmt.Errorf("hot set: %w", err)
	}
	if err := CheckReplace(path); err != nil {
		return fmt.Errorf("hot set: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hot set: %w", err)
	}
	removeStaleTemps(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("hot set: %w", err)
	}
	_, werr := h.WriteTo(tmp)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("hot set %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("hot set %s: %w", path, err)
	}
	return nil
}

// staleTempAge is how old a temporary of Save must be before another Save
// removes it: far longer than writing a hot set takes, so a concurrent save
// by another process is never disturbed.
const staleTempAge = 10 * time.Minute

// removeStaleTemps removes the temporaries Save leaves when it is killed
// between creating and renaming them: files named <path>.tmp<digits>, older
// than staleTempAge, that are empty or begin like a hot set. Errors are
// ignored (the save goes on; the next one tries again).
func removeStaleTemps(path string) {
	prefix := filepath.Base(path) + ".tmp"
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	for _, e := range ents {
		digits, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(filepath.Dir(path), e.Name())
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < staleTempAge {
			continue
		}
		if CheckReplace(p) == nil {
			os.Remove(p)
		}
	}
}
