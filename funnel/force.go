package funnel

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// The operator's override of the breaker, for a whole deployment: the
// switch is kept on a flashsale.ForceBoard (the database), and every
// instance reads it every ForcePoll and forces its own breaker to match
// when it changed. The instance that takes the switch writes the board
// first and applies it at once; the others follow within a poll. Without
// a board (SQLite, or a breaker without a SQL store) the override is the
// instance's own, as it always was.

// ForcePollDefault is how often an instance rereads the deployment's
// breaker override: well inside the 5 s a switch has to reach every
// instance, and one small read a second per instance.
const ForcePollDefault = time.Second

// forceSwitch is the deployment's breaker override as this instance
// follows it: it owns the lock that covers a read of the board and its
// applying (so a switch taken here between the two is not undone by the
// older value read), and one goroutine (run).
type forceSwitch struct {
	board   flashsale.ForceBoard
	breaker flashsale.Breaker
	poll    time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	down    bool         // the last read of the board failed
	applied atomic.Value // flashsale.BreakerForce: the board's value last applied
}

// newForceSwitch is nil unless there are both a board and a breaker.
func newForceSwitch(board flashsale.ForceBoard, breaker flashsale.Breaker, poll time.Duration, log *slog.Logger) *forceSwitch {
	if board == nil || breaker == nil {
		return nil
	}
	return &forceSwitch{board: board, breaker: breaker, poll: cmp.Or(poll, ForcePollDefault), log: log}
}

// run follows the board until ctx ends.
func (f *forceSwitch) run(ctx context.Context) { every(ctx, f.poll, nil, f.step) }

// step reads the board, within one poll, and forces the breaker to it if
// it moved since the last read.
func (f *forceSwitch) step(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, f.poll)
	defer cancel()
	f.follow(ctx)
}

// follow is step within ctx's deadline alone: Start's first read, which
// has the start's. Within a poll, a read slower than that (a test's 50 ms
// poll on a loaded machine) started an instance in auto while the
// deployment was forced open, until its next poll.
func (f *forceSwitch) follow(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.board.BreakerForce(ctx)
	if err != nil {
		if !f.down {
			f.log.Warn("breaker override: cannot read the deployment's switch; keeping the last one", "force", f.current(), "err", err)
			f.down = true
		}
		return
	}
	if f.down {
		f.log.Info("breaker override: the deployment's switch reads again", "force", v)
		f.down = false
	}
	if v == f.current() {
		return
	}
	if err := f.breaker.Force(v); err != nil {
		// Only a value written past SetBreakerForce gets here.
		f.log.Error("breaker override: the deployment's switch holds no override", "force", v, "err", err)
		return
	}
	f.applied.Store(v)
	f.log.Info("breaker override: following the deployment's switch", "force", v)
}

// current is the board's override as last applied ("" before the first
// read).
func (f *forceSwitch) current() flashsale.BreakerForce {
	v, _ := f.applied.Load().(flashsale.BreakerForce)
	return v
}

// everywhere records v on the board and applies it here.
func (f *forceSwitch) everywhere(ctx context.Context, v flashsale.BreakerForce) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.board.SetBreakerForce(ctx, v); err != nil {
		return fmt.Errorf("force breaker: %w", err)
	}
	if err := f.breaker.Force(v); err != nil {
		return err
	}
	f.applied.Store(v)
	return nil
}
