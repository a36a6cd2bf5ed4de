// Package breaker puts a circuit breaker (sony/gobreaker) in front of a
// stock engine across the network. Once the engine stops answering (a
// timeout, a refused connection: flashsale.Unreachable), it opens and every
// call fails at once with flashsale.ErrUnavailable, certain not to have
// run, so a purchase is a fast 503 with Retry-After instead of a goroutine
// waiting out its deadline against a dead Redis; after OpenFor one call is
// let through as a probe (half-open), and its answer closes the breaker or
// opens it again. The heal loop's tick is such a probe, so the breaker
// closes on its own even when no guest is buying.
//
// An engine that answers, whatever it answers, is healthy: sold out, over
// the limit, not loaded (a Redis that restarted empty must be seen, or the
// rebuild never starts) are successes to the breaker. A call the client
// gave up on (context.Canceled) says nothing about the engine either way.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/sony/gobreaker/v2"
)

// Defaults.
const (
	// FailuresDefault consecutive unreachable answers open the breaker: a
	// handful, so a lost engine is cut off within milliseconds of a storm,
	// but not one, so a single slow call does not.
	FailuresDefault = 5
	// OpenForDefault is how long the breaker stays open before it probes.
	OpenForDefault = 5 * time.Second
)

// Config configures a breaker.
type Config struct {
	// Failures consecutive unreachable answers open it; FailuresDefault if 0.
	Failures uint32
	// OpenFor is how long it stays open before a probe; OpenForDefault if 0.
	OpenFor time.Duration
	// Logger receives every state change at warn; slog.Default if nil.
	Logger *slog.Logger
}

// ErrOpen is why a call was refused without being tried. It wraps
// flashsale.ErrUnavailable, so the caller answers 503 and, since nothing
// ran, gives back nothing and assumes nothing. The error a call returns
// wraps ErrOpen and says when the breaker will probe (Retry-After).
var ErrOpen = fmt.Errorf("stock engine circuit breaker is open: %w", flashsale.ErrUnavailable)

// openError is ErrOpen with the wait until the next probe.
type openError struct{ wait time.Duration }

func (e openError) Error() string             { return ErrOpen.Error() }
func (e openError) Unwrap() error             { return ErrOpen }
func (e openError) RetryAfter() time.Duration { return e.wait }

// refused is the error of a call the breaker did not let through: the
// rest of the open period while open, the open period while an operator
// holds it open (no one knows for how long), a moment while half-open
// (the probe is out).
func (e *Engine) refused(forced bool) error {
	if forced {
		return openError{wait: e.openFor}
	}
	if e.cb.State() == gobreaker.StateHalfOpen {
		return openError{wait: time.Second}
	}
	e.mu.Lock()
	since := e.since
	e.mu.Unlock()
	return openError{wait: max(time.Second, e.openFor-time.Since(since))}
}

// Engine is a flashsale.StockEngine behind a circuit breaker. Every call
// that reaches the engine's server goes through it; SoldOut (no I/O) and
// Load and Snapshot (the rebuild's and the audit's, which must try even
// while the breaker is open) go straight through.
type Engine struct {
	flashsale.StockEngine
	cb      *gobreaker.TwoStepCircuitBreaker[struct{}]
	outbox  flashsale.Outbox // the engine's outbox behind the same breaker, or nil
	log     *slog.Logger
	openFor time.Duration

	forced atomic.Pointer[flashsale.BreakerForce]
	mu     sync.Mutex // guards since
	since  time.Time
}

var (
	_ flashsale.StockEngine = (*Engine)(nil)
	_ flashsale.Breaker     = (*Engine)(nil)
)

// New wraps next.
func New(next flashsale.StockEngine, cfg Config) *Engine {
	e := &Engine{StockEngine: next, log: cfg.Logger, since: time.Now()}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.log = e.log.With("component", "breaker")
	failures := cfg.Failures
	if failures == 0 {
		failures = FailuresDefault
	}
	openFor := cfg.OpenFor
	if openFor <= 0 {
		openFor = OpenForDefault
	}
	e.openFor = openFor
	e.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "stock-engine",
		MaxRequests: 1,
		Timeout:     openFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsSuccessful: func(err error) bool {
			return !flashsale.Unreachable(err) || errors.Is(err, flashsale.ErrNotLoaded)
		},
		IsExcluded: func(err error) bool {
			return errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			e.mu.Lock()
			e.since = time.Now()
			e.mu.Unlock()
			e.log.Warn(changed[stateOf(to)], "from", stateOf(from), "to", stateOf(to))
		},
	})
	if ob := next.Outbox(); ob != nil {
		e.outbox = outbox{e: e, next: ob}
	}
	auto := flashsale.BreakerAuto
	e.forced.Store(&auto)
	return e
}

// Status implements flashsale.Breaker.
func (e *Engine) Status() flashsale.BreakerStatus {
	e.mu.Lock()
	since := e.since
	e.mu.Unlock()
	st := flashsale.BreakerStatus{
		State: stateOf(e.cb.State()), Forced: *e.forced.Load(), Since: since,
		ConsecutiveFailures: e.cb.Counts().ConsecutiveFailures,
	}
	switch st.Forced {
	case flashsale.BreakerForceOpen:
		st.State = flashsale.BreakerOpen
	case flashsale.BreakerForceClosed:
		st.State = flashsale.BreakerClosed
	}
	return st
}

