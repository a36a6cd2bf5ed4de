package funnel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/oklog/ulid/v2"
)

// Purchase runs one guest's attempt through the funnel. The checks are
// ordered cheapest and most decisive first; the idempotency lookup comes
// before the token so a client retrying with the request it already sent
// (its token now spent) gets its order back.
func (s *Service) Purchase(ctx context.Context, u flashsale.User, req flashsale.PurchaseRequest) (*flashsale.Order, error) {
	o, err := s.purchase(ctx, u, req)
	s.obs.Purchase(req.SaleID, err)
	return o, err
}

// RefuseSoldOut: see flashsale.Service. Only a sale already in this
// instance's cache is answered (a lookup of one that is not would be I/O),
// only while it is open (a sale that ended or is paused answers that
// instead) and only while the engine sells (in the breaker's db mode the
// database decides, and the engine's flags may be stale).
func (s *Service) RefuseSoldOut(ctx context.Context, saleID string) bool {
	sale := s.sales.cached(saleID)
	if sale == nil || sale.Open(s.now()) != nil || s.sells() != flashsale.SellingEngine {
		return false
	}
	for i := range sale.Nights {
		if !s.engine.SoldOut(sale.ID, i, 1) {
			return false
		}
	}
	s.logSoldOut(ctx, sale.ID)
	s.obs.Purchase(sale.ID, flashsale.ErrSoldOut)
	return true
}

