package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pipe-engine/pipe/kernels"
)

// TestKernelsFlag: --kernels forces a set, named with its source in the
// load event, and the text is the same bits as with the set chosen by
// measurement; an unknown set is an error naming the flag.
func TestKernelsFlag(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // a calibration, where one runs, stays here
	t.Setenv("HOME", t.TempDir())
	base := []string{"--log-format", "json", "run", "-m", tinyModel, "-p", "The quick brown fox", "-n", "6", "--temp", "0"}
	outs := map[string]string{}
	for _, set := range []string{"purego", "auto"} {
		var out bytes.Buffer
		code, stderr := runCode(t, &out, append([]string{"--kernels", set}, base...)...)
		if code != 0 {
			t.Fatalf("--kernels %s: exit %d\n%s", set, code, stderr)
		}
		c := kernels.Chosen()
		want := `"kernels":"` + c.Set + `","kernels_source":"` + c.Source + `"`
		if set == "purego" && (c.Set != "purego" || c.Source != kernels.SourceForced) || !strings.Contains(stderr, want) {
			t.Fatalf("--kernels %s: chosen %+v; load event lacks %s:\n%s", set, c, want, stderr)
		}
		outs[set] = out.String()
	}
	if outs["purego"] != outs["auto"] || outs["auto"] == "" {
		t.Fatalf("text differs by kernel set:\npurego %q\nauto   %q", outs["purego"], outs["auto"])
	}
	code, stderr := runCode(t, nil, append([]string{"--kernels", "avx9"}, base...)...)
	if code == 0 || !strings.Contains(stderr, "--kernels") || !strings.Contains(stderr, "unknown kernel set") {
		t.Fatalf("--kernels avx9: exit %d\n%s", code, stderr)
	}
	noStack(t, stderr)
}
