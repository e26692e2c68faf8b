package dense

import (
	"testing"

	"golang.org/x/sys/unix"
)

// refResidentPages counts the entries with bit 0 set, one at a time.
func refResidentPages(vec []byte) int {
	n := 0
	for _, v := range vec {
		if v&1 != 0 {
			n++
		}
	}
	return n
}

// TestResidentPagesCounts: residentPages counts mincore entries whose bit 0
// is set, whatever the other bits, at lengths around the word size.
func TestResidentPagesCounts(t *testing.T) {
	for n := 0; n < 70; n++ {
		vec := make([]byte, n)
		for i := range vec {
			vec[i] = byte(i*37+n) & 0x87
		}
		if got, want := residentPages(vec), refResidentPages(vec); got != want {
			t.Fatalf("%d entries %v: %d resident, want %d", n, vec, got, want)
		}
	}
}

// TestResidentFracRotates: the first sample counts every page; after the
// pages change, each later sample re-counts one slice, so the fraction
// moves slice by slice and is exact again after resSlices samples.
func TestResidentFracRotates(t *testing.T) {
	page := unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, 64*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skipf("anonymous mmap: %v", err) // the environment, not the code under test
	}
	defer unix.Munmap(m)
	spans := [][]byte{m[:40*page], m[40*page:]} // 40 and 24 pages: every slice non-empty
	var s resSampler
	if f := s.sample(spans); f != 0 {
		t.Fatalf("untouched anonymous pages: fraction %g, want 0", f)
	}
	for i := 0; i < len(m); i += page {
		m[i] = 1
	}
	prev := 0.0
	for k := 1; k <= resSlices; k++ {
		f := s.sample(spans)
		want := 0
		for _, b := range spans {
			np := len(b) / page
			want += k * np / resSlices
		}
		if f != float64(want)/64 || f <= prev {
			t.Fatalf("sample %d after touching every page: fraction %g, want %d/64 (and above %g)", k, f, want, prev)
		}
		prev = f
	}
	if prev != 1 {
		t.Fatalf("after %d samples: fraction %g, want 1", resSlices, prev)
	}
}

// BenchmarkResidentFrac samples 512 MiB of touched anonymous memory (the
// order of Qwen3-30B-A3B's dense weights), as every decode step does: the
// first call counts every page, the measured ones a sixteenth each.
func BenchmarkResidentFrac(b *testing.B) {
	m, err := unix.Mmap(-1, 0, 512<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(m)
	for i := 0; i < len(m); i += 4096 {
		m[i] = 1
	}
	var s resSampler
	spans := [][]byte{m}
	f := s.sample(spans)
	b.ResetTimer()
	for range b.N {
		f = s.sample(spans)
	}
	if f != 1 {
		b.Fatalf("resident fraction %g of touched memory", f)
	}
}
