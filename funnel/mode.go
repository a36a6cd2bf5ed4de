package funnel

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/oklog/ulid/v2"
)

// The breaker's db mode: while the stock engine is out, sell straight from
// the database's conditional update, with the instances agreeing on it
// through a flashsale.ModeBoard (sellmode.go says why and how). This file
// is one instance's part: its beat and the steps it takes in each phase,
// and the purchases it makes from the database.

// Defaults of the db mode.
const (
	// SellLeaseDefault is how long an instance's report on the board
	// stands. An instance cut off from the database stops selling from
	// the engine when its lease runs out: a database blip shorter than
	// this changes nothing, a longer one stops its sales.
	SellLeaseDefault = 10 * time.Second
	// DirectLimitDefault bounds the purchases one instance sends to the
	// database at once in db mode; beyond, ErrOverloaded. The database
	// is the one part left: it must not be the next to fall.
	DirectLimitDefault = 16
	modeTick           = 250 * time.Millisecond
	// leaseMargin is how much sooner than the database an instance takes
	// its own lease as run out: the beat's round trip and clock drift.
	leaseMargin = time.Second
	// directRefusedFor is how long a stay the database refused as sold
	// out (or a user it refused as over the limit) is answered so without
	// asking it again: in db mode a refused order is a failed row, and a
	// sold-out storm or a script hammering past its limit must not write
	// one per attempt. Units that come back (an expiry) sell a moment
	// later.
	directRefusedFor = time.Second
)

// errSwitching answers a purchase while its instance moves between the
// engine and the database.
var errSwitching = retryIn{fmt.Errorf("%w: switching between the stock engine and the database", flashsale.ErrUnavailable), time.Second}

// retryIn is an error that knows when to retry (flashsale.RetryAfter).
type retryIn struct {
	error
	wait time.Duration
}

func (e retryIn) Unwrap() error             { return e.error }
func (e retryIn) RetryAfter() time.Duration { return e.wait }

// seller is this instance's side of the db mode.
type seller struct {
	board flashsale.ModeBoard
	lease time.Duration
	base  time.Time // fresh is measured from it, on the monotonic clock

	selling atomic.Value // flashsale.Selling
	mode    atomic.Value // flashsale.SellMode: the deployment's, as last read
	fresh   atomic.Int64 // time.Since(base) until which the lease surely stands

	slots chan struct{} // DirectLimit
	// dbWork is entered by every purchase from the database; the step
	// out of db mode waits for it to empty.
	dbWork inflight

	refusedMu sync.Mutex
	refused   map[refusal]time.Time
}

// refusal is what the database refused lately: a stay sold out (no user),
// or a user over the sale's limit (no stay).
type refusal struct {
	sale, user    string
	first, nights int
	err           error
}

func newSeller(cfg Config) *seller {
	if cfg.Store.Modes == nil {
		return nil
	}
	sl := &seller{
		board:   cfg.Store.Modes,
		lease:   cfg.SellLease,
		base:    time.Now(),
		slots:   make(chan struct{}, max(cfg.DirectLimit, 1)),
		refused: map[refusal]time.Time{},
	}
	if sl.lease <= 0 {
		sl.lease = SellLeaseDefault
	}
	if cfg.DirectLimit <= 0 {
		sl.slots = make(chan struct{}, DirectLimitDefault)
	}
	sl.selling.Store(flashsale.SellingNone)
	sl.mode.Store(flashsale.SellMode{})
	return sl
}

// sells is what this instance sells from now (the engine, always, without
// a board): SellingNone too once its lease may have run out, whatever it
// last decided.
func (sl *seller) sells() flashsale.Selling {
	if sl == nil {
		return flashsale.SellingEngine
	}
	sel := sl.selling.Load().(flashsale.Selling)
	if sel == flashsale.SellingEngine && int64(time.Since(sl.base)) > sl.fresh.Load() {
		return flashsale.SellingNone
	}
	return sel
}

func (s *Service) sells() flashsale.Selling { return s.seller().sells() }

// seller is the db mode as purchases see it; nil without a board.
func (s *Service) seller() *seller {
	if s.modes == nil {
		return nil
	}
	return s.modes.sell
}

// SellMode is the deployment's sell mode as this instance last read it,
// and what it sells from now (metrics; the zero mode without a board).
func (s *Service) SellMode() (flashsale.SellMode, flashsale.Selling) {
	sl := s.seller()
	if sl == nil {
		return flashsale.SellMode{Phase: flashsale.PhaseEngine}, flashsale.SellingEngine
	}
	return sl.mode.Load().(flashsale.SellMode), s.sells()
}

// sellingEngine is nil when a purchase may take units from the engine. The
// caller is inside engineWork, so the step that stops it (which waits for
// engineWork to empty) waits for the purchase.
func (s *Service) sellingEngine() error {
	if s.sells() != flashsale.SellingEngine {
		return errSwitching
	}
	return nil
}