func (s *Service) purchase(ctx context.Context, u flashsale.User, req flashsale.PurchaseRequest) (*flashsale.Order, error) {
	sale, err := s.sales.get(ctx, req.SaleID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if req.Rooms == 0 {
		req.Rooms = 1
	}
	if req.Rooms < 0 || req.Rooms > MaxRooms {
		return nil, flashsale.Errorf(flashsale.EInvalid, "rooms must be between 1 and %d", MaxRooms)
	}
	first, choices, err := resolve(sale, &req, now)
	if err != nil {
		return nil, err
	}
	if !sale.PurchaseToken { // with tokens, the token's issue was the gate
		if _, err := s.admitted(ctx, u, sale, now); err != nil {
			return nil, err
		}
	}
	// The breaker's db mode sells from the database (mode.go).
	if sel := s.sells(); sel != flashsale.SellingEngine {
		if sel == flashsale.SellingDB {
			if choices > 1 {
				// The database does not choose a vehicle; a group that a
				// full first vehicle refused would read a false sold out.
				return nil, flashsale.Errorf(flashsale.EUnavailable, "a departure's seats are sold by the stock engine alone; retry shortly")
			}
			// No engine to judge the stay: the sale's rules as this
			// instance last read them do.
			if err := sale.CheckStayRules(first, req.Nights); err != nil {
				return nil, err
			}
			return s.purchaseDirect(ctx, u, sale, req, first)
		}
		return nil, errSwitching
	}
	// From here on a purchase costs I/O (the reserve, or for a keyed one
	// refused before it the lookup of an earlier attempt's order): it must
	// fit the rate limits and is admitted within the bounds or shed at
	// once. A sold-out answer without a key costs none and is neither
	// limited nor shed.
	var admitted *atomic.Int64
	defer func() {
		if admitted != nil {
			s.admit.leave(admitted)
		}
	}()
	// From the reserve (or a replay's retake) to the answer, units may be
	// taken but not yet in the database: an in-process rebuild, and the
	// step out of selling from the engine, wait for that to be over.
	locked := false
	if req.IdempotencyKey != "" {
		if admitted, err = s.admitPurchase(ctx, u, sale, req.ClientIP); err != nil {
			return nil, err
		}
		s.obs.Admitted(sale.ID)
		s.engineWork.enter()
		defer s.engineWork.leave()
		if locked = true; s.sellingEngine() != nil {
			return nil, errSwitching
		}
	}
	now = s.now() // after the admission's I/O
	if err := sale.Open(now); err != nil {
		return s.refuse(ctx, u, sale, req, first, err)
	}
	// The stay rules as this instance last read the sale: a refusal that
	// costs no I/O and names the night. The engine judges again inside
	// the reserve, by the rules in force then (an operator's stop-sell
	// reaches it before this instance's copy of the sale).
	if err := sale.CheckStayRules(first, req.Nights); err != nil {
		return s.refuse(ctx, u, sale, req, first, err)
	}
	if err := s.eligible(ctx, u, sale); err != nil {
		return s.refuse(ctx, u, sale, req, first, err)
	}
	if soldOut(s.engine, sale.ID, first, req.Nights, choices) {
		return s.refuseSoldOut(ctx, u, sale, req, first)
	}
	if admitted == nil {
		if admitted, err = s.admitPurchase(ctx, u, sale, req.ClientIP); err != nil {
			return nil, err
		}
		s.obs.Admitted(sale.ID)
	}
	if !locked {
		s.engineWork.enter()
		defer s.engineWork.leave()
		if s.sellingEngine() != nil {
			return nil, errSwitching
		}
	}
	var token *tokenClaims
	if sale.PurchaseToken {
		c, err := s.signer.check(req.Token, u, sale, now)
		if err != nil {
			return s.refuse(ctx, u, sale, req, first, err)
		}
		token = &c
	}
	// A burst waits for the engine here, and hears the sold-out flag
	// when its turn comes rather than from the engine (gate.go). The slot
	// is the reserve's alone: the order's write (a group commit, a
	// confirmed publish) is not bounded by it.
	slots, err := s.gate.enter(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	if soldOut(s.engine, sale.ID, first, req.Nights, choices) {
		s.gate.leave(slots)
		return s.refuseSoldOut(ctx, u, sale, req, first)
	}

	r := newReservation(ulid.Make().String(), sale, u, req, first, now)
	if choices > 1 {
		r.Choices = choices
	}
	// A key an earlier attempt bound is found by the reserve itself
	// (ErrDuplicate): one round trip, not a lookup and a reserve.
	existing, err := s.reserve(ctx, r, token)
	s.gate.leave(slots)
	switch {
	case errors.Is(err, flashsale.ErrDuplicate):
		return s.existing(ctx, u, sale, existing, req, first)
	case errors.Is(err, flashsale.ErrNotLoaded):
		s.healing.wakeHeal() // the engine lost the sale: a rebuild puts it back
		return nil, err
	case errors.Is(err, flashsale.ErrSoldOut):
		s.logSoldOut(ctx, sale.ID)
		return nil, err
	case err != nil:
		return nil, sale.StayRefusal(err)
	}
	s.obs.Reserved(sale.ID)
	s.spend(ctx, u, sale)
	return s.write(ctx, sale, r)
}

// resolve finds the units a purchase asks for, by the sale's kind, and
// fills the request's defaults: a stay's check-in (the first night not
// passed) and nights (1); a slot sale's one unit. It returns the first
// unit's index and how many units the engine may choose the one from (a
// departure's vehicles; 1 for every other kind).
func resolve(sale *flashsale.Sale, req *flashsale.PurchaseRequest, now time.Time) (first, choices int, err error) {
	if sale.Timed() {
		name := "slot"
		if sale.KindOf() == flashsale.KindSeats {
			name = "departure"
		}
		switch {
		case req.Slot == "":
			return 0, 0, flashsale.Errorf(flashsale.EInvalid, "%s is required: this sale sells %ss (like %s)", name, name, sale.SlotName(0))
		case req.CheckIn != "" || req.Nights > 1:
			return 0, 0, flashsale.Errorf(flashsale.EInvalid, "a %s is bought by its %s, without check_in or nights", name, name)
		}
		req.Nights = 1
		if sale.KindOf() == flashsale.KindSeats {
			return sale.Departure(req.Slot, now)
		}
		first, err := sale.Slot(req.Slot, now)
		return first, 1, err
	}
	if req.Slot != "" {
		return 0, 0, flashsale.Errorf(flashsale.EInvalid, "slot and departure are for slot and seats sales; this sale sells stays (check_in and nights)")
	}
	if req.CheckIn == "" {
		req.CheckIn = firstNight(sale, now)
	}
	if req.Nights == 0 {
		req.Nights = 1
	}
	first, err = sale.Stay(req.CheckIn, req.Nights)
	if err != nil {
		return 0, 0, err
	}
	return first, 1, sale.CheckCheckIn(req.CheckIn, now)
}

// newReservation is the order a purchase asks for, at the sale's price per
// room-night for its number of rooms (the price schedule its token signed:
// signer.check refused a token of another).
func newReservation(id string, sale *flashsale.Sale, u flashsale.User, req flashsale.PurchaseRequest, first int, now time.Time) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID:        id,
		SaleID:         sale.ID,
		UserID:         u.ID,
		IdempotencyKey: req.IdempotencyKey,
		FirstNight:     first,
		Nights:         req.Nights,
		Rooms:          req.Rooms,
		Amount:         sale.UnitPrice(req.Rooms) * int64(req.Nights) * int64(req.Rooms),
		HoldExpiresAt:  now.Add(sale.HoldDuration()).UTC().Truncate(time.Millisecond),
		Active:         true,
	}
}

