package gen

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	concpool "github.com/sourcegraph/conc/pool"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/internal/status"
	"github.com/pipe-engine/pipe/quant"
)

// Options describe one model to generate.
type Options struct {
	Preset      string  // preset name (see Presets)
	Quant       string  // file type ("Q4_K_M", "Q8_0", "MXFP4", "F32", …); "" = the preset's default
	Seed        uint64  // weight seed
	Layers      int     // >0: keep only the first Layers blocks
	VocabPath   string  // GGUF whose tokenizer.* keys are copied; "" = built-in byte-level BPE
	VocabSize   int     // >0: size of the built-in vocabulary (default: the preset's real size)
	RoutingSkew float64 // popularity skew (DefaultRoutingSkew is the calibrated default; 0 = uniform)
	Workers     int     // generator goroutines; 0 = GOMAXPROCS

	// Status, if not nil, shows a progress bar (a terminal's status line);
	// else Progress, if not nil, receives a plain line every 10 %.
	Status   *status.Line
	Progress io.Writer
}

// Model is everything needed to write a file: the plan, the tokenizer and the
// metadata.
type Model struct {
	Options Options
	Plan    *Plan
	Vocab   *Vocab
	KV      []gguf.KV
}

// MaxVocab bounds --vocab-size: four times the largest real vocabulary
// (Gemma's 262144), far below what would exhaust memory.
const MaxVocab = 1 << 20

// Prepare resolves options into a Model without generating any weight.
func Prepare(o Options) (*Model, error) {
	p, err := LookupPreset(o.Preset)
	if err != nil {
		return nil, err
	}
	if o.Layers < 0 || o.VocabSize < 0 || o.Workers < 0 {
		return nil, fmt.Errorf("%w: negative --layers, vocabulary size or workers", ErrBadOptions)
	}
	if o.VocabSize > MaxVocab {
		return nil, fmt.Errorf("%w: --vocab-size %d: at most %d (real vocabularies have up to 262144 tokens)", ErrBadOptions, o.VocabSize, MaxVocab)
	}
	if o.Layers > 0 {
		if o.Layers > p.NLayer {
			return nil, fmt.Errorf("%w: --layers %d exceeds preset %s's %d layers", ErrBadOptions, o.Layers, p.Name, p.NLayer)
		}
		p.NLayer = o.Layers
	}
	if math.IsNaN(o.RoutingSkew) || math.IsInf(o.RoutingSkew, 0) || o.RoutingSkew < 0 {
		return nil, fmt.Errorf("%w: --routing-skew %v must be a finite value >= 0", ErrBadOptions, o.RoutingSkew)
	}
	q := o.Quant
	if q == "" {
		q = p.DefaultQuant
	}
	ft, err := ParseFileType(q)
	if err != nil {
		return nil, err
	}
	if o.VocabPath != "" && o.VocabSize > 0 {
		return nil, fmt.Errorf("%w: --vocab and --vocab-size exclude each other (the vocab file sets the size)", ErrBadOptions)
	}
	var v *Vocab
	if o.VocabPath != "" {
		if v, err = LoadVocab(o.VocabPath); err != nil {
			return nil, err
		}
	} else {
		size := p.Vocab
		if o.VocabSize > 0 {
			size = o.VocabSize
		}
		if v, err = BuiltinVocabSpec(presetVocabSpec(&p), size); err != nil {
			return nil, err
		}
	}
	pl, err := NewPlan(p, ft, v.Size)
	if err != nil {
		return nil, err
	}
	kv, err := Metadata(pl, v, &o)
	if err != nil {
		return nil, err
	}
	return &Model{Options: o, Plan: pl, Vocab: v, KV: kv}, nil
}

// Result summarises a generation.
type Result struct {
	Model   *Model
	Bytes   int64 // bytes written
	Elapsed time.Duration
}