// engineMode reports whether the deployment sells from the engine (always,
// without a board): the scheduled audit and the heal loop's rebuilds wait
// while it does not.
func (sl *seller) engineMode() bool {
	return sl == nil || sl.mode.Load().(flashsale.SellMode).Phase == flashsale.PhaseEngine
}

// modeSwitch takes this instance's steps in the db mode: it beats on the
// board, follows the deployment's phase and moves it on (run, its one
// goroutine). Only that goroutine touches acted and paused, so it has no
// lock; what purchases read of it is in seller's atomics.
type modeSwitch struct {
	*parts
	sell       *seller
	healing    *healer   // the consumer's pause and drain, and the rebuild
	sales      *catalog  // the live sales a return to the engine reloads
	engineWork *inflight // the Service's: stopEngine waits for it
	// acted is the mode this instance has done its part for, and paused
	// whether it paused its consumer for it.
	acted  flashsale.SellMode
	paused bool
}

// run beats on the board and takes this instance's steps until ctx ends.
func (ms *modeSwitch) run(ctx context.Context) { every(ctx, modeTick, nil, ms.step) }

func (ms *modeSwitch) step(ctx context.Context) {
	sl := ms.sell
	start := time.Since(sl.base)
	sel := sl.selling.Load().(flashsale.Selling)
	m, err := sl.board.Beat(ctx, flashsale.SellPart{Instance: ms.instance, Mode: ms.acted, Selling: sel}, sl.lease)
	if err != nil {
		if sel == flashsale.SellingEngine && sl.sells() != flashsale.SellingEngine {
			ms.log.Warn("sell mode: lease ran out (the database is unreachable): not selling from the stock engine until it answers", "err", err)
			sl.selling.Store(flashsale.SellingNone)
		}
		return
	}
	sl.fresh.Store(int64(start + sl.lease - leaseMargin))
	if prev := sl.mode.Swap(m).(flashsale.SellMode); prev != m {
		ms.log.Warn("sell mode", "phase", m.Phase, "epoch", m.Epoch, "was", prev.Phase)
	}
	switch m.Phase {
	case flashsale.PhaseEngine:
		ms.modeEngine(ctx, m, sel)
	case flashsale.PhaseStopping:
		ms.modeStopping(ctx, m, sel)
	case flashsale.PhaseDB:
		ms.modeDB(ctx, m, sel)
	case flashsale.PhaseReturning:
		ms.modeReturning(ctx, m, sel)
	}
}

func (ms *modeSwitch) modeEngine(ctx context.Context, m flashsale.SellMode, sel flashsale.Selling) {
	sl := ms.sell
	if ms.paused {
		ms.healing.drainer.Resume()
		ms.paused = false
	}
	ms.acted = m
	if sel != flashsale.SellingEngine {
		sl.selling.Store(flashsale.SellingEngine)
		ms.log.Warn("sell mode: selling from the stock engine", "epoch", m.Epoch)
	}
	if ms.engine.Breaker != nil && ms.engine.Breaker.Status().State == flashsale.BreakerOpen {
		next := flashsale.SellMode{Phase: flashsale.PhaseStopping, Epoch: m.Epoch + 1}
		ms.moveMode(ctx, m, next, "sell mode: the stock engine's breaker is open; moving every instance to the database")
	}
}

func (ms *modeSwitch) modeStopping(ctx context.Context, m flashsale.SellMode, sel flashsale.Selling) {
	if ms.acted != m {
		ms.stopEngine(sel)
		pctx, cancel := context.WithTimeout(ctx, healWait)
		err := ms.healing.drainer.Pause(pctx)
		cancel()
		if err != nil {
			ms.log.Error("sell mode: pause the order consumer", "epoch", m.Epoch, "err", err)
			return
		}
		ms.paused, ms.acted = true, m
		return // the next beat says so
	}
	if ok, err := ms.allStopped(ctx, m); err != nil || !ok {
		return
	}
	// Every order a 202 was given for is in the queue or the database:
	// drain the queue, and the database knows them all.
	if err := ms.healing.drainer.Drain(ctx); err != nil {
		ms.log.Error("sell mode: drain the order queue", "epoch", m.Epoch, "err", err)
		return
	}
	next := flashsale.SellMode{Phase: flashsale.PhaseDB, Epoch: m.Epoch}
	ms.moveMode(ctx, m, next, "sell mode: queue drained; every instance sells from the database")
}

