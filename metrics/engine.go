package metrics

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
)

// Engine wraps a stock engine, timing and counting every call that can
// do I/O. SoldOut goes straight through: it is the hot path's lock-free,
// allocation-free answer, and timing it would cost more than it does.
func (m *Metrics) Engine(next flashsale.StockEngine) flashsale.StockEngine {
	op := func(name string) *call { return newCall(m.engineDur, m.engineCalls, name) }
	e := &engine{next: next,
		load: op("load"), reserve: op("reserve"), reserveSpending: op("reserve_spending"),
		release: op("release"), retake: op("retake"), lookup: op("lookup"),
		reservation: op("reservation"), available: op("available"), availableOf: op("available_of"), missing: op("missing"), forget: op("forget"), adjustStock: op("adjust_stock"), stayRules: op("set_stay_rules"), retain: op("retain"), snapshot: op("snapshot"),
		ping: op("ping"), confirm: op("outbox_confirm"), unconfirmed: op("outbox_unconfirmed"),
	}
	w := flashsale.StockEngine{Reserver: e, StockKeeper: e, Breaker: next.Breaker}
	if next.Outbox != nil {
		w.Outbox = &outbox{e: e, next: next.Outbox}
	}
	return w
}

type engine struct {
	next flashsale.StockEngine

	load, reserve, reserveSpending, release, retake, lookup *call
	reservation, available, snapshot, ping, adjustStock     *call
	stayRules, missing, forget, availableOf, retain         *call
	confirm, unconfirmed                                    *call
}

func (e *engine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	start := time.Now()
	err := e.next.Load(ctx, snap, now)
	e.load.done(start, err)
	return err
}

func (e *engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	start := time.Now()
	id, err := e.next.Reserve(ctx, r)
	e.reserve.done(start, err)
	return id, err
}

func (e *engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	start := time.Now()
	id, err := e.next.ReserveSpending(ctx, r, token, expires)
	e.reserveSpending.done(start, err)
	return id, err
}

func (e *engine) Release(ctx context.Context, saleID, orderID string) error {
	start := time.Now()
	err := e.next.Release(ctx, saleID, orderID)
	e.release.done(start, err)
	return err
}

func (e *engine) Retake(ctx context.Context, saleID, orderID string) error {
	start := time.Now()
	err := e.next.Retake(ctx, saleID, orderID)
	e.retake.done(start, err)
	return err
}

func (e *engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	start := time.Now()
	id, err := e.next.Lookup(ctx, saleID, userID, key)
	e.lookup.done(start, err)
	return id, err
}

func (e *engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	start := time.Now()
	r, err := e.next.Reservation(ctx, orderID)
	e.reservation.done(start, err)
	return r, err
}

func (e *engine) AdjustStock(ctx context.Context, saleID string, night, delta int) error {
	start := time.Now()
	err := e.next.AdjustStock(ctx, saleID, night, delta)
	e.adjustStock.done(start, err)
	return err
}

func (e *engine) SetStayRules(ctx context.Context, saleID string, rules []flashsale.StayRules) error {
	start := time.Now()
	err := e.next.SetStayRules(ctx, saleID, rules)
	e.stayRules.done(start, err)
	return err
}

func (e *engine) Retain(ctx context.Context, sale *flashsale.Sale) error {
	start := time.Now()
	err := e.next.Retain(ctx, sale)
	e.retain.done(start, err)
	return err
}

func (e *engine) Available(ctx context.Context, saleID string) ([]int, error) {
	start := time.Now()
	a, err := e.next.Available(ctx, saleID)
	e.available.done(start, err)
	return a, err
}

func (e *engine) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	start := time.Now()
	a, err := e.next.AvailableOf(ctx, saleIDs)
	e.availableOf.done(start, err)
	return a, err
}

func (e *engine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	start := time.Now()
	m, err := e.next.Missing(ctx, saleIDs)
	e.missing.done(start, err)
	return m, err
}

func (e *engine) Forget(ctx context.Context, saleID string) error {
	start := time.Now()
	err := e.next.Forget(ctx, saleID)
	e.forget.done(start, err)
	return err
}

func (e *engine) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	start := time.Now()
	s, err := e.next.Snapshot(ctx, saleID)
	e.snapshot.done(start, err)
	return s, err
}

func (e *engine) Shard(saleID string) string { return e.next.Shard(saleID) }

func (e *engine) SoldOut(saleID string, firstNight, nights int) bool {
	return e.next.SoldOut(saleID, firstNight, nights)
}

func (e *engine) Ping(ctx context.Context) error {
	start := time.Now()
	err := e.next.Ping(ctx)
	e.ping.done(start, err)
	return err
}

type outbox struct {
	e    *engine
	next flashsale.Outbox
}

func (o *outbox) Confirm(ctx context.Context, saleID, orderID string) error {
	start := time.Now()
	err := o.next.Confirm(ctx, saleID, orderID)
	o.e.confirm.done(start, err)
	return err
}

func (o *outbox) Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]flashsale.Reservation, error) {
	start := time.Now()
	rs, err := o.next.Unconfirmed(ctx, olderThan, limit)
	o.e.unconfirmed.done(start, err)
	return rs, err
}
