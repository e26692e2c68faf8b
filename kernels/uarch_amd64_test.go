//go:build amd64 && !purego

package kernels

import "testing"

func TestDecodeUarch(t *testing.T) {
	for _, c := range []struct {
		vendor string
		eax    uint32
		family uint32
		model  uint32
		key    string
	}{
		{"AuthenticAMD", 0x00b00f21, 0x1a, 0x02, "amd64-AuthenticAMD-1a-02"}, // EPYC Turin (Zen 5)
		{"AuthenticAMD", 0x00a10f11, 0x19, 0x11, "amd64-AuthenticAMD-19-11"}, // EPYC Genoa (Zen 4)
		{"AuthenticAMD", 0x00a20f12, 0x19, 0x21, "amd64-AuthenticAMD-19-21"}, // Ryzen 5000 (Zen 3)
		{"GenuineIntel", 0x000806f8, 0x06, 0x8f, "amd64-GenuineIntel-06-8f"}, // Sapphire Rapids
		{"GenuineIntel", 0x00050657, 0x06, 0x55, "amd64-GenuineIntel-06-55"}, // Cascade Lake
		{"Hygon/Genu\x00e", 0x00900f22, 0x18, 0x02, "amd64-Hygon_Genu_e-18-02"},
	} {
		u := decodeUarch(c.vendor, c.eax)
		if u.family != c.family || u.model != c.model || u.key() != c.key {
			t.Errorf("%s %#x: family %#x model %#x key %q, want %#x %#x %q", c.vendor, c.eax, u.family, u.model, u.key(), c.family, c.model, c.key)
		}
	}
}

// TestBestImplFollowsTable: the set at init is the one the measured table
// names for this CPU where this build has it (not under noavx512 for an
// AVX-512 set), else the first usable one.
func TestBestImplFollowsTable(t *testing.T) {
	want := usableImpls()[0].name
	if e, ok := tableEntry(CPUKey()); ok {
		for _, m := range nativeImpls() {
			if m.name == e.Set {
				want = e.Set
			}
		}
	}
	if got := Implementation(); got != want {
		t.Fatalf("CPU %s: kernel set %q, want %q", CPUKey(), got, want)
	}
	t.Logf("CPU %s: %s (%s)", CPUKey(), Implementation(), Chosen().Source)
}
