package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/pipe-engine/pipe/decode"
	"github.com/pipe-engine/pipe/model"
	"github.com/pipe-engine/pipe/sample"
	"github.com/pipe-engine/pipe/serve"
	"github.com/pipe-engine/pipe/stages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunAgainstPipeServe: 3 clients against pipe serve with 2 slots (one
// queues) each stream their 6 tokens; the report has their TTFTs and rates
// and the expert bytes read per token from /metrics.
func TestRunAgainstPipeServe(t *testing.T) {
	m, err := decode.Open(context.Background(), decode.Options{
		Engine: stages.Config{Path: "../../testdata/golden/models/tiny-qwen3moe-Q8_0.gguf", IO: stages.IOConfig{Lanes: 2},
			Cache: stages.CacheConfig{Bytes: 4 << 20, Policy: "lru"}, Threads: 2, Log: zerolog.Nop()},
		KV: model.KVF32, Ctx: 256,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv, err := serve.New(serve.Options{Model: m, ModelID: "tiny", Ctx: 256, Parallel: 2, SlotSimilarity: 0.1,
		Sampling: sample.Params{Temp: 0, TopP: 1, RepeatPenalty: 1}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	rep, err := Run(context.Background(), Options{URL: hs.URL, Clients: 3, Prompts: []string{"The village", "A lighthouse"}, N: 6})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rep.Clients {
		if c.Tokens != 6 || c.TTFT <= 0 || c.TokS() <= 0 {
			t.Errorf("client %d: %+v", i, c)
		}
		solo := completion(t, hs.URL, []string{"The village", "A lighthouse"}[i%2])
		if c.Text != solo {
			t.Errorf("client %d streamed %q; the same prompt alone, not streamed: %q", i, c.Text, solo)
		}
	}
	if rep.AggregateTokS <= 0 || rep.TTFTP50 <= 0 || rep.TTFTP95 < rep.TTFTP50 || rep.MiBPerToken < 0 {
		t.Errorf("report %+v", rep)
	}
}

// TestRunServerError: a server that answers an error status is ErrServer.
func TestRunServerError(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"no"}`, http.StatusServiceUnavailable)
	}))
	defer hs.Close()
	if _, err := Run(context.Background(), Options{URL: hs.URL, Clients: 2, Prompts: []string{"x"}, N: 2}); !errors.Is(err, ErrServer) {
		t.Fatalf("%v, want ErrServer", err)
	}
	if _, err := Run(context.Background(), Options{URL: hs.URL, Clients: 0, Prompts: []string{"x"}, N: 2}); err == nil {
		t.Fatal("0 clients: no error")
	}
}

// completion is the content of a non-streamed greedy /completion of 6 tokens.
func completion(t *testing.T, url, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 6, "cache_prompt": false})
	resp, err := http.Post(url+"/completion", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Content string `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Content
}
