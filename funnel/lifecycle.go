package funnel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// The operators' lifecycle of a sale: edits, pause, close and stock
// changes. The database is the truth about a sale (its row and revision),
// the engine about what is buyable; this file keeps the two in step.
//
// A sale used to be cached for good (it never changed); now every change
// bumps its revision, and each instance's refresh loop reads the current
// sales every SaleRefreshInterval and swaps in those whose revision moved.
// That is the cross-instance invalidation: a poll of one small query, which
// cannot miss a change the way a pub/sub message lost in a reconnect
// would. The instance that made the change swaps its copy at once; stock
// itself needs no invalidation, as the engine is shared and its sold-out
// flags follow the broadcast.

// updateRetries bounds the read-modify-write loop of a change that meets a
// concurrent one on another instance (a stock change bumps the revision
// too); on one instance Service.lifeMu serialises them. Lock order:
// locks.txt.
const updateRetries = 8

var errEditEnded = flashsale.Errorf(flashsale.EEnded, "the sale has ended; it can no longer change")

// ListSales lists sales for the operators.
func (s *Service) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.SaleView, string, error) {
	q.Now = s.now()
	q.Limit = pageLimit(q.Limit)
	sales, err := s.store.ListSales(ctx, q)
	if err != nil {
		return nil, "", err
	}
	views := make([]*flashsale.SaleView, 0, len(sales))
	for _, sale := range sales {
		v, err := s.adminView(ctx, sale)
		if err != nil {
			return nil, "", err
		}
		if q.Status == "" || v.Status == q.Status {
			views = append(views, v)
		}
	}
	var next string
	if len(sales) == q.Limit {
		next = sales[len(sales)-1].ID
	}
	return views, next, nil
}

// SaleOrders lists a sale's orders for the operators.
func (s *Service) SaleOrders(ctx context.Context, id string, q flashsale.OrderQuery) ([]*flashsale.Order, string, error) {
	if _, err := s.sales.get(ctx, id); err != nil {
		return nil, "", err
	}
	q.Limit = pageLimit(q.Limit)
	orders, err := s.store.SaleOrders(ctx, id, q)
	if err != nil {
		return nil, "", err
	}
	var next string
	if len(orders) == q.Limit {
		next = orders[len(orders)-1].ID
	}
	return orders, next, nil
}

// SaleChanges returns a sale's change log.
func (s *Service) SaleChanges(ctx context.Context, id string) ([]flashsale.SaleChange, error) {
	if _, err := s.sales.get(ctx, id); err != nil {
		return nil, err
	}
	return s.store.SaleChanges(ctx, id)
}

func pageLimit(n int) int {
	if n <= 0 {
		return flashsale.PageDefault
	}
	return min(n, flashsale.PageMax)
}

// UpdateSale applies an operator's edit. Before the start an edit of what
// the engine holds (nights, the per-user limit) reloads the sale into it:
// nothing has been bought yet, so the reload loses nothing. A later end
// tells the engine to keep the sale longer (Retain).
func (s *Service) UpdateSale(ctx context.Context, id string, p flashsale.SalePatch) (*flashsale.SaleView, error) {
	return s.change(ctx, id, flashsale.ChangeEdit, func(sale *flashsale.Sale, now time.Time) (*flashsale.Sale, string, error) {
		if !now.Before(sale.EndsAt) {
			return nil, "", errEditEnded
		}
		next, changed, err := p.Apply(sale, now)
		if err != nil || len(changed) == 0 {
			return nil, "", err
		}
		if next.WaitingRoom != nil && s.wait.queue == nil {
			return nil, "", errNoQueue
		}
		if !slices.Equal(sale.Nights, next.Nights) || !sale.StartsAt.Equal(next.StartsAt) || sale.TimeZone != next.TimeZone {
			if err := next.CheckNights(now); err != nil {
				return nil, "", err
			}
		}
		return next, strings.Join(changed, ", "), nil
	}, func(ctx context.Context, prev, next *flashsale.Sale) error {
		if !slices.Equal(prev.Nights, next.Nights) || prev.PerUserLimit != next.PerUserLimit || !prev.StartsAt.Equal(next.StartsAt) {
			// Apply refused these once the sale started at its now; the
			// engine refuses a reload of a started sale as well.
			return s.load(ctx, next, true)
		}
		if next.EndsAt.Add(next.HoldDuration()).After(prev.EndsAt.Add(prev.HoldDuration())) {
			// A later end (or a longer hold) mid-sale: the engine keeps
			// the sale that much longer. Before, the Redis keys still
			// expired a day after the old end, and the sale closed for a
			// rebuild in the middle of its new hours. If this fails,
			// the scheduled audit retains it (auditor.retain).
			if err := s.engine.Retain(ctx, next); err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
				return err
			}
		}
		return nil
	})
}

