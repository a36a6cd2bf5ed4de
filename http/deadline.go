package http

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is a request's context with its deadline, whose timer is
// made only if something waits on Done. Deadline and Err hold from the
// start, so a call that only reads the deadline (go-redis sets its socket
// deadlines from it) or checks Err is bounded too; database/sql and the
// queue publisher wait on Done, and get a real timer then. The sold-out
// path does no I/O and pays nothing: context.WithTimeout per request cost
// it 5-10% of its throughput (docs/benchmarks.md).
type deadlineCtx struct {
	context.Context // the request's
	deadline        time.Time

	once    sync.Once
	started atomic.Bool     // set once timed is: from then on it answers Done and Err
	timed   context.Context // made by the first Done (or the request's own, after release)
	cancel  context.CancelFunc
}

// withDeadline returns ctx with a deadline d from now, and the function
// that releases it (call it when the request ends).
func withDeadline(ctx context.Context, d time.Duration) (*deadlineCtx, func()) {
	c := &deadlineCtx{Context: ctx, deadline: time.Now().Add(d)}
	if pd, ok := ctx.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	return c, c.release
}

func (c *deadlineCtx) start() {
	c.once.Do(func() {
		c.timed, c.cancel = context.WithDeadline(c.Context, c.deadline)
		c.started.Store(true)
	})
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} {
	c.start()
	return c.timed.Done()
}

// Err agrees with Done: once a timer exists its context answers (a Done
// closed by release must come with an error, or derived contexts panic).
func (c *deadlineCtx) Err() error {
	if c.started.Load() {
		return c.timed.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// release stops the timer if one was made; a Done after it returns the
// request's own channel.
func (c *deadlineCtx) release() {
	c.once.Do(func() {
		c.timed, c.cancel = c.Context, func() {}
		c.started.Store(true)
	})
	c.cancel()
}
