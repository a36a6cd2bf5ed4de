// Package inmem holds the in-process pieces of the embedded shape: the exact
// stock engine, the one-time token spender and the group-commit order writer.
package inmem

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// Roles is the engine as the service takes it. It keeps no outbox: the
// embedded shape's writer commits before a purchase is answered.
func (e *Engine) Roles() flashsale.StockEngine {
	return flashsale.StockEngine{Reserver: e, StockKeeper: e}
}

// Engine is the embedded stock engine: exact, in process, one lock per sale
// so that a storm on one sale never slows another.
//
// Lock order: Engine.mu before sale.mu. Only Load holds both; every other
// method takes Engine.mu (read) just long enough to find the sale, releases
// it, then locks the sale.
//
// Reservation is asked by order ID alone, yet there is no engine-wide
// order index: keeping one (a sync.Map) cost an accepted Reserve two of its
// three allocations and about 40% of its CPU profile, while Reservation is off the embedded hot path and scans the
// handful of loaded sales instead.
type Engine struct {
	mu     sync.RWMutex
	sales  map[string]*sale
	tokens *spentTokens // purchase tokens spent by ReserveSpending, for every sale
}

// sale is one loaded sale's stock and bookkeeping, guarded by mu.
type sale struct {
	// soldOut is set while every night is at zero, so a sold-out sale
	// answers a keyless Reserve without taking the lock. It is only ever
	// written under mu; a stale read is harmless because the locked path
	// decides again.
	soldOut atomic.Bool

	mu       sync.Mutex
	startsAt time.Time
	limit    int
	avail    []int
	rules    []flashsale.StayRules             // per night; nil: the sale has none
	orders   map[string]*flashsale.Reservation // by order ID, active or not
	users    map[string]int                    // active rooms per user
	keys     map[userKey]string                // idempotency key -> order ID
	pinned   map[string]bool                   // active orders a retake pinned (see Retake)
}

// userKey scopes an idempotency key to its user (the sale is implicit).
type userKey struct{ user, key string }

// NewEngine returns an empty engine.
func NewEngine() *Engine {
	return &Engine{sales: make(map[string]*sale), tokens: newSpentTokens(nil)}
}