// Force implements flashsale.Breaker.
func (e *Engine) Force(f flashsale.BreakerForce) error {
	if err := f.Valid(); err != nil {
		return err
	}
	if old := e.forced.Swap(&f); *old != f {
		e.mu.Lock()
		e.since = time.Now()
		e.mu.Unlock()
		e.log.Warn("stock engine circuit breaker forced by an operator", "from", *old, "to", f)
	}
	return nil
}

// Closed reports, cheaply, whether calls go through to the engine now (the
// Redis limiter asks it on every purchase it counts).
func (e *Engine) Closed() bool {
	switch *e.forced.Load() {
	case flashsale.BreakerForceOpen:
		return false
	case flashsale.BreakerForceClosed:
		return true
	}
	return e.cb.State() == gobreaker.StateClosed
}

// allow asks the breaker for one call; done records its outcome.
func (e *Engine) allow() (done func(error), err error) {
	switch *e.forced.Load() {
	case flashsale.BreakerForceOpen:
		return nil, e.refused(true)
	case flashsale.BreakerForceClosed:
		return ignore, nil
	}
	done, err = e.cb.Allow()
	if err != nil {
		// Open, or half-open with its probe already out.
		return nil, e.refused(false)
	}
	return done, nil
}

func ignore(error) {}

// Reserve implements flashsale.StockEngine.
func (e *Engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	done, err := e.allow()
	if err != nil {
		return "", err
	}
	existing, err := e.StockEngine.Reserve(ctx, r)
	done(err)
	return existing, err
}

// ReserveSpending implements flashsale.StockEngine.
func (e *Engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	done, err := e.allow()
	if err != nil {
		return "", err
	}
	existing, err := e.StockEngine.ReserveSpending(ctx, r, token, expires)
	done(err)
	return existing, err
}

// Release implements flashsale.StockEngine.
func (e *Engine) Release(ctx context.Context, saleID, orderID string) error {
	return e.do(func() error { return e.StockEngine.Release(ctx, saleID, orderID) })
}

// Retake implements flashsale.StockEngine.
func (e *Engine) Retake(ctx context.Context, saleID, orderID string) error {
	return e.do(func() error { return e.StockEngine.Retake(ctx, saleID, orderID) })
}

// Lookup implements flashsale.StockEngine.
func (e *Engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	done, err := e.allow()
	if err != nil {
		return "", err
	}
	id, err := e.StockEngine.Lookup(ctx, saleID, userID, key)
	done(err)
	return id, err
}

// Reservation implements flashsale.StockEngine.
func (e *Engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	done, err := e.allow()
	if err != nil {
		return nil, err
	}
	r, err := e.StockEngine.Reservation(ctx, orderID)
	done(err)
	return r, err
}

// Available implements flashsale.StockEngine.
func (e *Engine) Available(ctx context.Context, saleID string) ([]int, error) {
	done, err := e.allow()
	if err != nil {
		return nil, err
	}
	units, err := e.StockEngine.Available(ctx, saleID)
	done(err)
	return units, err
}

// Ping implements flashsale.StockEngine: a ping is a call like any other, so
// /readyz both sees the breaker open and probes it.
func (e *Engine) Ping(ctx context.Context) error {
	return e.do(func() error { return e.StockEngine.Ping(ctx) })
}

// Outbox implements flashsale.StockEngine: the engine's outbox behind the
// same breaker (it lives on the same server).
func (e *Engine) Outbox() flashsale.Outbox { return e.outbox }

func (e *Engine) do(call func() error) error {
	done, err := e.allow()
	if err != nil {
		return err
	}
	err = call()
	done(err)
	return err
}

type outbox struct {
	e    *Engine
	next flashsale.Outbox
}

func (o outbox) Confirm(ctx context.Context, saleID, orderID string) error {
	return o.e.do(func() error { return o.next.Confirm(ctx, saleID, orderID) })
}

func (o outbox) Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]flashsale.Reservation, error) {
	var rs []flashsale.Reservation
	err := o.e.do(func() (err error) {
		rs, err = o.next.Unconfirmed(ctx, olderThan, limit)
		return err
	})
	return rs, err
}

// stateOf names gobreaker's state.
func stateOf(s gobreaker.State) flashsale.BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return flashsale.BreakerOpen
	case gobreaker.StateHalfOpen:
		return flashsale.BreakerHalfOpen
	}
	return flashsale.BreakerClosed
}

// changed is the log line of entering each state.
var changed = map[flashsale.BreakerState]string{
	flashsale.BreakerOpen:     "stock engine circuit breaker opened: the engine does not answer, purchases are refused at once",
	flashsale.BreakerHalfOpen: "stock engine circuit breaker half-open: probing the engine",
	flashsale.BreakerClosed:   "stock engine circuit breaker closed: the engine answers again",
}