// reserve takes the stock, spending the purchase token in the same step if
// the sale wants one.
func (s *Service) reserve(ctx context.Context, r *flashsale.Reservation, token *tokenClaims) (string, error) {
	if token == nil {
		return s.engine.Reserve(ctx, r)
	}
	return s.engine.ReserveSpending(ctx, r, token.Nonce, token.Expires)
}

// firstNight is the check-in of a purchase that names none: the sale's
// first night that has not passed (its first, if all have).
func firstNight(sale *flashsale.Sale, now time.Time) string {
	for _, n := range sale.Nights {
		if !sale.NightPassed(n.Date, now) {
			return n.Date
		}
	}
	return sale.Nights[0].Date
}

// releaseTimeout bounds giving back the units of a write the order path
// refused; it runs past the request's deadline.
const releaseTimeout = 5 * time.Second

// write sends a reserved order down the order path and answers for it.
func (s *Service) write(ctx context.Context, sale *flashsale.Sale, r *flashsale.Reservation) (*flashsale.Order, error) {
	status, err := s.writer.Write(ctx, r)
	if errors.Is(err, flashsale.ErrIndeterminate) {
		// The order path may have the order (a publish whose confirm was
		// lost): keep the units, or they would be sold twice. The
		// reservation stays in the engine's outbox and the relay publishes
		// it again; a retry with the same Idempotency-Key reads it.
		s.log.Warn("order path outcome unknown; the relay settles it", "sale_id", r.SaleID, "order_id", r.OrderID, "request_id", flashsale.RequestID(ctx), "err", err)
		return nil, err
	}
	if err != nil {
		// The database refused (the order is recorded as failed) or the order
		// path did not take it: either way the units go back, even when the
		// request's deadline is what ended the write. Released under that
		// spent deadline they stayed taken, and the relay later published
		// an order for a guest who had been told 503 (CI, a burst on a
		// loaded machine).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		rerr := s.engine.Release(rctx, r.SaleID, r.OrderID)
		cancel()
		if rerr != nil {
			s.log.Error("release after refused write", "sale_id", r.SaleID, "order_id", r.OrderID, "request_id", flashsale.RequestID(ctx), "err", rerr)
		}
		if status == flashsale.OrderFailed {
			s.log.Warn("order failed: the database refused it", "sale_id", r.SaleID, "order_id", r.OrderID, "request_id", flashsale.RequestID(ctx), "err", err)
		}
		return nil, err
	}
	s.obs.Written(r.SaleID)
	if status == flashsale.OrderHeld {
		s.log.Info("order held", "sale_id", r.SaleID, "order_id", r.OrderID, "request_id", flashsale.RequestID(ctx))
	} else {
		s.log.Debug("order queued", "sale_id", r.SaleID, "order_id", r.OrderID, "request_id", flashsale.RequestID(ctx))
	}
	return orderOf(sale, r, status), nil
}

