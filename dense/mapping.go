package dense

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pipe-engine/pipe/gguf"
	"github.com/pipe-engine/pipe/internal/anon"
	"github.com/pipe-engine/pipe/internal/safefile"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/reader"
)

// mapping is a read-only whole-file mmap of every shard.
type mapping struct {
	data [][]byte
}

func mapFiles(f *gguf.File) (*mapping, error) {
	m := &mapping{}
	for _, sh := range f.Shards {
		fd, err := safefile.OpenInput(sh.Path)
		if err != nil {
			m.close()
			return nil, err
		}
		st, err := fd.Stat()
		if err != nil {
			fd.Close()
			m.close()
			return nil, err
		}
		var b []byte
		if st.Size() > 0 {
			b, err = unix.Mmap(int(fd.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		}
		fd.Close()
		if err != nil {
			m.close()
			return nil, fmt.Errorf("mmap %s: %w", sh.Path, err)
		}
		m.data = append(m.data, b)
	}
	return m, nil
}

func (m *mapping) close() {
	for _, b := range m.data {
		if b != nil {
			_ = unix.Munmap(b)
		}
	}
	m.data = nil
}

func (m *mapping) slice(shard int, off, n int64) ([]byte, error) {
	if shard < 0 || shard >= len(m.data) || off < 0 || n < 0 || off+n > int64(len(m.data[shard])) {
		return nil, fmt.Errorf("range shard %d [%d,+%d) outside the mapped file", shard, off, n)
	}
	return m.data[shard][off : off+n : off+n], nil
}

// TensorBytes implements model.DenseSource over the mapping.
func (m *mapping) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	return m.slice(ti.Shard, int64(ti.Offset), int64(ti.Size))
}

// touch reads one byte per page of [off, off+n) so the pages are resident.
func touch(b []byte) byte {
	var s byte
	for i := 0; i < len(b); i += 4096 {
		s += b[i]
	}
	if len(b) > 0 {
		s += b[len(b)-1]
	}
	return s
}

// resSlices is how many slices resSampler measures in rotation. A full
// mincore sweep of Qwen3.6-35B-A3B's 1.5 GiB of dense ranges (≈ 400 000
// pages) costs milliseconds, and the sample is taken after every decode
// step, on the token's serial path; one slice a step costs 1/resSlices of
// that.
const resSlices = 16

// resSampler samples the resident fraction of page-aligned spans: its
// first call (and the one after a failed call) runs mincore over every
// page, each later call over one slice of every span's pages (the k-th
// sixteenth of each span, k in rotation), and each returns the fraction
// over the latest count of every slice — every page is re-counted once
// every resSlices calls.
type resSampler struct {
	vec        []byte // mincore's result vector, reused
	res, total [resSlices]int
	next       int  // the slice the next call measures
	full       bool // every slice has a count
}

// sample returns the resident fraction of spans' pages, or -1 when nothing
// could be measured.
func (s *resSampler) sample(spans [][]byte) float64 {
	if s.full {
		if !s.measure(spans, s.next) {
			s.full = false
			return -1
		}
		s.next = (s.next + 1) % resSlices
	} else {
		for k := range resSlices {
			if !s.measure(spans, k) {
				return -1
			}
		}
		s.full, s.next = true, 0
	}
	var res, total int
	for k := range resSlices {
		res += s.res[k]
		total += s.total[k]
	}
	if total == 0 {
		return -1
	}
	return float64(res) / float64(total)
}

// measure counts slice k's resident pages: pages [k·np/resSlices,
// (k+1)·np/resSlices) of each span of np pages.
func (s *resSampler) measure(spans [][]byte, k int) bool {
	page := os.Getpagesize()
	var res, total int
	for _, b := range spans {
		np := (len(b) + page - 1) / page
		lo, hi := k*np/resSlices, (k+1)*np/resSlices
		if hi == lo {
			continue
		}
		if cap(s.vec) < hi-lo {
			s.vec = make([]byte, hi-lo)
		}
		vec := s.vec[:hi-lo]
		if err := mincore(b[lo*page:min(hi*page, len(b))], vec); err != nil {
			return false
		}
		res += residentPages(vec)
		total += hi - lo
	}
	s.res[k], s.total[k] = res, total
	return true
}

// residentPages counts the mincore entries of vec with bit 0 (resident)
// set, eight at a time.
func residentPages(vec []byte) int {
	n, i := 0, 0
	for ; i+8 <= len(vec); i += 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(vec[i:]) & 0x0101010101010101)
	}
	for _, v := range vec[i:] {
		n += int(v & 1)
	}
	return n
}

