package ffn

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pipe-engine/pipe/expert"
	"github.com/pipe-engine/pipe/internal/buf"
)

// streamed is the state of one streaming Consume, read by the pool threads.
type streamed struct {
	recv   context.Context // bounds the receives
	stop   context.Context // bounds the compute
	job    *Job
	ch     <-chan expert.Ready
	failed atomic.Bool // a value carried an error or a compute failed: release the rest uncomputed
}

// streams reports whether Consume takes j's experts one per pool thread as
// they arrive (consumeStream) instead of in ready groups: for a
// multi-token job on a pool of several threads when not every expert is
// ready yet (a streamed prefill, whose misses land one at a time). A group
// of one or two experts would otherwise split its rows over the threads or
// leave a thread idle until the group's slowest expert is done, and no
// expert arriving meanwhile could start.
func (s *Stage) streams(j *Job, ch <-chan expert.Ready, want int, overlap bool) bool {
	return overlap && len(s.threads) > 1 && len(j.X) > 1 && len(ch) < want
}

// consumeStream takes want values from ch on the pool's threads, each
// thread receiving the next value as soon as it is free and computing that
// expert whole on its own scratch (kernels.Pool.ParallelWith, one index per
// value). Stall is the threads' mean time waiting for a value; Compute the
// rest of the call's wall time. Every received value is released; recv
// and ctx bound it as they bound Consume.
func (s *Stage) consumeStream(recv, ctx context.Context, j *Job, ch <-chan expert.Ready, want int, st *Stats) error {
	t0 := s.Clock.Now()
	s.stream.recv, s.stream.stop, s.stream.job, s.stream.ch = recv, ctx, j, ch
	s.stream.failed.Store(false)
	s.errs = buf.Grow(s.errs, want)
	for i := range s.threads {
		s.threads[i].wait, s.threads[i].experts = 0, 0
	}
	err := s.pool.ParallelWith(want, s.takeFn)
	s.stream.recv, s.stream.stop, s.stream.job, s.stream.ch = nil, nil, nil, nil
	wall := s.Clock.Since(t0)
	var wait time.Duration
	for i := range s.threads {
		wait += s.threads[i].wait
		st.Experts += s.threads[i].experts
	}
	stall := wait / time.Duration(len(s.threads))
	st.Stall += stall
	st.Compute += wall - stall
	for i, e := range s.errs {
		if err == nil {
			err = e
		}
		s.errs[i] = nil
	}
	return err
}

// takeOne is consumeStream's body on thread t: receive one value (call i)
// and compute its expert whole.
func (s *Stage) takeOne(t, i int) {
	c, th := &s.stream, &s.threads[t]
	t0 := s.Clock.Now()
	s.waiting()
	r, err := receive(c.recv, c.ch)
	th.wait += s.Clock.Since(t0)
	if err != nil {
		s.errs[i] = err
		return
	}
	defer r.Release()
	switch {
	case r.Err != nil:
		err = r.Err
	case c.failed.Load():
		return
	case c.stop.Err() != nil:
		err = c.stop.Err()
	default:
		err = s.computeWhole(c.job, r, th)
	}
	if err != nil {
		s.errs[i] = err
		c.failed.Store(true)
		return
	}
	th.experts++
}

// receive returns the next value of ch, yielding for up to pollWait before
// it blocks (see poll), or ctx's error. Several pool threads receive from
// one channel (consumeStream), so a value poll saw may be gone by the time
// this thread takes it: every receive, also after poll, also selects on
// ctx, or a thread that lost the race would wait forever on a cancelled
// run's channel.
func receive(ctx context.Context, ch <-chan expert.Ready) (expert.Ready, error) {
	if err := ctx.Err(); err != nil {
		return expert.Ready{}, err
	}
	if poll(ch, time.Now()) {
		select {
		case r := <-ch:
			return r, nil
		default: // another thread took it: block below
		}
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return expert.Ready{}, ctx.Err()
	}
}

// computeWhole computes expert r of j on thread th alone: its tokens'
// inputs gathered into th's buffers (a single token's read in place), the
// outputs put in their (token, rank) slots, which no other expert writes.
func (s *Stage) computeWhole(j *Job, r expert.Ready, th *threadScratch) error {
	us, ok := j.usersOf(r.Expert)
	if !ok {
		return fmt.Errorf("%w: layer %d expert %d", ErrNotRouted, j.Layer, r.Expert)
	}
	E := s.nEmbd
	if len(us) == 1 {
		u := us[0]
		out := s.ys[(u.t*j.K+u.r)*E : (u.t*j.K+u.r+1)*E]
		return s.fn.ComputeExpert(j.Layer, r.Expert, r.Parts, 1, j.X[u.t][:E], out, &th.scratch)
	}
	th.xs, th.os = buf.Grow(th.xs, len(us)*E), buf.Grow(th.os, len(us)*E)
	for i, u := range us {
		copy(th.xs[i*E:(i+1)*E], j.X[u.t])
	}
	if err := s.fn.ComputeExpert(j.Layer, r.Expert, r.Parts, len(us), th.xs, th.os, &th.scratch); err != nil {
		return err
	}
	for i, u := range us {
		copy(s.ys[(u.t*j.K+u.r)*E:], th.os[i*E:(i+1)*E])
	}
	return nil
}