// logSoldOut says once per sale that the engine answered sold out: later
// sold-out answers, the bulk of a sale's traffic, stay unlogged.
// The last sale logged is checked first: the sold-out flag's answers, the
// hot path's, are nearly all for one sale, and a string compare is cheaper
// than the map's hash.
func (s *Service) logSoldOut(ctx context.Context, saleID string) {
	if last := s.soldOut.last.Load(); last == nil || *last != saleID {
		s.logSoldOutSlow(ctx, saleID)
	}
}

// logSoldOutSlow is logSoldOut's map lookup, apart so that only it moves
// saleID to the heap.
func (s *Service) logSoldOutSlow(ctx context.Context, saleID string) {
	if _, seen := s.soldOut.seen.LoadOrStore(saleID, struct{}{}); !seen {
		s.log.Info("sale sold out", "sale_id", saleID, "request_id", flashsale.RequestID(ctx))
	}
	s.soldOut.last.Store(&saleID)
}

// soldOutLog holds the sales whose sold-out answer from the engine was
// logged: one line per sale and process, not one per request.
type soldOutLog struct {
	seen sync.Map
	last atomic.Pointer[string] // the sale last looked up in seen
}

// refuse answers a purchase refused before the engine with err, unless it
// has an idempotency key an earlier attempt bound to an order (a retry
// after a lost 202, the sale sold out or closed since): that order is the
// answer then, as the reserve would have given it.
func (s *Service) refuse(ctx context.Context, u flashsale.User, sale *flashsale.Sale, req flashsale.PurchaseRequest, first int, err error) (*flashsale.Order, error) {
	if req.IdempotencyKey == "" {
		return nil, err
	}
	o, rerr := s.replay(ctx, u, sale, req, first)
	if errors.Is(rerr, flashsale.ErrNotFound) {
		return nil, err
	}
	return o, rerr
}

