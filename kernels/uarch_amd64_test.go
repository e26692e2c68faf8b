//go:build amd64 && !purego

package kernels

import "testing"

func TestDecodeUarch(t *testing.T) {
	for _, c := range []struct {
		vendor string
		eax    uint32
		family uint32
		model  uint32
		name   string
		vnni   bool
	}{
		{"AuthenticAMD", 0x00b00f21, 0x1a, 0x02, "zen5", true}, // EPYC Turin
		{"AuthenticAMD", 0x00a10f11, 0x19, 0x11, "zen4", true}, // EPYC Genoa
		{"AuthenticAMD", 0x00a60f12, 0x19, 0x61, "zen4", true}, // Ryzen 7000
		{"AuthenticAMD", 0x00a20f12, 0x19, 0x21, "", false},    // Ryzen 5000 (Zen 3)
		{"GenuineIntel", 0x000806f8, 0x06, 0x8f, "", false},    // Sapphire Rapids
		{"GenuineIntel", 0x00050657, 0x06, 0x55, "", false},    // Cascade Lake
		{"HygonGenuine", 0x00900f22, 0x18, 0x02, "", false},
	} {
		u := decodeUarch(c.vendor, c.eax)
		if u.family != c.family || u.model != c.model {
			t.Errorf("%s %#x: family %#x model %#x, want %#x %#x", c.vendor, c.eax, u.family, u.model, c.family, c.model)
		}
		if u.name() != c.name || preferVNNI512Dots(u) != c.vnni {
			t.Errorf("%s %#x: %q prefer %v, want %q %v", c.vendor, c.eax, u.name(), preferVNNI512Dots(u), c.name, c.vnni)
		}
	}
}

// TestBestImplFollowsTable: the set in use is the one the table names for
// this CPU, wherever that set can run.
func TestBestImplFollowsTable(t *testing.T) {
	u := cpuUarch()
	want := "avx2"
	if hasVNNI && preferVNNI512Dots(u) {
		want = "avx512vnni"
	}
	if !hasAVX2 {
		want = "purego"
	}
	if got := Implementation(); got != want {
		t.Fatalf("CPU %s family %#x model %#x: kernel set %q, want %q", u.vendor, u.family, u.model, got, want)
	}
	t.Logf("CPU %s family %#x model %#x (%s): %s", u.vendor, u.family, u.model, u.name(), Implementation())
}
