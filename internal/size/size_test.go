package size

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	sizes := map[string]int64{"8G": 8 << 30, "512M": 512 << 20, "1.5GiB": 3 << 29, "4096": 4096, "2k": 2048, " 1T ": 1 << 40}
	for s, want := range sizes {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "G", "-1G", "0", "8X", "abc", "8E"} {
		if _, err := Parse(s); !errors.Is(err, ErrSize) {
			t.Errorf("Parse(%q): %v, want ErrSize", s, err)
		}
	}
}

func TestParseMiB(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512 << 20, "6G": 6 << 30, "512M": 512 << 20, "1.5G": 3 << 29, "64MiB": 64 << 20} {
		if got, err := ParseMiB(in); err != nil || got != want {
			t.Errorf("ParseMiB(%q) = %d (%v), want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "lots", "", "6X", "8796093022209"} {
		if _, err := ParseMiB(in); !errors.Is(err, ErrSize) {
			t.Errorf("ParseMiB(%q): %v, want ErrSize", in, err)
		}
	}
}
