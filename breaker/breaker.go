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
//
// An engine made of shards that fail on their own (a Redis Cluster's
// masters: StockEngine.Shard) gets one state per shard: a sale's calls
// open and close its shard's breaker alone, so a dead master refuses its
// own sales' purchases and no others (issue 21). The whole engine's state,
// which readiness, the db mode and the operators' switch read, is then fed
// by the calls that belong to no sale and to every shard: the ping.
package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
func (e *Engine) refused(p *part, forced bool) error {
	if forced {
		return openError{wait: e.openFor}
	}
	if p.cb.State() == gobreaker.StateHalfOpen {
		return openError{wait: time.Second}
	}
	return openError{wait: max(time.Second, e.openFor-time.Since(p.changed()))}
}

// Engine is a flashsale.StockEngine behind a circuit breaker. Every call
// that reaches the engine's server goes through it; SoldOut and Shard (no
// I/O), Load and Snapshot (the rebuild's and the audit's, which must try
// even while the breaker is open) and AdjustStock (the operator's, who is
// told the engine's own answer) go straight through, each by name.
type Engine struct {
	next     flashsale.StockEngine
	whole    *part    // the whole engine's state; every call's on an engine of one shard
	shards   sync.Map // shard -> *part, on an engine of several
	sharded  atomic.Bool
	outbox   flashsale.Outbox // the engine's outbox behind the same breaker, or nil
	log      *slog.Logger
	openFor  time.Duration
	settings gobreaker.Settings

	forced atomic.Pointer[flashsale.BreakerForce]
}

// part is one breaker: the whole engine's, or one shard's.
type part struct {
	cb    *gobreaker.TwoStepCircuitBreaker[struct{}]
	mu    sync.Mutex // guards since
	since time.Time
}

func (p *part) changed() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.since
}

// mark records that p's state changed now.
func (p *part) mark() {
	p.mu.Lock()
	p.since = time.Now()
	p.mu.Unlock()
}

// newPart makes a breaker that logs its changes with attrs.
func (e *Engine) newPart(attrs ...any) *part {
	p := &part{since: time.Now()}
	st := e.settings
	log := e.log.With(attrs...)
	st.OnStateChange = func(_ string, from, to gobreaker.State) {
		p.mark()
		log.Warn(changed[stateOf(to)], "from", stateOf(from), "to", stateOf(to))
	}
	p.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return p
}

// partOf is the breaker of saleID's shard: the whole engine's when the
// engine is one shard.
func (e *Engine) partOf(saleID string) *part {
	shard := e.next.Shard(saleID)
	if shard == "" {
		return e.whole
	}
	if p, ok := e.shards.Load(shard); ok {
		return p.(*part)
	}
	e.sharded.Store(true)
	p, _ := e.shards.LoadOrStore(shard, e.newPart("shard", shard))
	return p.(*part)
}

var (
	_ flashsale.Reserver    = (*Engine)(nil)
	_ flashsale.StockKeeper = (*Engine)(nil)
	_ flashsale.Breaker     = (*Engine)(nil)
)

// Roles is the engine behind the breaker, outbox included, as the service
// takes it, with the breaker itself as its Breaker.
func (e *Engine) Roles() flashsale.StockEngine {
	return flashsale.StockEngine{Reserver: e, StockKeeper: e, Outbox: e.outbox, Breaker: e}
}

// New wraps next.
func New(next flashsale.StockEngine, cfg Config) *Engine {
	e := &Engine{next: next, log: cfg.Logger}
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
	e.settings = gobreaker.Settings{
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
	}
	e.whole = e.newPart()
	if ob := next.Outbox; ob != nil {
		e.outbox = outbox{e: e, next: ob}
	}
	auto := flashsale.BreakerAuto
	e.forced.Store(&auto)
	return e
}

