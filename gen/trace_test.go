package gen

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A hand-made trace: 2 layers, k=2, 4 experts, three decode steps.
const smallTrace = `# route_trace v1
# model=x.gguf arch=qwen3moe n_layer=2 n_expert=4 n_expert_used=2
# layer=0 expert_bytes=10 dense_bytes=5
# layer=1 expert_bytes=10 dense_bytes=5
turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
0,1,0,0,0,0,0.5,0,10
0,1,0,0,1,1,0.5,0,10
0,1,0,1,0,2,0.5,0,10
0,1,0,1,1,3,0.5,0,10
0,1,1,0,0,0,0.5,0,10
0,1,1,0,1,2,0.5,0,10
0,1,1,1,0,2,0.5,0,10
0,1,1,1,1,3,0.5,0,10
0,1,2,0,0,3,0.5,0,10
0,1,2,0,1,0,0.5,0,10
0,1,2,1,0,1,0.5,0,10
0,1,2,1,1,0,0.5,0,10
`

func TestRouteStats(t *testing.T) {
	tr, err := ReadRouteTrace(strings.NewReader(smallTrace))
	if err != nil {
		t.Fatal(err)
	}
	if tr.NLayer != 2 || tr.NExpert != 4 || len(tr.Layers) != 2 || len(tr.Steps) != 6 {
		t.Fatalf("parsed %+v", tr)
	}
	s := tr.Stats(PhaseDecode)
	// layer 0: {0,1} {0,2} {3,0}: prev hits 1/2, 1/2; popular set: expert 0 (3×) then 1 (lowest id among the 1× ties) -> {0,1}: 2/2,1/2,1/2
	// layer 1: {2,3} {2,3} {1,0}: prev 2/2, 0/2; popular {2,3}: 1,1,0
	wantPrev := (0.5 + 0.5 + 1 + 0) / 4
	wantPop := (1 + 0.5 + 0.5 + 1 + 1 + 0) / 6
	if s.K != 2 || s.Tokens != 6 || math.Abs(s.PrevHit-wantPrev) > 1e-12 || math.Abs(s.PopularHit-wantPop) > 1e-12 || s.Uniform != 0.5 {
		t.Fatalf("stats %+v, want prev %v pop %v", s, wantPrev, wantPop)
	}
	if got := s.PerLayer[1].Popular; len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("layer 1 popular %v", got)
	}
	// write and read back
	var b bytes.Buffer
	if err := WriteRouteTrace(&b, tr); err != nil {
		t.Fatal(err)
	}
	tr2, err := ReadRouteTrace(&b)
	if err != nil {
		t.Fatal(err)
	}
	if s2 := tr2.Stats(PhaseDecode); s2.PrevHit != s.PrevHit || s2.PopularHit != s.PopularHit {
		t.Errorf("round trip changed stats: %+v", s2)
	}
	if s := tr.Stats(PhasePrefill); s.Tokens != 0 {
		t.Errorf("prefill stats %+v", s)
	}
}

func TestRouteTraceErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"turn,phase\n",
		"# route_trace v2\n",
		"# route_trace v1\nturn,phase,step,layer,slot\n",
		"# route_trace v1\nturn,phase,step,layer,slot,expert\n0,1,0,0,0,x\n",
		"# route_trace v1\n# model=m arch=a n_layer=1 n_expert=4 n_expert_used=1\nturn,phase,step,layer,slot,expert\n0,1,0,0,0,9\n",
		"# route_trace v1\n# layer=0 expert_bytes=x dense_bytes=1\n",
	} {
		if _, err := ReadRouteTrace(strings.NewReader(in)); !errors.Is(err, ErrTrace) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func TestEnsureDemo(t *testing.T) {
	dir := t.TempDir()
	o := Options{Preset: "qwen3-tiny", Seed: 1, RoutingSkew: DefaultRoutingSkew}
	p1, err := ensureDemo(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(p1)
	if err != nil || st1.Size() == 0 {
		t.Fatalf("demo model: %v", err)
	}
	p2, err := ensureDemo(context.Background(), dir, o)
	if err != nil || p2 != p1 {
		t.Fatalf("second call: %s, %v", p2, err)
	}
	if st2, _ := os.Stat(p2); !st2.ModTime().Equal(st1.ModTime()) {
		t.Error("second call regenerated the model")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
	// the real demo options describe the documented model
	m, err := Prepare(DemoOptions())
	if err != nil {
		t.Fatal(err)
	}
	if mb := m.Plan.TotalBytes() >> 20; m.Plan.Preset.NLayer != DemoLayers || mb < 300 || mb > 1000 {
		t.Errorf("demo model: %d layers, %d MiB", m.Plan.Preset.NLayer, mb)
	}
	// a cancelled generation leaves nothing behind
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir2 := t.TempDir()
	if _, err := ensureDemo(ctx, dir2, o); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if m, _ := os.ReadDir(dir2); len(m) > 0 {
		t.Errorf("cancelled generation left %v", m)
	}
}

// FuzzReadRouteTrace: arbitrary input never panics, and a parsed trace
// survives a write/read round trip with the same statistics.
func FuzzReadRouteTrace(f *testing.F) {
	f.Add(smallTrace)
	f.Add("# route_trace v1\nturn,phase,step,layer,slot,expert\n0,1,0,0,3,1\n")
	f.Add("# route_trace v1\n# model=m arch=a n_layer=1 n_expert=2 n_expert_used=1\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadRouteTrace(strings.NewReader(in))
		if err != nil {
			return
		}
		s := tr.Stats(PhaseAll)
		var b bytes.Buffer
		if err := WriteRouteTrace(&b, tr); err != nil {
			t.Fatal(err)
		}
		tr2, err := ReadRouteTrace(&b)
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, b.String())
		}
		if s2 := tr2.Stats(PhaseAll); s2.K != s.K || s2.Tokens != s.Tokens || math.Abs(s2.PrevHit-s.PrevHit) > 1e-9 || math.Abs(s2.PopularHit-s.PopularHit) > 1e-9 {
			t.Fatalf("stats changed: %+v vs %+v", s, s2)
		}
	})
}