func (ms *modeSwitch) modeDB(ctx context.Context, m flashsale.SellMode, sel flashsale.Selling) {
	sl := ms.sell
	if ms.acted.Epoch != m.Epoch {
		// This instance missed the stop (its beats failed throughout):
		// stop now, then sell like the others.
		ms.stopEngine(sel)
	}
	if ms.paused {
		ms.healing.drainer.Resume()
		ms.paused = false
	}
	ms.acted = m
	if sel != flashsale.SellingDB {
		sl.selling.Store(flashsale.SellingDB)
		ms.log.Warn("sell mode: selling from the database", "epoch", m.Epoch)
	}
	if ms.engine.Breaker == nil || ms.engine.Breaker.Status().State != flashsale.BreakerClosed {
		return
	}
	next := flashsale.SellMode{Phase: flashsale.PhaseReturning, Epoch: m.Epoch + 1}
	ms.moveMode(ctx, m, next, "sell mode: the stock engine answers again; returning to it")
}

func (ms *modeSwitch) modeReturning(ctx context.Context, m flashsale.SellMode, sel flashsale.Selling) {
	sl := ms.sell
	if ms.acted != m {
		ms.stopEngine(sel)
		sl.selling.Store(flashsale.SellingNone)
		sl.dbWork.wait() // the purchases from the database in flight end
		ms.acted = m
		return
	}
	if ok, err := ms.allStopped(ctx, m); err != nil || !ok {
		return
	}
	// Reservations the engine holds but never handed to the queue (a
	// lost confirm before it went out) are relayed first, or the
	// rebuild would not count them and sell their rooms again.
	if ob := ms.engine.Outbox; ob != nil {
		left, err := ob.Unconfirmed(ctx, ms.now(), 1)
		if err != nil || len(left) > 0 {
			return
		}
	}
	if err := ms.reload(ctx); err != nil {
		if !errors.Is(err, errHealBusy) {
			ms.log.Error("sell mode: rebuild the stock engine", "epoch", m.Epoch, "err", err)
		}
		return
	}
	next := flashsale.SellMode{Phase: flashsale.PhaseEngine, Epoch: m.Epoch}
	ms.moveMode(ctx, m, next, "sell mode: stock engine rebuilt from the database; every instance sells from it")
}

