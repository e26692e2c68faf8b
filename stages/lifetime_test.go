package stages

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sourcegraph/conc"
)

// TestLifetimePanicCancels: a stage goroutine's panic cancels the lifetime
// at once (a goroutine waiting on it is released, with errStagePanic as the
// cause), and wait re-raises the panic.
func TestLifetimePanicCancels(t *testing.T) {
	var l lifetime
	l.parent = context.Background()
	l.ctx, l.cancel = context.WithCancelCause(l.parent)
	l.wg = conc.NewWaitGroup()
	l.Go(func() error { panic("stage bug") })
	l.Go(func() error {
		<-l.ctx.Done() // a stage waiting on the panicked one
		return nil
	})
	select {
	case <-l.ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("a stage goroutine's panic did not cancel the lifetime")
	}
	if err := l.stageErr(); !errors.Is(err, errStagePanic) {
		t.Fatalf("stageErr %v, want errStagePanic", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "stage bug") {
			t.Fatalf("wait re-raised %v, want the stage's panic", r)
		}
	}()
	_ = l.wait()
	t.Fatal("wait returned after a stage goroutine panicked")
}