// pageSpan widens [off, off+n) of a page-aligned base slice to whole pages.
func pageSpan(base []byte, off, n int64) []byte {
	page := int64(os.Getpagesize())
	lo := off &^ (page - 1)
	hi := (off + n + page - 1) &^ (page - 1)
	if hi > int64(len(base)) {
		hi = int64(len(base))
	}
	if lo >= hi {
		return nil
	}
	return base[lo:hi]
}

// anonDense holds the dense ranges in anonymous memory.
type anonDense struct {
	buf    []byte
	ranges []anonRange
}

type anonRange struct {
	shard    int
	off, len int64
	at       int64 // position in buf
}

func (a *anonDense) TensorBytes(ti *gguf.TensorInfo) ([]byte, error) {
	off, n := int64(ti.Offset), int64(ti.Size)
	i := sort.Search(len(a.ranges), func(i int) bool {
		r := a.ranges[i]
		return r.shard > ti.Shard || (r.shard == ti.Shard && r.off+r.len > off)
	})
	if i == len(a.ranges) || a.ranges[i].shard != ti.Shard || a.ranges[i].off > off || off+n > a.ranges[i].off+a.ranges[i].len {
		return nil, fmt.Errorf("tensor %s is not inside a dense range (is it an expert tensor?)", ti.Name)
	}
	r := a.ranges[i]
	p := r.at + off - r.off
	return a.buf[p : p+n : p+n], nil
}

func (a *anonDense) close() error {
	var err error
	if a.buf != nil {
		err = anon.Unmap(a.buf)
		a.buf = nil
	}
	return err
}

// loadAnon reads d's dense ranges with O_DIRECT into one anonymous mapping
// and returns it with the page spans of the ranges; progress (if set) sees
// the bytes read after each range.
func loadAnon(ctx context.Context, d *model.Desc, files *reader.Files, huge bool, progress func(done, total int64)) (*anonDense, [][]byte, error) {
	var total int64
	for _, r := range d.Dense {
		_, l := reader.Widen(r.Off, r.Len)
		total += l
	}
	if total == 0 {
		total = reader.BlockSize
	}
	buf, err := anon.Map(total, huge)
	if err != nil {
		return nil, nil, fmt.Errorf("dense weights: %w", err)
	}
	a := &anonDense{buf: buf}
	var spans [][]byte
	var pos int64
	for _, r := range d.Dense {
		start, l := reader.Widen(r.Off, r.Len)
		rr := []reader.Range{r}
		if err := ctxErr(ctx); err != nil {
			a.close()
			return nil, nil, err
		}
		if _, err := files.ReadRanges(buf[pos:pos+l], rr, "dense weights"); err != nil {
			a.close()
			return nil, nil, err
		}
		a.ranges = append(a.ranges, anonRange{shard: r.Shard, off: r.Off, len: r.Len, at: pos + r.Off - start})
		spans = append(spans, buf[pos:pos+l])
		pos += l
		if progress != nil {
			progress(pos, total)
		}
	}
	return a, spans, nil
}

// ctxErr is ctx.Err() for a context that may be nil.
func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

func mincore(b, vec []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if e != 0 {
		return e
	}
	return nil
}