// reload rebuilds every live sale in the engine from the database: the
// fenced rebuild across instances, or the in-process one's barrier.
func (ms *modeSwitch) reload(ctx context.Context) error {
	if ms.healing.fence != nil {
		ms.healing.mu.Lock()
		defer ms.healing.mu.Unlock()
		return ms.healing.heal(ctx, nil, ms.sales.live())
	}
	for _, id := range ms.sales.live() {
		if err := ms.healing.rebuild(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// moveMode moves the deployment from m to next and, if this instance's
// move was the one that took, logs why.
func (ms *modeSwitch) moveMode(ctx context.Context, m, next flashsale.SellMode, why string) {
	if ok, err := ms.sell.board.Move(ctx, m, next); err == nil && ok {
		ms.log.Warn(why, "epoch", next.Epoch)
	}
}

// stopEngine ends this instance's sales from the engine, waiting for the
// ones in flight (each is inside engineWork from its check to its answer).
func (ms *modeSwitch) stopEngine(sel flashsale.Selling) {
	if sel != flashsale.SellingEngine {
		return
	}
	ms.sell.selling.Store(flashsale.SellingNone)
	ms.engineWork.wait() // the purchases from the engine in flight end
	ms.log.Warn("sell mode: stopped selling from the stock engine")
}

// allStopped reports whether every instance has done its part for m, or
// has been silent for longer than its lease and a publish's grace: it
// stopped on its own when its lease ran out, and what it was publishing
// then is confirmed or given up.
func (ms *modeSwitch) allStopped(ctx context.Context, m flashsale.SellMode) (bool, error) {
	parts, now, err := ms.sell.board.Parts(ctx)
	if err != nil {
		return false, err
	}
	for _, p := range parts {
		if p.Mode == m && p.Selling == flashsale.SellingNone {
			continue
		}
		if p.Expires.Add(ms.healing.grace).Before(now) {
			continue
		}
		return false, nil
	}
	return true, nil
}

// orderByKey is the order a user's idempotency key names in the database,
// refused (ErrKeyReused) if it was for another stay or number of rooms.
func (s *Service) orderByKey(ctx context.Context, sale *flashsale.Sale, u flashsale.User, req flashsale.PurchaseRequest, first int) (*flashsale.Order, error) {
	o, err := s.store.OrderByKey(ctx, sale.ID, u.ID, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if err := sameRequest(sale, req, first, o.FirstNight, o.Nights, o.Rooms); err != nil {
		return nil, err
	}
	return o, nil
}

// purchaseDirect is a purchase in db mode: the database's conditional
// update decides (stock, the user's limit, the idempotency key) and the
// guest gets a held order or a refusal at once, with no 202 in between.
// A purchase token is spent by the order's primary key: its ID is made
// from the token, so a second use is a duplicate.
func (s *Service) purchaseDirect(ctx context.Context, u flashsale.User, sale *flashsale.Sale, req flashsale.PurchaseRequest, first int) (*flashsale.Order, error) {
	admitted, err := s.admitPurchase(ctx, u, sale, req.ClientIP)
	if err != nil {
		return nil, err
	}
	s.obs.Admitted(sale.ID)
	defer s.admit.leave(admitted)
	sl := s.seller()
	select {
	case sl.slots <- struct{}{}:
		defer func() { <-sl.slots }()
	default:
		return nil, flashsale.ErrOverloaded
	}
	sl.dbWork.enter()
	defer sl.dbWork.leave()
	if s.sells() != flashsale.SellingDB {
		return nil, errSwitching
	}
	if req.IdempotencyKey != "" {
		o, err := s.orderByKey(ctx, sale, u, req, first)
		if !errors.Is(err, flashsale.ErrNotFound) {
			return o, err
		}
	}
	now := s.now()
	if err := sale.Open(now); err != nil {
		return nil, err
	}
	if err := s.eligible(ctx, u, sale); err != nil {
		return nil, err
	}
	soldOut := refusal{sale: sale.ID, first: first, nights: req.Nights, err: flashsale.ErrSoldOut}
	overLimit := refusal{sale: sale.ID, user: u.ID, err: flashsale.ErrLimitExceeded}
	for _, r := range []refusal{soldOut, overLimit} {
		if sl.refusedLately(r, now) {
			return nil, r.err
		}
	}
	id := ulid.Make().String()
	if sale.PurchaseToken {
		c, err := s.signer.check(req.Token, u, sale, now)
		if err != nil {
			return nil, err
		}
		if id, err = tokenOrderID(c); err != nil {
			return nil, flashsale.ErrTokenInvalid
		}
	}
	r := newReservation(id, sale, u, req, first, now)
	refusals, err := s.store.PlaceOrders(ctx, []flashsale.Reservation{*r})
	if err != nil {
		return nil, err
	}
	switch err := refusals[0]; {
	case err == nil:
		s.obs.Reserved(sale.ID) // the database's conditional insert is both
		s.obs.Written(sale.ID)
		s.spend(ctx, u, sale)
		return orderOf(sale, r, flashsale.OrderHeld), nil
	case errors.Is(err, flashsale.ErrDuplicate):
		return nil, flashsale.ErrTokenInvalid // the token bought its order already
	case errors.Is(err, flashsale.ErrKeyConflict):
		return s.orderByKey(ctx, sale, u, req, first) // a retry racing this one
	case errors.Is(err, flashsale.ErrSoldOut):
		sl.refuse(soldOut, now)
		return nil, err
	case errors.Is(err, flashsale.ErrLimitExceeded):
		sl.refuse(overLimit, now)
		return nil, err
	default:
		return nil, err
	}
}

// tokenOrderID is the order ID a purchase token buys in db mode: a ULID
// made of the token's expiry and nonce, the same for every use of it.
func tokenOrderID(c tokenClaims) (string, error) {
	nonce, err := base64.RawURLEncoding.DecodeString(c.Nonce)
	if err != nil || len(nonce) < 10 {
		return "", flashsale.ErrTokenInvalid
	}
	var id ulid.ULID
	if err := id.SetTime(ulid.Timestamp(c.Expires)); err != nil {
		return "", err
	}
	copy(id[6:], nonce)
	return id.String(), nil
}

func (sl *seller) refusedLately(r refusal, now time.Time) bool {
	sl.refusedMu.Lock()
	defer sl.refusedMu.Unlock()
	at, ok := sl.refused[r]
	return ok && now.Sub(at) < directRefusedFor
}

func (sl *seller) refuse(r refusal, now time.Time) {
	sl.refusedMu.Lock()
	defer sl.refusedMu.Unlock()
	for k, at := range sl.refused {
		if now.Sub(at) >= directRefusedFor {
			delete(sl.refused, k)
		}
	}
	sl.refused[r] = now
}

// retakeDirect is a payment's retake in db mode: the database's guarded
// transition alone.
func (s *Service) retakeDirect(ctx context.Context, o *flashsale.Order, paymentRef string) (*flashsale.Order, error) {
	s.seller().dbWork.enter()
	defer s.seller().dbWork.leave()
	if s.sells() != flashsale.SellingDB {
		return nil, errSwitching
	}
	paid, err := s.store.Transition(ctx, o.ID, o.Status, flashsale.OrderPaid, paymentRef, s.now())
	if errors.Is(err, flashsale.ErrSoldOut) || errors.Is(err, flashsale.ErrLimitExceeded) {
		return nil, flashsale.ErrHoldExpired
	}
	return paid, err
}