// PauseSale pauses or resumes a sale.
func (s *Service) PauseSale(ctx context.Context, id string, paused bool) (*flashsale.SaleView, error) {
	kind := flashsale.ChangeResume
	if paused {
		kind = flashsale.ChangePause
	}
	return s.change(ctx, id, kind, func(sale *flashsale.Sale, now time.Time) (*flashsale.Sale, string, error) {
		if !now.Before(sale.EndsAt) {
			return nil, "", errEditEnded
		}
		if sale.Paused == paused {
			return nil, "", nil
		}
		next := *sale
		next.Paused = paused
		return &next, kind, nil
	}, nil)
}

// CloseSale ends a sale now: its ends_at becomes now (and an upcoming
// sale's starts_at just before it). Holds stay payable until they expire.
func (s *Service) CloseSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	return s.change(ctx, id, flashsale.ChangeClose, func(sale *flashsale.Sale, now time.Time) (*flashsale.Sale, string, error) {
		if !now.Before(sale.EndsAt) {
			return nil, "", nil
		}
		next := *sale
		next.EndsAt = now.UTC().Truncate(time.Millisecond)
		if !next.StartsAt.Before(next.EndsAt) {
			next.StartsAt = next.EndsAt.Add(-time.Millisecond)
		}
		return &next, "ends_at " + next.EndsAt.Format(time.RFC3339Nano), nil
	}, nil)
}

// change is the read-modify-write of a sale's row: edit returns the sale
// it should become and the change log's detail, or nil for no change. It
// reads the database (never the cache, which may be a refresh behind) and
// retries when a concurrent change moved the revision; after the write
// it runs then (the engine's part) and caches the new sale.
func (s *Service) change(ctx context.Context, id, kind string,
	edit func(sale *flashsale.Sale, now time.Time) (*flashsale.Sale, string, error),
	then func(ctx context.Context, prev, next *flashsale.Sale) error) (*flashsale.SaleView, error) {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	return s.changeLocked(ctx, id, kind, edit, then)
}

// changeLocked is change with lifeMu held by the caller.
func (s *Service) changeLocked(ctx context.Context, id, kind string,
	edit func(sale *flashsale.Sale, now time.Time) (*flashsale.Sale, string, error),
	then func(ctx context.Context, prev, next *flashsale.Sale) error) (*flashsale.SaleView, error) {
	for range updateRetries {
		sale, err := s.store.Sale(ctx, id)
		if err != nil {
			return nil, err
		}
		now := s.now()
		next, detail, err := edit(sale, now)
		if err != nil {
			return nil, err
		}
		if next == nil {
			s.sales.putNewer(sale)
			return s.adminView(ctx, sale)
		}
		c := flashsale.SaleChange{SaleID: id, At: now.UTC().Truncate(time.Millisecond), Kind: kind, Detail: detail}
		switch err := s.store.UpdateSale(ctx, next, sale.Revision, c); {
		case errors.Is(err, flashsale.ErrStale):
			continue
		case err != nil:
			return nil, fmt.Errorf("%s sale=%s: %w", kind, id, err)
		}
		if then != nil {
			if err := then(ctx, sale, next); err != nil {
				// The row changed; the engine did not follow. The audit
				// reports the difference and its repair reloads the sale.
				s.log.Error("sale changed in the database but not in the stock engine", "sale_id", id, "change", kind, "err", err)
				return nil, fmt.Errorf("%s sale=%s: the change is saved, but the stock engine did not take it (the audit's repair will): %w", kind, id, err)
			}
		}
		s.sales.putNewer(next)
		s.log.Info("sale changed", "sale_id", id, "change", kind, "detail", detail, "revision", next.Revision)
		return s.savedView(ctx, next)
	}
	return nil, flashsale.Errorf(flashsale.EConflict, "the sale kept changing meanwhile; try again")
}