// replay returns the order a user's idempotency key already names, or ErrNotFound.
func (s *Service) replay(ctx context.Context, u flashsale.User, sale *flashsale.Sale, req flashsale.PurchaseRequest, first int) (*flashsale.Order, error) {
	id, err := s.engine.Lookup(ctx, sale.ID, u.ID, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return s.existing(ctx, u, sale, id, req, first)
}

// sameRequest refuses an order an idempotency key names when the purchase
// asked for another stay or number of rooms (ErrKeyReused): the key is one
// request, and answering the first order to a different one would tell the
// client it bought what it did not. req has its defaults filled in. A
// departure's order names the vehicle the engine chose: any unit of the
// same date and time is the same request's.
func sameRequest(sale *flashsale.Sale, req flashsale.PurchaseRequest, first, firstNight, nights, rooms int) error {
	if req.IdempotencyKey == "" || (sameUnit(sale, first, firstNight) && req.Nights == nights && req.Rooms == rooms) {
		return nil
	}
	return flashsale.ErrKeyReused
}

// sameUnit reports whether units a and b are one, or one departure's.
func sameUnit(sale *flashsale.Sale, a, b int) bool {
	if a == b {
		return true
	}
	n := len(sale.Nights)
	return a >= 0 && b >= 0 && a < n && b < n && sale.Nights[a].Time != "" &&
		sale.Nights[a].Date == sale.Nights[b].Date && sale.Nights[a].Time == sale.Nights[b].Time
}

// refuseSoldOut is refuse for the sold-out flag's answer, logged once a
// sale.
func (s *Service) refuseSoldOut(ctx context.Context, u flashsale.User, sale *flashsale.Sale, req flashsale.PurchaseRequest, first int) (*flashsale.Order, error) {
	s.logSoldOut(ctx, sale.ID)
	return s.refuse(ctx, u, sale, req, first, flashsale.ErrSoldOut)
}

// soldOut is the engine's SoldOut for a purchase: with choices, every one
// of them sold out (a full first vehicle leaves the second's seats).
func soldOut(e flashsale.StockEngine, saleID string, first, nights, choices int) bool {
	if choices <= 1 {
		return e.SoldOut(saleID, first, nights)
	}
	for i := first; i < first+choices; i++ {
		if !e.SoldOut(saleID, i, 1) {
			return false
		}
	}
	return true
}

// existing answers for the order an idempotency key names. If the engine
// bound the key but the order was never written (the order path refused
// it, a 503, and its units went back), the retry is what the client is
// for: take the units again under the same order ID and write it, so the
// same key keeps naming one order.
func (s *Service) existing(ctx context.Context, u flashsale.User, sale *flashsale.Sale, id string, req flashsale.PurchaseRequest, first int) (*flashsale.Order, error) {
	o, err := s.order(ctx, u, id)
	if err == nil {
		if err := sameRequest(sale, req, first, o.FirstNight, o.Nights, o.Rooms); err != nil {
			return nil, err
		}
	}
	if !errors.Is(err, flashsale.ErrNotFound) {
		return o, err
	}
	r, err := s.engine.Reservation(ctx, id)
	if err != nil || r.UserID != u.ID {
		return nil, flashsale.ErrNotFound
	}
	if err := sameRequest(sale, req, first, r.FirstNight, r.Nights, r.Rooms); err != nil {
		return nil, err
	}
	now := s.now()
	if err := sale.Open(now); err != nil {
		return nil, err
	}
	if err := s.engine.Retake(ctx, sale.ID, id); err != nil {
		return nil, err
	}
	s.obs.Reserved(sale.ID)
	r.Active = true
	r.HoldExpiresAt = now.Add(sale.HoldDuration()).UTC().Truncate(time.Millisecond)
	return s.write(ctx, sale, r)
}

// Order returns the user's order: from the database, or, while it is still in
// flight (distributed shape), from the stock engine's record as pending.
func (s *Service) Order(ctx context.Context, u flashsale.User, id string) (*flashsale.Order, error) {
	if !validID(id) {
		return nil, flashsale.ErrNotFound
	}
	return s.order(ctx, u, id)
}

// OrderByID returns any order, pending ones included.
func (s *Service) OrderByID(ctx context.Context, id string) (*flashsale.Order, error) {
	if !validID(id) {
		return nil, flashsale.ErrNotFound
	}
	return s.orderOwnedBy(ctx, "", id)
}

func (s *Service) order(ctx context.Context, u flashsale.User, id string) (*flashsale.Order, error) {
	return s.orderOwnedBy(ctx, u.ID, id)
}

// orderOwnedBy reads an order of owner ("": anyone's).
func (s *Service) orderOwnedBy(ctx context.Context, owner, id string) (*flashsale.Order, error) {
	o, err := s.storeOrder(ctx, id)
	if errors.Is(err, flashsale.ErrNotFound) || flashsale.Unreachable(err) {
		// Not written yet (in the queue), or the database is down: the
		// engine's record answers for an active order, so a guest who got
		// a 202 reads pending rather than a 404 or a 503.
		r, rerr := s.engine.Reservation(ctx, id)
		switch {
		case rerr == nil && r.Active && (owner == "" || r.UserID == owner):
			sale, serr := s.sales.get(ctx, r.SaleID)
			if serr != nil {
				return nil, serr
			}
			return orderOf(sale, r, flashsale.OrderPending), nil
		case err != nil && !errors.Is(err, flashsale.ErrNotFound):
			// The database did not answer and the engine cannot vouch for
			// the order: say unavailable, not not-found.
			return nil, fmt.Errorf("order=%s: %w: %w", id, flashsale.ErrUnavailable, err)
		case flashsale.Unreachable(rerr):
			return nil, fmt.Errorf("order=%s: %w", id, rerr)
		case s.healing.rebuilding(ctx):
			// The engine lost its records and the order may be in the
			// queue still: "not found" would be a lie until the rebuild
			// has drained it into the database.
			return nil, fmt.Errorf("order=%s: %w", id, flashsale.ErrNotLoaded)
		}
		return nil, flashsale.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("order=%s: %w", id, err)
	}
	if owner != "" && o.UserID != owner {
		return nil, flashsale.ErrNotFound
	}
	return o, nil
}

// storeOrder reads an order from the database with at most half the time
// the caller has left, so that when the database does not answer there is
// still time to answer from the engine (pending) instead of a 503.
func (s *Service) storeOrder(ctx context.Context, id string) (*flashsale.Order, error) {
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(d)/2)
		defer cancel()
	}
	return s.store.Order(ctx, id)
}

