// Package dense keeps a model's dense (non-expert) weights where the
// --dense-weights policy says, and serves them to the architecture as a
// model.DenseSource:
//
//   - Anon: the dense byte ranges are read with O_DIRECT (package reader)
//     into one anonymous mapping (package internal/anon, huge pages on
//     request), so memory pressure cannot evict them as clean page-cache
//     pages (the seed note's Regime-2 fix).
//   - Warm: the file is mmap'd and the dense ranges are swept once at load.
//   - Mmap: the file is mmap'd and the dense pages fault in lazily.
//
// Without streaming (--moe-stream=false) the whole file is mmap'd as
// llama.cpp does, whatever the policy (Anon and Warm then only prefault the
// dense ranges), and the engine slices expert bytes from the same mapping
// with Mapped.
//
// ResidentFrac samples mincore over the dense ranges (the CSV's
// resident_frac): every page on its first call, one sixteenth of them in
// rotation on each later call (resSampler).
//
// Ownership and concurrency: Weights owns its mappings until Close; the
// slices it returns stay valid until then and must not be written. After
// Load, every method but Close is safe for concurrent use.
package dense

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
)

// Mode is the --dense-weights policy.
type Mode string

const (
	// Anon reads the dense byte ranges with O_DIRECT into anonymous memory.
	Anon Mode = "anon"
	// Warm mmaps the file and sweeps the dense ranges once at load.
	Warm Mode = "warm"
	// Mmap mmaps the file and lets the dense pages fault in lazily.
	Mmap Mode = "mmap"
)

// ErrMode marks an unknown policy.
var ErrMode = errors.New("dense: unknown --dense-weights policy")

// Check reports whether m is a known policy ("" is Anon).
func (m Mode) Check() error {
	switch m {
	case Anon, Warm, Mmap, "":
		return nil
	}
	return fmt.Errorf("%w %q (want anon, warm or mmap)", ErrMode, string(m))
}

// Options configure Load.
type Options struct {
	Mode Mode // "" is Anon
	// Stream is --moe-stream: false maps the whole file for the experts too.
	Stream bool
	// HugePages asks for transparent huge pages behind Anon's mapping.
	HugePages bool
	// Files read Anon's ranges; required when Stream and Mode is Anon.
	Files *reader.Files
	// Ctx, if set, is checked between dense ranges: a cancelled load stops
	// within one range.
	Ctx context.Context
	// Progress, if set, is called after each dense range is read (Anon) or
	// prefaulted (Warm) with the bytes done so far and the total; the last
	// call has done == total. Mmap calls it never.
	Progress func(done, total int64)
}

// Weights are a model's resident dense weights.
type Weights struct {
	mapped *mapping   // whole-file mmap (non-stream, or Warm/Mmap)
	anon   *anonDense // Anon while streaming
	spans  [][]byte   // page spans of the dense ranges, for mincore
	resMu  sync.Mutex
	res    resSampler // ResidentFrac's counts, under resMu
}

// Load makes d's dense ranges resident by o.
func Load(f *gguf.File, d *model.Desc, o Options) (*Weights, error) {
	if err := o.Mode.Check(); err != nil {
		return nil, err
	}
	w := &Weights{}
	if o.Stream && (o.Mode == Anon || o.Mode == "") {
		if o.Files == nil {
			return nil, errors.New("dense: anon weights need the model's reader files")
		}
		a, spans, err := loadAnon(o.Ctx, d, o.Files, o.HugePages, o.Progress)
		if err != nil {
			return nil, err
		}
		w.anon, w.spans = a, spans
		return w, nil
	}
	m, err := mapFiles(f)
	if err != nil {
		return nil, err
	}
	w.mapped = m
	for _, r := range d.Dense {
		w.spans = append(w.spans, pageSpan(m.data[r.Shard], r.Off, r.Len))
	}
	// Without streaming the mapping is llama.cpp's whole-file mmap; the
	// policy only decides whether the dense ranges are prefaulted.
	if o.Mode == Warm || (!o.Stream && o.Mode != Mmap) {
		var total, done int64
		for _, s := range w.spans {
			total += int64(len(s))
		}
		for _, s := range w.spans {
			if err := ctxErr(o.Ctx); err != nil {
				m.close()
				return nil, err
			}
			touch(s)
			done += int64(len(s))
			if o.Progress != nil {
				o.Progress(done, total)
			}
		}
	}
	return w, nil
}

// TensorBytes implements model.DenseSource.
func (w *Weights) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	if w.anon != nil {
		return w.anon.TensorBytes(ti)
	}
	return w.mapped.TensorBytes(ti)
}

// ErrNotMapped: Mapped on weights that do not map the file.
var ErrNotMapped = errors.New("dense: the file is not mapped")

// Mapped returns n bytes at off of shard from the whole-file mapping.
func (w *Weights) Mapped(shard int, off, n int64) ([]byte, error) {
	if w.mapped == nil {
		return nil, ErrNotMapped
	}
	return w.mapped.slice(shard, off, n)
}

// ResidentFrac samples the resident fraction of the dense ranges' pages, or
// -1 when nothing could be measured: the first call counts every page,
// each later call re-counts one sixteenth of them in rotation and returns
// the fraction over the latest counts (so a page's eviction shows within
// 16 calls, at 1/16 of a full count's cost per call).
func (w *Weights) ResidentFrac() float64 {
	w.resMu.Lock()
	defer w.resMu.Unlock()
	return w.res.sample(w.spans)
}

// Close unmaps everything; slices handed out before are invalid after it.
func (w *Weights) Close() error {
	var err error
	if w.mapped != nil {
		w.mapped.close()
		w.mapped = nil
	}
	if w.anon != nil {
		err = w.anon.close()
		w.anon = nil
	}
	w.spans = nil
	return err
}

var _ model.DenseSource = (*Weights)(nil)