// AdjustStock adds or takes back rooms of one night. The order of the two
// steps keeps the engine at or below the database, so a failure between
// them can only undersell (rooms nobody can buy until the audit's repair
// rebuilds the sale), never sell a room the database does not have:
//   - adding: the database first, then the engine;
//   - taking back: the engine first (it knows what is free, in-flight
//     purchases included), then the database's guarded update; if the
//     database refuses, the engine gets its units back.
//
// While the breaker sells from the database the engine is not the one
// selling, so stock changes wait (503) for the engine mode.
func (s *Service) AdjustStock(ctx context.Context, id string, d flashsale.StockDelta) (*flashsale.SaleView, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	sale, err := s.store.Sale(ctx, id)
	if err != nil {
		return nil, err
	}
	night := slices.IndexFunc(sale.Nights, func(n flashsale.Night) bool { return n.Date == d.Date && n.Time == d.Time })
	switch {
	case night < 0 && d.Time != "":
		return nil, flashsale.Errorf(flashsale.EInvalid, "%sT%s is not a slot of this sale", d.Date, d.Time)
	case night < 0 && sale.Timed():
		return nil, flashsale.Errorf(flashsale.EInvalid, "name the slot: time is required for a %s sale's stock", sale.KindOf())
	case night < 0:
		return nil, flashsale.Errorf(flashsale.EInvalid, "%s is not a night of this sale", d.Date)
	}
	now := s.now()
	if !now.Before(sale.EndsAt) {
		return nil, errEditEnded
	}
	if !s.seller().engineMode() {
		return nil, flashsale.Errorf(flashsale.EUnavailable, "stock changes wait while the breaker sells from the database; retry when it is back on the stock engine")
	}
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	// A rebuild in this process (which holds engineWork) must not land
	// between the two steps: it would count the change twice or not at
	// all.
	s.engineWork.enter()
	defer s.engineWork.leave()
	c := flashsale.SaleChange{SaleID: id, At: now.UTC().Truncate(time.Millisecond), Kind: flashsale.ChangeStock, Detail: d.String()}
	if d.Delta > 0 {
		if _, err := s.store.AdjustStock(ctx, id, d, c); err != nil {
			return nil, err
		}
		if err := s.engine.AdjustStock(ctx, id, night, d.Delta); err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
			s.log.Error("rooms added in the database but not in the stock engine", "sale_id", id, "night", d.Date, "delta", d.Delta, "err", err)
			return nil, fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EUnavailable,
				"the rooms were added to the database, but the stock engine did not confirm them: do not add them again; they become buyable when the audit's repair rebuilds the sale"), err)
		}
	} else {
		// ErrNotLoaded: nothing in the engine to take from, the
		// database's guard alone decides (a rebuild reads it).
		err := s.engine.AdjustStock(ctx, id, night, d.Delta)
		loaded := !errors.Is(err, flashsale.ErrNotLoaded)
		if err != nil && loaded {
			return nil, err
		}
		if _, err := s.store.AdjustStock(ctx, id, d, c); err != nil {
			if loaded && !flashsale.Unreachable(err) {
				// The database refused for certain: give the units back.
				if gerr := s.engine.AdjustStock(ctx, id, night, -d.Delta); gerr != nil {
					s.log.Error("rooms taken from the stock engine and not given back", "sale_id", id, "night", d.Date, "rooms", -d.Delta, "err", gerr)
				}
			} else if loaded {
				// Perhaps committed: giving the units back could sell a
				// room the database no longer has. Leave the engine
				// short; the audit's repair settles it.
				s.log.Error("rooms taken from the stock engine; the database's outcome is unknown", "sale_id", id, "night", d.Date, "rooms", -d.Delta, "err", err)
			}
			return nil, err
		}
	}
	// Saved: from here on nothing may answer as though it were not.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), savedTimeout)
	defer cancel()
	fresh, err := s.store.Sale(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the rooms are changed, but reading the sale back failed (reload it; do not repeat the change): %w", err)
	}
	s.sales.putNewer(fresh)
	s.log.Info("sale stock changed", "sale_id", id, "night", d.Date, "delta", d.Delta, "revision", fresh.Revision)
	return s.savedView(ctx, fresh)
}