// Status implements flashsale.Breaker: the whole engine's state.
func (e *Engine) Status() flashsale.BreakerStatus {
	st := flashsale.BreakerStatus{
		State: stateOf(e.whole.cb.State()), Forced: *e.forced.Load(), Since: e.whole.changed(),
		ConsecutiveFailures: e.whole.cb.Counts().ConsecutiveFailures,
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
		e.whole.mark()
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
	return e.whole.cb.State() == gobreaker.StateClosed
}

// allow asks p for one call; done records its outcome.
func (e *Engine) allow(p *part) (done func(error), err error) {
	switch *e.forced.Load() {
	case flashsale.BreakerForceOpen:
		return nil, e.refused(p, true)
	case flashsale.BreakerForceClosed:
		return ignore, nil
	}
	done, err = p.cb.Allow()
	if err != nil {
		// Open, or half-open with its probe already out.
		return nil, e.refused(p, false)
	}
	return done, nil
}

func ignore(error) {}

// Reserve implements flashsale.next.
func (e *Engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	done, err := e.allow(e.partOf(r.SaleID))
	if err != nil {
		return "", err
	}
	existing, err := e.next.Reserve(ctx, r)
	done(err)
	return existing, err
}

// ReserveSpending implements flashsale.next.
func (e *Engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	done, err := e.allow(e.partOf(r.SaleID))
	if err != nil {
		return "", err
	}
	existing, err := e.next.ReserveSpending(ctx, r, token, expires)
	done(err)
	return existing, err
}

// Release implements flashsale.next.
func (e *Engine) Release(ctx context.Context, saleID, orderID string) error {
	return e.do(e.partOf(saleID), func() error { return e.next.Release(ctx, saleID, orderID) })
}

// Retake implements flashsale.next.
func (e *Engine) Retake(ctx context.Context, saleID, orderID string) error {
	return e.do(e.partOf(saleID), func() error { return e.next.Retake(ctx, saleID, orderID) })
}

// Lookup implements flashsale.next.
func (e *Engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	done, err := e.allow(e.partOf(saleID))
	if err != nil {
		return "", err
	}
	id, err := e.next.Lookup(ctx, saleID, userID, key)
	done(err)
	return id, err
}

// Reservation implements flashsale.next. It names no sale: on an
// engine of shards its order index may be on any of them, so it is not
// counted against one (nor against the whole engine, which a dead master
// would then seem to be).
func (e *Engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	var r *flashsale.Reservation
	err := e.doWhole(func() (err error) {
		r, err = e.next.Reservation(ctx, orderID)
		return err
	})
	return r, err
}

// Available implements flashsale.next.
func (e *Engine) Available(ctx context.Context, saleID string) ([]int, error) {
	done, err := e.allow(e.partOf(saleID))
	if err != nil {
		return nil, err
	}
	units, err := e.next.Available(ctx, saleID)
	done(err)
	return units, err
}

// Missing implements flashsale.StockKeeper: the sales go to the engine
// in one call per shard, each behind its shard's breaker as each sale's
// Available is (refused while it is open, a probe while half-open, a
// failure counted against that shard alone), so the heal loop's tick
// probes every shard a live sale is on and a dead master opens only its
// own breaker. Shards are asked in the order their first sale comes in;
// the first that fails or is refused ends the call with its error.
func (e *Engine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	parts, shardOf := e.byShard(saleIDs)
	if len(parts) == 1 {
		return e.missing(ctx, parts[0], saleIDs)
	}
	gone := make(map[string]bool)
	for _, p := range parts {
		m, err := e.missing(ctx, p, shardOf[p])
		if err != nil {
			return nil, err
		}
		for _, id := range m {
			gone[id] = true
		}
	}
	var missing []string
	for _, id := range saleIDs { // in order, each once
		if gone[id] {
			missing = append(missing, id)
			delete(gone, id)
		}
	}
	return missing, nil
}

// byShard splits saleIDs by shard, the shards in the order their first
// sale comes in.
func (e *Engine) byShard(saleIDs []string) ([]*part, map[*part][]string) {
	var parts []*part
	shardOf := make(map[*part][]string)
	for _, id := range saleIDs {
		p := e.partOf(id)
		if _, ok := shardOf[p]; !ok {
			parts = append(parts, p)
		}
		shardOf[p] = append(shardOf[p], id)
	}
	return parts, shardOf
}

// AvailableOf implements flashsale.StockKeeper as Missing does, one call
// per shard, each behind its shard's breaker, but a shard that fails or is
// refused does not end it: the others' sales are answered (the phantom
// watch goes on watching them while one master is down, as it did sale by
// sale), and the first error is returned with them.
func (e *Engine) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	parts, shardOf := e.byShard(saleIDs)
	var out map[string][]int
	var first error
	for _, p := range parts {
		done, err := e.allow(p)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		units, err := e.next.AvailableOf(ctx, shardOf[p])
		done(err)
		if len(parts) == 1 {
			return units, err
		}
		if out == nil {
			out = make(map[string][]int, len(saleIDs))
		}
		maps.Copy(out, units)
		first = cmp.Or(first, err)
	}
	return out, first
}

