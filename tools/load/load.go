// Package load is a load harness for an OpenAI-compatible server (pipe
// serve, llama-server): K concurrent clients each stream one /completion
// (llama-server's native route, with token counts in every chunk) and the
// harness reports the aggregate and per-client decode rates, the time to
// first token (p50, p95) and, from the server's /metrics when it has
// pipe's expert counters, the expert MiB read per generated token.
package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrServer: the server answered a request with an error or an unreadable
// stream.
var ErrServer = errors.New("load: server error")

// Options configure Run.
type Options struct {
	URL     string   // the server's base URL, e.g. http://127.0.0.1:8080
	Clients int      // concurrent clients (at least 1)
	Prompts []string // client i sends Prompts[i % len]
	N       int      // tokens each client generates (n_predict)
	APIKey  string   // sent as a bearer token when set
	Client  *http.Client
}

// Client is one client's measurements.
type Client struct {
	Tokens int
	TTFT   time.Duration // request sent → first token
	Decode time.Duration // first token → last
	Text   string        // the streamed content (to compare with a solo run's)
}

// TokS is the client's decode rate (tokens after the first ÷ Decode).
func (c Client) TokS() float64 {
	if c.Tokens < 2 || c.Decode <= 0 {
		return 0
	}
	return float64(c.Tokens-1) / c.Decode.Seconds()
}

// Report is a run's result.
type Report struct {
	Clients          []Client
	Wall             time.Duration // first request sent → last stream ended
	AggregateTokS    float64       // every client's tokens ÷ Wall
	TTFTP50, TTFTP95 time.Duration
	// MiBPerToken is the expert bytes the server read during the run per
	// generated token (-1: its /metrics has no pipe_expert_read_bytes_total).
	// pipe writes that series from its first generation on, so a run on a
	// fresh server also counts what the engine read before it (its warm
	// start): send one request first for a clean figure.
	MiBPerToken float64
}

// Run runs the clients at once and waits for all of them.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Clients < 1 || len(o.Prompts) == 0 || o.N < 1 || o.URL == "" {
		return Report{}, fmt.Errorf("load: %d clients, %d prompts, n %d, url %q: need at least one of each", o.Clients, len(o.Prompts), o.N, o.URL)
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	read0, ok := readBytes(ctx, o)
	if !ok {
		read0 = 0 // pipe writes the series from its first generation on
	}
	rep := Report{Clients: make([]Client, o.Clients)}
	errs := make([]error, o.Clients)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range rep.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep.Clients[i], errs[i] = stream(ctx, o, o.Prompts[i%len(o.Prompts)])
		}()
	}
	wg.Wait()
	rep.Wall = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return rep, err
	}
	rep.summarize()
	rep.MiBPerToken = -1
	if read1, ok := readBytes(ctx, o); ok {
		if n := rep.tokens(); n > 0 {
			rep.MiBPerToken = (read1 - read0) / (1 << 20) / float64(n)
		}
	}
	return rep, nil
}

func (r *Report) tokens() int {
	n := 0
	for _, c := range r.Clients {
		n += c.Tokens
	}
	return n
}

// summarize fills the aggregate rate and the TTFT percentiles.
func (r *Report) summarize() {
	if r.Wall > 0 {
		r.AggregateTokS = float64(r.tokens()) / r.Wall.Seconds()
	}
	ttft := make([]time.Duration, len(r.Clients))
	for i, c := range r.Clients {
		ttft[i] = c.TTFT
	}
	slices.Sort(ttft)
	r.TTFTP50, r.TTFTP95 = percentile(ttft, 50), percentile(ttft, 95)
}

// percentile is the nearest-rank percentile p of sorted d.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (p*len(d) + 99) / 100
	return d[max(i, 1)-1]
}

// stream sends one streaming /completion and times its tokens.
func stream(ctx context.Context, o Options, prompt string) (Client, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": o.N, "stream": true, "cache_prompt": false})
	resp, err := post(ctx, o, "/completion", body)
	if err != nil {
		return Client{}, err
	}
	defer resp.Body.Close()
	var c Client
	var text strings.Builder
	t0 := time.Now()
	var first time.Time
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ev struct {
			Content         string          `json:"content"`
			Tokens          []int32         `json:"tokens"`
			TokensPredicted int             `json:"tokens_predicted"`
			Stop            bool            `json:"stop"`
			Error           json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Error != nil {
			return c, fmt.Errorf("%w: event %q", ErrServer, line)
		}
		if ev.TokensPredicted > 0 && first.IsZero() {
			first = time.Now()
			c.TTFT = first.Sub(t0)
		}
		c.Tokens = max(c.Tokens, ev.TokensPredicted)
		text.WriteString(ev.Content)
		if ev.Stop {
			break
		}
	}
	if !first.IsZero() {
		c.Decode = time.Since(first)
	}
	c.Text = text.String()
	return c, sc.Err()
}

// post sends body to path and returns a 200 response.
func post(ctx context.Context, o Options, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(o.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s: %d %s", ErrServer, path, resp.StatusCode, b)
	}
	return resp, nil
}

// readBytes is the server's pipe_expert_read_bytes_total (ok false when its
// /metrics has none).
func readBytes(ctx context.Context, o Options) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(o.URL, "/")+"/metrics", nil)
	if err != nil {
		return -1, false
	}
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return -1, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "pipe_expert_read_bytes_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return -1, false
}