// GenerateFile writes the model to path atomically: it writes path's
// directory/.name.tmp-*, syncs it and renames it over path. It refuses a path
// that exists and is not a regular file (a device, a FIFO, a directory, a
// symbolic link: the rename would replace it) or is the --vocab input,
// before writing and again before the rename. It writes with
// O_DIRECT where the file system allows, so generating an 18 GB model neither
// waits on page-cache write-back nor pushes everything else out of RAM.
func GenerateFile(ctx context.Context, o Options, path string) (*Result, error) {
	m, err := Prepare(o)
	if err != nil {
		return nil, err
	}
	var guard safefile.Guard
	if o.VocabPath != "" {
		guard.Protect("--vocab", o.VocabPath)
	}
	if err := guard.CheckReplace(path); err != nil {
		return nil, fmt.Errorf("gen: --out: %w", err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("gen: --out %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("gen: chmod %s: %w", tmp, err)
	}
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	sink := newFileSink(f)
	res, err := m.Write(ctx, sink)
	if cerr := sink.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("gen: close %s: %w", tmp, err)
	}
	if err := guard.CheckReplace(path); err != nil {
		return nil, fmt.Errorf("gen: --out: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("gen: rename to %s: %w", path, err)
	}
	ok = true
	return res, nil
}

type tensorData struct {
	name string
	data []byte
	err  error
}

// Write streams the model to out.
func (m *Model) Write(ctx context.Context, out io.Writer) (*Result, error) {
	start := time.Now()
	workers := m.Options.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	pl := m.Plan
	pools, err := buildPools(ctx, m.Options.Seed, pl, workers)
	if err != nil {
		return nil, err
	}
	prog := newProgress(m.Options.Status, m.Options.Progress, int64(pl.TotalBytes()), pl.Preset.Name)
	cw := &countWriter{w: out, prog: prog}
	w := gguf.NewWriter(cw)
	for _, kv := range m.KV {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	for i := range pl.Tensors {
		t := &pl.Tensors[i]
		if err := w.AddTensor(t.Name, t.Type, t.Dims); err != nil {
			return nil, err
		}
	}
	if err := w.WriteHeader(); err != nil {
		return nil, err
	}

	// One goroutine produces tensors in order (each one in parallel chunks)
	// while this one writes the previous: at most two tensors in memory.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan tensorData, 1)
	free := make(chan []byte, 2) // recycled tensor buffers: no page faults on fresh memory per tensor
	free <- nil
	free <- nil
	go func() {
		defer close(ch)
		for i := range pl.Tensors {
			t := &pl.Tensors[i]
			var buf []byte
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			data, err := m.tensorBytes(ctx, t, pools, workers, buf)
			select {
			case ch <- tensorData{t.Name, data, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for td := range ch {
		if td.err != nil {
			return nil, td.err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := w.WriteTensor(td.name, td.data); err != nil {
			return nil, err
		}
		free <- td.data
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	prog.finish()
	return &Result{Model: m, Bytes: cw.n, Elapsed: time.Since(start)}, nil
}

// tensorBytes generates one tensor's data.
// buf is reused when its capacity suffices.
func (m *Model) tensorBytes(ctx context.Context, t *TensorSpec, pools map[poolKey]*pool, workers int, buf []byte) ([]byte, error) {
	p := &m.Plan.Preset
	ne0 := int(t.Dims[0])
	rowBytes64, err := t.Type.RowSize(int64(ne0))
	if err != nil {
		return nil, fmt.Errorf("gen: %s: %w", t.Name, err)
	}
	rowBytes := int(rowBytes64)
	rows := int(t.Rows())
	size := rows * rowBytes
	data := buf[:0]
	if cap(data) < size {
		data = make([]byte, size)
	}
	data = data[:size]
	g := newWeightGen(p, t, m.Options.Seed, m.Options.RoutingSkew)

	// a zero row, as the quantizer writes it
	zero := make([]byte, rowBytes)
	if err := encodeRow(t.Type, make([]float32, ne0), zero); err != nil {
		return nil, fmt.Errorf("gen: %s: %w", t.Name, err)
	}

	var normal, last *pool
	usePool := pooled(t)
	if usePool {
		std := stdOf(p, t)
		normal = pools[poolKey{typ: t.Type, std: std, kind: kindNormal}]
		last = normal
		if k := lastBlockKind(p, t); k != kindNormal {
			last = pools[poolKey{typ: t.Type, std: std, kind: k, anchors: anchorDims(p)}]
		}
		if normal == nil || last == nil {
			return nil, fmt.Errorf("gen: %s: missing block pool (internal error)", t.Name)
		}
	}
	nBlocks := ne0 / t.Type.BlockSize()
	blockBytes := t.Type.TypeSize()

	chunkRows := max(1, (1<<20)/rowBytes)
	nChunks := (rows + chunkRows - 1) / chunkRows
	eg := concpool.New().WithMaxGoroutines(max(workers, 1)).WithContext(ctx).WithCancelOnError().WithFirstError()
	for c := 0; c < nChunks; c++ {
		eg.Go(func(ctx context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rg := newRNG(m.Options.Seed, t.Name, uint64(c))
			floats := make([]float32, ne0)
			for r := c * chunkRows; r < min(rows, (c+1)*chunkRows); r++ {
				dst := data[r*rowBytes : (r+1)*rowBytes]
				if g.zeroRow(uint64(r)) && !g.special(uint64(r)) {
					copy(dst, zero)
					continue
				}
				if usePool && !g.special(uint64(r)) {
					for b := 0; b < nBlocks; b++ {
						pl := normal
						if b == nBlocks-1 {
							pl = last
						}
						copy(dst[b*blockBytes:(b+1)*blockBytes], pl.block(rg.intn(poolBlocks)))
					}
					continue
				}
				g.row(uint64(r), rg, floats)
				if err := encodeRow(t.Type, floats, dst); err != nil {
					return fmt.Errorf("gen: %s: %w", t.Name, err)
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return data, nil
}

// encodeRow stores floats as type t.
func encodeRow(t quant.Type, src []float32, dst []byte) error {
	switch t {
	case quant.F32:
		for i, x := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
		}
		return nil
	case quant.F16:
		for i, x := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], quant.FP32ToFP16(x))
		}
		return nil
	case quant.BF16:
		for i, x := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], quant.FP32ToBF16(x))
		}
		return nil
	case quant.I32: // integer values (RoleExpertIDs)
		for i, x := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(int32(x)))
		}
		return nil
	}
	return quant.Quantize(t, src, dst)
}

type countWriter struct {
	w    io.Writer
	n    int64
	prog *progress
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.prog.set(c.n)
	return n, err
}
