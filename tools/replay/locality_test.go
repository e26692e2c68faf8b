package replay

import (
	"math"
	"strings"
	"testing"
)

// localityTrace is hand-made: 2 layers, k=2, 4 experts, three decode steps.
const localityTrace = `# route_trace v1
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

// TestLocality: the figures of a hand-computed trace.
func TestLocality(t *testing.T) {
	tr, err := Read(strings.NewReader(localityTrace))
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Locality(PhaseDecode)
	// layer 0: {0,1} {0,2} {3,0}: prev hits 1/2, 1/2; popular set: expert 0 (3×) then 1 (lowest id among the 1× ties) -> {0,1}: 2/2,1/2,1/2
	// layer 1: {2,3} {2,3} {1,0}: prev 2/2, 0/2; popular {2,3}: 1,1,0
	wantPrev := (0.5 + 0.5 + 1 + 0) / 4
	wantPop := (1 + 0.5 + 0.5 + 1 + 1 + 0) / 6
	if s.K != 2 || s.Tokens != 6 || math.Abs(s.PrevHit-wantPrev) > 1e-12 || math.Abs(s.PopularHit-wantPop) > 1e-12 || s.Uniform != 0.5 {
		t.Fatalf("locality %+v, want prev %v pop %v", s, wantPrev, wantPop)
	}
	if got := s.PerLayer[1].Popular; len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("layer 1 popular %v", got)
	}
	if all := tr.Locality(PhaseAll); all.Tokens != 6 || all.PrevHit != s.PrevHit {
		t.Errorf("both phases %+v", all)
	}
	if s := tr.Locality(PhasePrefill); s.Tokens != 0 {
		t.Errorf("prefill locality %+v", s)
	}
}