// SetNightRules changes one night's stay rules at any time before the
// sale ends (a stop-sell closes the night at once): the database first,
// the truth and the change log, then the engine, which judges every
// reserve that starts after it returns. Rooms already held or sold stay
// with their guests. The engine is told the database's rules even when
// they did not change, so repeating a change the engine missed (the
// error below) puts it right.
func (s *Service) SetNightRules(ctx context.Context, id, date string, p flashsale.StayRulesPatch) (*flashsale.SaleView, error) {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.engineWork.enter() // no rebuild in this process between the two steps (as AdjustStock)
	defer s.engineWork.leave()
	var saved *flashsale.Sale
	view, err := s.changeLocked(ctx, id, flashsale.ChangeRules, func(sale *flashsale.Sale, now time.Time) (*flashsale.Sale, string, error) {
		if !now.Before(sale.EndsAt) {
			return nil, "", errEditEnded
		}
		i := slices.IndexFunc(sale.Nights, func(n flashsale.Night) bool { return n.Date == date })
		if i < 0 {
			return nil, "", flashsale.Errorf(flashsale.EInvalid, "%s is not a night of this sale", date)
		}
		saved = sale
		rules := p.Apply(sale.Nights[i].StayRules)
		if rules == sale.Nights[i].StayRules {
			return nil, "", nil
		}
		next := *sale
		next.Nights = slices.Clone(sale.Nights)
		next.Nights[i].StayRules = rules
		if err := next.Validate(); err != nil {
			return nil, "", err
		}
		saved = &next
		return &next, date + ": " + rules.String(), nil
	}, nil)
	if err != nil {
		return nil, err
	}
	if err := s.engine.SetStayRules(ctx, id, saved.StayRules()); err != nil && !errors.Is(err, flashsale.ErrNotLoaded) {
		// ErrNotLoaded: the load reads the rules from the database.
		s.log.Error("stay rules saved in the database but not in the stock engine", "sale_id", id, "night", date, "err", err)
		return nil, fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EUnavailable,
			"the rules are saved, but the stock engine did not take them: repeat the change to apply them"), err)
	}
	return view, nil
}

// DeleteSale removes a test sale (the store refuses a real one). This
// instance forgets it at once, the in-process engine too (its orders went
// with the sale); the others when their refresh finds it no longer
// current though not due to end, as after a close: nothing can buy from a
// sale that is not found.
func (s *Service) DeleteSale(ctx context.Context, id string) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if err := s.store.DeleteSale(ctx, id); err != nil {
		return err
	}
	s.sales.forget(id)
	s.admit.forget(id)
	s.gate.forget(id)
	// The in-process engine lets it go now. One the instances share
	// (Redis, fenced) keeps it until its keys expire: unloaded there, a
	// sale the other instances still hold live for a moment would look
	// lost to them and start a fenced rebuild.
	if s.healing.fence == nil {
		if err := s.engine.Forget(ctx, id); err != nil {
			s.log.Warn("test sale deleted; the stock engine keeps it", "sale_id", id, "err", err)
		}
	}
	s.log.Info("test sale deleted", "sale_id", id)
	return nil
}
