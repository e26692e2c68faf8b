package serve

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-engine/pipe/decode"
)

// hangGuard bounds every wait of the serve tests for an event: a wait that
// reaches it fails the test loudly instead of hanging; it is no timing claim.
const hangGuard = 60 * time.Second

// gated is a generation stopped at a gate (see gate).
type gated struct {
	parked chan struct{} // closed when the generation stops at the gate
	open   func()        // lets it go on; idempotent
	after  atomic.Int64  // layers routed after the gate opened
}

// gate makes the model's generation stop at the first layer of its n-th
// decode forward (counted from 1 from this call, prompt passes not counted)
// until g.open is called: the request then holds the decode slot for
// exactly as long as the test needs, with no clock. g.open runs when the
// test ends at the latest (before the harness stops); after hangGuard the
// gate opens by itself and fails the test.
func gate(t *testing.T, h *harness, n int64) *gated {
	t.Helper()
	g := &gated{parked: make(chan struct{})}
	o := make(chan struct{})
	var once sync.Once
	g.open = func() { once.Do(func() { close(o) }) }
	t.Cleanup(g.open)
	var forwards atomic.Int64
	opened := false // only on the decoding goroutine
	h.m.OnRoute(func(r decode.Route) {
		if opened {
			g.after.Add(1)
			return
		}
		if r.Prefill || r.Layer != 0 || forwards.Add(1) != n {
			return
		}
		close(g.parked)
		select {
		case <-o:
		case <-time.After(hangGuard):
			t.Errorf("the generation waited %v at the gate: the test never opened it", hangGuard)
		}
		opened = true
	})
	return g
}

// waitFor waits for ch, failing the test after hangGuard with what.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("%s: nothing after %v", what, hangGuard)
	}
}

// eventListener reports the server's side of its connections: closed is
// closed when the listener is (Shutdown's first step, after Serve cancelled
// the generations), and gone receives once per connection whose read failed
// other than by a deadline (its client went away).
type eventListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
	gone   chan struct{}
}

func newEventListener(ln net.Listener) *eventListener {
	return &eventListener{Listener: ln, closed: make(chan struct{}), gone: make(chan struct{}, 64)}
}

func (l *eventListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

func (l *eventListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &eventConn{Conn: c, gone: l.gone}, nil
}

type eventConn struct {
	net.Conn
	once sync.Once
	gone chan struct{}
}

func (c *eventConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) { // (net/http ends a pending read with a past deadline)
		c.once.Do(func() {
			select {
			case c.gone <- struct{}{}:
			default: // nobody is counting
			}
		})
	}
	return n, err
}