// Load installs a sale's stock from a snapshot. Reloading before the sale
// starts resets it entirely; once it has started, a loaded sale is never
// reset (ErrAlreadyStarted), so a stray preheat cannot hand out stock twice.
func (e *Engine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	if snap == nil || snap.Sale == nil || snap.Sale.ID == "" || len(snap.Nights) == 0 {
		return fmt.Errorf("load: empty snapshot: %w", flashsale.ErrInvalid)
	}
	rules := snap.Sale.StayRules()
	if rules != nil && len(rules) != len(snap.Nights) {
		return fmt.Errorf("load: sale=%s has %d nights and %d counters: %w", snap.Sale.ID, len(rules), len(snap.Nights), flashsale.ErrInvalid)
	}
	avail := make([]int, len(snap.Nights))
	for i, n := range snap.Nights {
		if n.Available < 0 {
			return fmt.Errorf("load: sale=%s night %d has %d available: %w", snap.Sale.ID, i, n.Available, flashsale.ErrInvalid)
		}
		avail[i] = n.Available
	}
	orders := make(map[string]*flashsale.Reservation, len(snap.Reservations))
	users := make(map[string]int)
	keys := make(map[userKey]string)
	for _, r := range snap.Reservations {
		if r.FirstNight < 0 || r.Nights < 1 || r.FirstNight+r.Nights > len(avail) || r.Rooms < 1 {
			return fmt.Errorf("load: sale=%s order=%s has an invalid stay: %w", snap.Sale.ID, r.OrderID, flashsale.ErrInvalid)
		}
		orders[r.OrderID] = &r
		if r.Active {
			users[r.UserID] += r.Rooms
		}
		if r.IdempotencyKey != "" {
			keys[userKey{r.UserID, r.IdempotencyKey}] = r.OrderID
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sales[snap.Sale.ID]
	if !ok {
		s = &sale{}
		e.sales[snap.Sale.ID] = s
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok && !now.Before(s.startsAt) {
		return flashsale.ErrAlreadyStarted
	}
	s.startsAt, s.limit = snap.Sale.StartsAt, snap.Sale.PerUserLimit
	s.avail, s.rules, s.orders, s.users, s.keys, s.pinned = avail, rules, orders, users, keys, nil
	s.updateSoldOut()
	return nil
}

// sale returns a loaded sale, or nil.
func (e *Engine) sale(id string) *sale {
	e.mu.RLock()
	s := e.sales[id]
	e.mu.RUnlock()
	return s
}

// Reserve checks the idempotency key, the user's limit and every night of
// the stay under the sale's lock, then deducts and records. A keyless
// attempt on a sold-out sale is answered from the flag without locking.
func (e *Engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	return e.reserve(r, "", time.Time{})
}

// ReserveSpending is Reserve with the purchase token spent under the sale's
// lock, after the idempotency checks and before the stay, limit and stock.
func (e *Engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	return e.reserve(r, token, expires)
}

func (e *Engine) reserve(r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	s := e.sale(r.SaleID)
	if s == nil {
		return "", flashsale.ErrNotLoaded
	}
	if r.IdempotencyKey == "" && s.soldOut.Load() {
		return "", flashsale.ErrSoldOut
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.IdempotencyKey != "" {
		if id, ok := s.keys[userKey{r.UserID, r.IdempotencyKey}]; ok {
			return id, flashsale.ErrDuplicate
		}
	}
	if prev, ok := s.orders[r.OrderID]; ok {
		// The same order ID again (a retried call): the order stands.
		return prev.OrderID, flashsale.ErrDuplicate
	}
	if token != "" && !e.tokens.spend(token, expires) {
		return "", flashsale.ErrTokenInvalid
	}
	if r.FirstNight < 0 || r.Nights < 1 || r.FirstNight > len(s.avail)-r.Nights || r.Rooms < 1 ||
		r.Choices > 1 && (r.Nights != 1 || r.FirstNight > len(s.avail)-r.Choices) {
		return "", flashsale.ErrInvalid
	}
	if r.Choices > 1 {
		if s.users[r.UserID]+r.Rooms > s.limit {
			return "", flashsale.ErrLimitExceeded
		}
		i := r.FirstNight
		for i < r.FirstNight+r.Choices && s.avail[i] < r.Rooms {
			i++
		}
		if i == r.FirstNight+r.Choices {
			return "", flashsale.ErrSoldOut
		}
		r.FirstNight = i
	} else if err := flashsale.CheckStay(s.rules, r.FirstNight, r.Nights); err != nil {
		return "", err
	}
	if err := s.take(r); err != nil {
		return "", err
	}
	rec := *r
	rec.Active, rec.Choices = true, 0
	s.orders[r.OrderID] = &rec
	if r.IdempotencyKey != "" {
		s.keys[userKey{r.UserID, r.IdempotencyKey}] = r.OrderID
	}
	return "", nil
}

// take checks the user's limit and every night of r's stay, then deducts
// them all, or nothing. The caller holds s.mu and has validated the stay.
func (s *sale) take(r *flashsale.Reservation) error {
	if s.users[r.UserID]+r.Rooms > s.limit {
		return flashsale.ErrLimitExceeded
	}
	nights := s.avail[r.FirstNight : r.FirstNight+r.Nights]
	for _, n := range nights {
		if n < r.Rooms {
			return flashsale.ErrSoldOut
		}
	}
	for i := range nights {
		nights[i] -= r.Rooms
	}
	s.users[r.UserID] += r.Rooms
	s.updateSoldOut()
	return nil
}

// updateSoldOut recomputes the sold-out flag. The caller holds s.mu.
func (s *sale) updateSoldOut() {
	for _, n := range s.avail {
		if n > 0 {
			s.soldOut.Store(false)
			return
		}
	}
	s.soldOut.Store(true)
}

// AdjustStock changes one night's units under the sale's lock.
func (e *Engine) AdjustStock(ctx context.Context, saleID string, night, delta int) error {
	s := e.sale(saleID)
	if s == nil {
		return flashsale.ErrNotLoaded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if night < 0 || night >= len(s.avail) {
		return flashsale.Errorf(flashsale.EInvalid, "night %d is not a night of sale %s", night, saleID)
	}
	if s.avail[night]+delta < 0 {
		return flashsale.ErrStockInUse
	}
	s.avail[night] += delta
	s.updateSoldOut()
	return nil
}

// Retain implements flashsale.StockKeeper: this engine keeps a sale until
// Forget, so there is nothing to extend.
func (e *Engine) Retain(_ context.Context, sale *flashsale.Sale) error {
	if e.sale(sale.ID) == nil {
		return flashsale.ErrNotLoaded
	}
	return nil
}

// SetStayRules replaces the sale's stay rules under its lock: a Reserve
// that takes the lock after it judges by them.
func (e *Engine) SetStayRules(ctx context.Context, saleID string, rules []flashsale.StayRules) error {
	s := e.sale(saleID)
	if s == nil {
		return flashsale.ErrNotLoaded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rules != nil && len(rules) != len(s.avail) {
		return flashsale.Errorf(flashsale.EInvalid, "%d stay rules for the %d nights of sale %s", len(rules), len(s.avail), saleID)
	}
	s.rules = nil
	for _, r := range rules {
		if r.Set() {
			s.rules = append([]flashsale.StayRules(nil), rules...)
			break
		}
	}
	return nil
}

// Release returns an active reservation's units and frees the user's
// limit; the idempotency key stays bound. Releasing an order that is not
// active, or unknown, does nothing.
func (e *Engine) Release(ctx context.Context, saleID, orderID string) error {
	s := e.sale(saleID)
	if s == nil {
		return flashsale.ErrNotLoaded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.orders[orderID]
	if !ok || !r.Active {
		return nil
	}
	if s.pinned[orderID] {
		delete(s.pinned, orderID) // a payment retook it after this release was decided
		return nil
	}
	for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
		s.avail[i] += r.Rooms
	}
	if s.users[r.UserID] -= r.Rooms; s.users[r.UserID] <= 0 {
		delete(s.users, r.UserID)
	}
	r.Active = false
	s.soldOut.Store(false)
	return nil
}

// Retake reactivates a released reservation with the same limit and stock
// checks as Reserve. Retaking an active order pins it: the next Release of
// it only unpins.
func (e *Engine) Retake(ctx context.Context, saleID, orderID string) error {
	s := e.sale(saleID)
	if s == nil {
		return flashsale.ErrNotLoaded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.orders[orderID]
	if !ok {
		return flashsale.ErrNotFound
	}
	if r.Active {
		// A release may be on its way (the hold expired in the database,
		// the engine has not heard yet): pin the order, so that release
		// keeps its units for this payment.
		if s.pinned == nil {
			s.pinned = make(map[string]bool)
		}
		s.pinned[orderID] = true
		return nil
	}
	if err := s.take(r); err != nil {
		return err
	}
	r.Active = true
	return nil
}

// Lookup returns the order ID bound to a user's idempotency key.
func (e *Engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	s := e.sale(saleID)
	if s == nil || key == "" {
		return "", flashsale.ErrNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.keys[userKey{userID, key}]
	if !ok {
		return "", flashsale.ErrNotFound
	}
	return id, nil
}

// Reservation returns a copy of a recorded reservation, looking through
// every loaded sale (order IDs are unique across sales).
func (e *Engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	e.mu.RLock()
	sales := make([]*sale, 0, len(e.sales))
	for _, s := range e.sales {
		sales = append(sales, s)
	}
	e.mu.RUnlock()
	for _, s := range sales {
		s.mu.Lock()
		r, ok := s.orders[orderID]
		var cp flashsale.Reservation
		if ok {
			cp = *r
		}
		s.mu.Unlock()
		if ok {
			return &cp, nil
		}
	}
	return nil, flashsale.ErrNotFound
}

// Available returns a copy of the units left per night.
func (e *Engine) Available(ctx context.Context, saleID string) ([]int, error) {
	s := e.sale(saleID)
	if s == nil {
		return nil, flashsale.ErrNotLoaded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.avail...), nil
}

// AvailableOf implements flashsale.StockKeeper: Available's copy for each
// loaded sale of saleIDs, each under its own sale's lock alone.
func (e *Engine) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	if len(saleIDs) == 0 {
		return nil, nil
	}
	out := make(map[string][]int, len(saleIDs))
	for _, id := range saleIDs {
		if units, err := e.Available(ctx, id); err == nil {
			out[id] = units
		}
	}
	return out, nil
}

// Forget implements flashsale.StockKeeper: the sale, its units and every
// record of its reservations go (its orders are in the database: the
// writer commits before a purchase is answered).
func (e *Engine) Forget(_ context.Context, saleID string) error {
	e.mu.Lock()
	delete(e.sales, saleID)
	e.mu.Unlock()
	return nil
}

// Missing returns the sales of saleIDs not loaded, each once, in order,
// under one read of the engine's lock: a sale is loaded from its Load on,
// as Available sees it.
func (e *Engine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	if len(saleIDs) == 0 {
		return nil, nil
	}
	var missing []string
	var seen map[string]bool // of missing, made at the first
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, id := range saleIDs {
		if e.sales[id] != nil || seen[id] {
			continue
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[id] = true
		missing = append(missing, id)
	}
	return missing, nil
}

// Shard implements flashsale.StockEngine: the process's memory is one part.
func (e *Engine) Shard(string) string { return "" }

// SoldOut reports, without taking the sale's lock, whether every night of
// the sale is at zero. The funnel asks before spending a purchase token.
func (e *Engine) SoldOut(saleID string, first, nights int) bool {
	s := e.sale(saleID)
	return s != nil && s.soldOut.Load()
}

// Ping always succeeds: the engine is in the process.
func (e *Engine) Ping(context.Context) error { return nil }

// Snapshot copies the sale's units left and its reservations.
func (e *Engine) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	s := e.sale(saleID)
	if s == nil {
		return nil, flashsale.ErrNotLoaded
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := &flashsale.StockSnapshot{
		Nights:       make([]flashsale.NightStock, len(s.avail)),
		Reservations: make([]flashsale.Reservation, 0, len(s.orders)),
	}
	for i, a := range s.avail {
		snap.Nights[i].Available = a
	}
	for _, r := range s.orders {
		snap.Reservations = append(snap.Reservations, *r)
	}
	return snap, nil
}
