package serve

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stallListener's connections record whether each write had a deadline;
// the one accepted after stallNext is set stands for a client that stopped
// reading: each of its writes fails as a real socket's would when its
// deadline passes — at once, as if that time had gone by (no clock in the
// test), after checking the deadline is at most wt away — and without a
// deadline it blocks until Close.
type stallListener struct {
	net.Listener
	wt         time.Duration // the server's write timeout
	stallNext  atomic.Bool
	undeadline atomic.Int32   // writes made with no deadline set
	far        atomic.Int32   // stalled writes whose deadline was more than wt away
	stalled    chan error     // what each stalled write returned
	wg         sync.WaitGroup // stalled writes in progress
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, l: l, stall: l.stallNext.Swap(false), closed: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	l        *stallListener
	stall    bool
	mu       sync.Mutex
	deadline time.Time
	closed   chan struct{}
	once     sync.Once
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *stallConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	d := c.deadline
	c.mu.Unlock()
	if d.IsZero() {
		c.l.undeadline.Add(1)
	}
	if !c.stall {
		return c.Conn.Write(b)
	}
	c.l.wg.Add(1)
	defer c.l.wg.Done()
	if !d.IsZero() {
		if time.Until(d) > c.l.wt {
			c.l.far.Add(1)
		}
		c.l.stalled <- os.ErrDeadlineExceeded
		return 0, os.ErrDeadlineExceeded
	}
	<-c.closed
	c.l.stalled <- net.ErrClosed
	return 0, net.ErrClosed
}

// TestStalledClient: every write of a response has a deadline, so a client
// that stops reading frees the server within the write timeout: a
// non-streamed completion's body, a streamed one's events and a quick
// route's answer each fail on their deadline instead of blocking, and the
// next client is answered.
func TestStalledClient(t *testing.T) {
	const wt = 30 * time.Second // the stalled writes fail without waiting for it
	l := &stallListener{wt: wt, stalled: make(chan error, 64)}
	h := startOn(t, nil, func(o *Options) { o.WriteTimeout = wt }, func(ln net.Listener) net.Listener {
		l.Listener = ln
		return l
	})
	addr := strings.TrimPrefix(h.url, "http://")
	for _, req := range []struct{ name, method, path, body string }{
		{"completion", "POST", "/v1/completions", `{"prompt":"hello","max_tokens":3,"temperature":0}`},
		{"stream", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`},
		{"native", "POST", "/completion", `{"prompt":"hello","n_predict":3}`},
		{"health", "GET", "/health", ""},
	} {
		l.stallNext.Store(true)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			req.method, req.path, addr, len(req.body), req.body)
		select {
		case err := <-l.stalled:
			if err != os.ErrDeadlineExceeded {
				t.Fatalf("%s: the stalled write ended with %v, want its deadline", req.name, err)
			}
		case <-time.After(time.Minute):
			c.Close()
			t.Fatalf("%s: a write to a client that stopped reading still blocked a minute on (write timeout %v)", req.name, wt)
		}
		c.Close()
		// the next client is answered
		r := h.do("/v1/completions", `{"prompt":"hello","max_tokens":2,"temperature":0}`, 200)
		if len(r["choices"].([]any)) != 1 {
			t.Fatalf("%s: then %v", req.name, r)
		}
	}
	l.wg.Wait()
	if n := l.undeadline.Load(); n != 0 {
		t.Fatalf("%d writes had no deadline", n)
	}
	if n := l.far.Load(); n != 0 {
		t.Fatalf("%d stalled writes had a deadline beyond the write timeout %v", n, wt)
	}
}