func orderOf(sale *flashsale.Sale, r *flashsale.Reservation, status flashsale.OrderStatus) *flashsale.Order {
	o := &flashsale.Order{
		ID: r.OrderID, SaleID: r.SaleID, UserID: r.UserID, IdempotencyKey: r.IdempotencyKey,
		Status: status, FirstNight: r.FirstNight, CheckIn: sale.Nights[r.FirstNight].Date,
		Nights: r.Nights, Rooms: r.Rooms, Amount: r.Amount, Currency: sale.Currency,
		HoldExpiresAt: r.HoldExpiresAt,
	}
	if sale.Nights[r.FirstNight].Time != "" {
		o.Slot = sale.SlotName(r.FirstNight)
	}
	return o
}

// Cancel ends a held order and gives its units back. Cancelling a cancelled
// order is a no-op.
func (s *Service) Cancel(ctx context.Context, u flashsale.User, id string) (*flashsale.Order, error) {
	o, err := s.Order(ctx, u, id)
	if err != nil {
		return nil, err
	}
	switch o.Status {
	case flashsale.OrderCancelled:
		return o, nil
	case flashsale.OrderHeld:
	case flashsale.OrderPending:
		return nil, flashsale.ErrOrderPending
	default:
		return nil, flashsale.Errorf(flashsale.EConflict, "a %s order cannot be cancelled", o.Status)
	}
	o, err = s.store.Transition(ctx, id, flashsale.OrderHeld, flashsale.OrderCancelled, "", s.now())
	if errors.Is(err, flashsale.ErrStale) {
		return s.Cancel(ctx, u, id) // expired or paid meanwhile: answer from the new state
	}
	if err != nil {
		return nil, fmt.Errorf("cancel order=%s: %w", id, err)
	}
	s.log.Info("order cancelled", "sale_id", o.SaleID, "order_id", o.ID, "request_id", flashsale.RequestID(ctx))
	s.release(ctx, o)
	return o, nil
}

// release gives an ended hold's units back to the engine. The database
// transition already happened exactly once; if this call fails the engine
// undersells until it is rebuilt, it never oversells.
//
// A late payment can retake the order between that transition and this
// Release: its engine Retake found the reservation still active and did
// nothing, so this Release would hand a paid order's rooms back to the
// engine. Reading the order again after the Release and retaking it if it
// is active again closes that window; retake does the mirror check.
func (p *parts) release(ctx context.Context, o *flashsale.Order) {
	if err := p.engine.Release(ctx, o.SaleID, o.ID); err != nil {
		p.log.Error("release units", "sale_id", o.SaleID, "order_id", o.ID, "err", err)
		return
	}
	now, err := p.store.Order(ctx, o.ID)
	if err != nil {
		p.log.Error("recheck released order", "sale_id", o.SaleID, "order_id", o.ID, "err", err)
		return
	}
	if now.Status.Active() {
		p.reactivate(ctx, now)
	}
}

// reactivate makes the engine count an order the database says is active
// again (Retake of an active reservation does nothing).
func (p *parts) reactivate(ctx context.Context, o *flashsale.Order) {
	if err := p.engine.Retake(ctx, o.SaleID, o.ID); err != nil {
		// The rooms went to someone else in between: the database's guard
		// refuses that order, and a rebuild realigns the engine.
		p.log.Error("retake paid order after a release", "sale_id", o.SaleID, "order_id", o.ID, "err", err)
	}
}

