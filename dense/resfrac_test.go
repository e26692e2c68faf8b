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

// BenchmarkResidentFrac samples 512 MiB of touched anonymous memory (the
// order of Qwen3-30B-A3B's dense weights), as every decode step does.
func BenchmarkResidentFrac(b *testing.B) {
	m, err := unix.Mmap(-1, 0, 512<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(m)
	for i := 0; i < len(m); i += 4096 {
		m[i] = 1
	}
	var vec []byte
	var f float64
	b.ResetTimer()
	for range b.N {
		f, vec = residentFrac([][]byte{m}, vec)
	}
	if f != 1 {
		b.Fatalf("resident fraction %g of touched memory", f)
	}
}