// missing asks the engine about sales of p's shard, behind p.
func (e *Engine) missing(ctx context.Context, p *part, saleIDs []string) ([]string, error) {
	done, err := e.allow(p)
	if err != nil {
		return nil, err
	}
	m, err := e.next.Missing(ctx, saleIDs)
	done(err)
	return m, err
}

// Ping implements flashsale.StockEngine: a ping is a call like any other, so
// /readyz both sees the breaker open and probes it.
func (e *Engine) Ping(ctx context.Context) error {
	return e.do(e.whole, func() error { return e.next.Ping(ctx) })
}

// Load implements flashsale.StockKeeper, past the breaker: a rebuild must
// try even while it is open.
func (e *Engine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	return e.next.Load(ctx, snap, now)
}

// Snapshot implements flashsale.StockKeeper, past the breaker: the audit
// must try even while it is open.
func (e *Engine) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	return e.next.Snapshot(ctx, saleID)
}

// AdjustStock implements flashsale.StockKeeper, past the breaker: the
// operator is told the engine's own answer.
func (e *Engine) AdjustStock(ctx context.Context, saleID string, night, delta int) error {
	return e.next.AdjustStock(ctx, saleID, night, delta)
}

// SetStayRules implements flashsale.StockKeeper, past the breaker, like
// AdjustStock: the operator closing a night is told the engine's answer.
func (e *Engine) SetStayRules(ctx context.Context, saleID string, rules []flashsale.StayRules) error {
	return e.next.SetStayRules(ctx, saleID, rules)
}

// Retain implements flashsale.StockKeeper, past the breaker, like
// AdjustStock: the operator moving a sale's end is told the engine's answer.
func (e *Engine) Retain(ctx context.Context, sale *flashsale.Sale) error {
	return e.next.Retain(ctx, sale)
}

// Forget implements flashsale.StockKeeper, past the breaker: a sale long
// over is dropped whether or not purchases are being refused.
func (e *Engine) Forget(ctx context.Context, saleID string) error {
	return e.next.Forget(ctx, saleID)
}

// SoldOut implements flashsale.Reserver: no I/O, nothing to break.
func (e *Engine) SoldOut(saleID string, firstNight, nights int) bool {
	return e.next.SoldOut(saleID, firstNight, nights)
}

// Shard implements flashsale.Reserver: a name, computed without I/O.
func (e *Engine) Shard(saleID string) string { return e.next.Shard(saleID) }

func (e *Engine) do(p *part, call func() error) error {
	done, err := e.allow(p)
	if err != nil {
		return err
	}
	err = call()
	done(err)
	return err
}

// doWhole runs a call that spans the engine: behind the whole engine's
// breaker on an engine of one shard; on one of several, refused only
// while the whole engine's breaker is open and counted against nothing.
func (e *Engine) doWhole(call func() error) error {
	if !e.sharded.Load() {
		return e.do(e.whole, call)
	}
	switch *e.forced.Load() {
	case flashsale.BreakerForceOpen:
		return e.refused(e.whole, true)
	case flashsale.BreakerForceClosed:
		return call()
	}
	if e.whole.cb.State() == gobreaker.StateOpen {
		return e.refused(e.whole, false)
	}
	return call()
}

type outbox struct {
	e    *Engine
	next flashsale.Outbox
}

func (o outbox) Confirm(ctx context.Context, saleID, orderID string) error {
	return o.e.do(o.e.partOf(saleID), func() error { return o.next.Confirm(ctx, saleID, orderID) })
}

func (o outbox) Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]flashsale.Reservation, error) {
	var rs []flashsale.Reservation
	err := o.e.doWhole(func() (err error) {
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
