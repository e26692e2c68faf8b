package decode

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/stages"
)

// TestProgress: Options.Progress sees the dense weights' load in bytes and
// each prompt pass layer by layer, never going back, each phase ending at
// Done == Total; a second prompt (a chat turn) reports its own pass.
func TestProgress(t *testing.T) {
	for _, mode := range []stages.StreamMode{stages.StreamOn, stages.StreamOff} {
		t.Run(string(mode), func(t *testing.T) {
			var got []Progress
			m, err := Open(context.Background(), Options{
				Engine: stages.Config{Path: tinyQ8, IO: stages.IOConfig{Lanes: 2}, Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"},
					Stream: mode, Threads: 2, Log: zerolog.Nop()},
				KV: model.KVF32, Ctx: 256,
				Progress: func(p Progress) { got = append(got, p) },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			loads := phase(got, PhaseLoad)
			checkPhase(t, PhaseLoad, loads)
			if last := loads[len(loads)-1]; last.Total < m.Engine().Desc().DenseBytes {
				t.Errorf("load total %d bytes < dense bytes %d", last.Total, m.Engine().Desc().DenseBytes)
			}
			s, err := m.NewSession(SessionOptions{Sampling: sample.Params{Temp: 0, RepeatPenalty: 1}})
			if err != nil {
				t.Fatal(err)
			}
			for turn, prompt := range []string{"hello there, how are you", "and then"} {
				got = nil
				ids, _, err := m.Encode(Prompt{Text: prompt})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Generate(context.Background(), ids, GenOptions{MaxTokens: 3}, nil); err != nil {
					t.Fatal(err)
				}
				pre := phase(got, PhasePrefill)
				checkPhase(t, PhasePrefill, pre)
				nl := int64(m.Engine().Desc().HParams.NLayer)
				if len(pre) < int(nl) || pre[0].Tokens != len(ids) || pre[0].Total != int64(len(ids))*nl {
					t.Errorf("turn %d: %d reports, first %+v; want one per layer of %d tokens", turn, len(pre), pre[0], len(ids))
				}
				if len(got) != len(pre) {
					t.Errorf("turn %d: %d reports besides the prompt pass's", turn, len(got)-len(pre))
				}
			}
		})
	}
}

func phase(ps []Progress, ph Phase) []Progress {
	var out []Progress
	for _, p := range ps {
		if p.Phase == ph {
			out = append(out, p)
		}
	}
	return out
}

func checkPhase(t *testing.T, ph Phase, ps []Progress) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatalf("%s: no progress", ph)
	}
	for i, p := range ps {
		if p.Total <= 0 || p.Done < 0 || p.Done > p.Total || (i > 0 && (p.Done < ps[i-1].Done || p.Total != ps[0].Total)) {
			t.Fatalf("%s: report %d %+v after %+v", ph, i, p, ps[max(i-1, 0)])
		}
	}
	if last := ps[len(ps)-1]; last.Done != last.Total {
		t.Errorf("%s: last report %+v, want Done == Total", ph, last)
	}
}