// MarkPaid records the payment platform's confirmation. The same
// payment_ref again is the same answer; another one on a paid order is
// AlreadyPaid (naming the first), a cancelled order ErrOrderCancelled: in
// both the platform refunds. If the hold already expired it tries to take
// the units again, and answers ErrHoldExpired when they are gone.
func (s *Service) MarkPaid(ctx context.Context, id, paymentRef string) (*flashsale.Order, error) {
	if !validID(id) {
		return nil, flashsale.ErrNotFound
	}
	for range 8 {
		o, err := s.store.Order(ctx, id)
		if errors.Is(err, flashsale.ErrNotFound) {
			// Not in the database: in the queue (pending), or unknown. Only
			// an engine that answers can tell; one that does not (Redis
			// slow under a storm, in CI) or that lost its records (a
			// rebuild) is a 503 to retry, never a 404 for an order a guest
			// got a 202 for: the platform would refund a room it sold.
			r, rerr := s.engine.Reservation(ctx, id)
			switch {
			case rerr == nil && r.Active:
				return nil, flashsale.ErrOrderPending
			case flashsale.Unreachable(rerr):
				return nil, fmt.Errorf("paid order=%s: %w", id, rerr)
			case s.healing.rebuilding(ctx):
				return nil, fmt.Errorf("paid order=%s: %w", id, flashsale.ErrNotLoaded)
			}
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("paid order=%s: %w", id, err)
		}
		switch o.Status {
		case flashsale.OrderPaid:
			if o.PaymentRef != paymentRef {
				return nil, flashsale.AlreadyPaid(o.PaymentRef)
			}
			return o, nil
		case flashsale.OrderHeld:
			o, err = s.store.Transition(ctx, id, flashsale.OrderHeld, flashsale.OrderPaid, paymentRef, s.now())
		case flashsale.OrderCancelled:
			return nil, flashsale.ErrOrderCancelled
		case flashsale.OrderExpired:
			o, err = s.retake(ctx, o, paymentRef)
		default:
			return nil, flashsale.Errorf(flashsale.EConflict, "a %s order cannot be paid", o.Status)
		}
		if errors.Is(err, flashsale.ErrStale) {
			continue // the reaper or another confirmation moved it: look again
		}
		if err != nil {
			return nil, err
		}
		s.log.Info("order paid", "sale_id", o.SaleID, "order_id", o.ID, "request_id", flashsale.RequestID(ctx))
		return o, nil
	}
	return nil, fmt.Errorf("paid order=%s: %w", id, flashsale.ErrStale)
}

// retake sells a released order's units again to its buyer, engine first
// (through engineWork, as a purchase's reserve) and then the database's guard.
func (s *Service) retake(ctx context.Context, o *flashsale.Order, paymentRef string) (*flashsale.Order, error) {
	s.engineWork.enter()
	defer s.engineWork.leave() // the engine retakes before the database does (see Purchase)
	switch s.sells() {
	case flashsale.SellingDB:
		return s.retakeDirect(ctx, o, paymentRef)
	case flashsale.SellingNone:
		return nil, errSwitching
	}
	if err := s.engine.Retake(ctx, o.SaleID, o.ID); err != nil {
		if errors.Is(err, flashsale.ErrNotLoaded) {
			if sale, serr := s.sales.get(ctx, o.SaleID); serr == nil && s.now().Before(sale.EndsAt) {
				// The engine lost a live sale: answer 503 until the
				// rebuild is done, not a refund.
				s.healing.wakeHeal()
				return nil, err
			}
			return nil, flashsale.ErrHoldExpired
		}
		if errors.Is(err, flashsale.ErrSoldOut) || errors.Is(err, flashsale.ErrLimitExceeded) {
			return nil, flashsale.ErrHoldExpired
		}
		return nil, fmt.Errorf("retake order=%s: %w", o.ID, err)
	}
	paid, err := s.store.Transition(ctx, o.ID, o.Status, flashsale.OrderPaid, paymentRef, s.now())
	if err != nil {
		s.release(ctx, o)
		if errors.Is(err, flashsale.ErrSoldOut) || errors.Is(err, flashsale.ErrLimitExceeded) {
			return nil, flashsale.ErrHoldExpired
		}
		return nil, err
	}
	// The Retake above did nothing if the reaper (or a cancel) that ended
	// the hold had not yet released the engine's reservation; if it released
	// it since, the order is paid but not counted. Retaking again now that
	// the database says paid closes that window (see release).
	s.reactivate(ctx, paid)
	return paid, nil
}
