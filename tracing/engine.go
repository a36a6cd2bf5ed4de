package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// Engine wraps a stock engine so each call made on behalf of a traced
// request is a span, "<system> <operation>": system "redis" makes them
// client spans with db.system.name redis (one Lua script or one pipeline
// each), anything else ("inmem") internal ones. SoldOut, Shard and Ping
// pass straight through: the sold-out path's lock-free, allocation-free
// answer, a name computed without I/O, and the readiness probe, each by
// name: a method added to a role does not compile until it is traced here
// or passed through on purpose. The engine's outbox is wrapped the same
// way (nil when it keeps none). Off, it returns e itself.
func (t *Tracing) Engine(e flashsale.StockEngine, system string) flashsale.StockEngine {
	if t == nil {
		return e
	}
	w := &engine{next: e, calls: calls{t: t, system: system, kind: trace.SpanKindInternal}}
	if system == "redis" {
		w.kind, w.attrs = trace.SpanKindClient, []attribute.KeyValue{semconv.DBSystemNameRedis}
	}
	roles := flashsale.StockEngine{Reserver: w, StockKeeper: w, Breaker: e.Breaker}
	if e.Outbox != nil {
		roles.Outbox = &outbox{Outbox: e.Outbox, e: w}
	}
	return roles
}

type engine struct {
	next flashsale.StockEngine
	calls
}

func (e *engine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	return run(&e.calls, ctx, "load", func(ctx context.Context) error { return e.next.Load(ctx, snap, now) },
		saleKey.String(snap.Sale.ID))
}

func (e *engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	return call(&e.calls, ctx, "reserve", func(ctx context.Context) (string, error) { return e.next.Reserve(ctx, r) },
		saleKey.String(r.SaleID), orderKey.String(r.OrderID), requestKey.String(flashsale.RequestID(ctx)))
}

func (e *engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	return call(&e.calls, ctx, "reserve_spending", func(ctx context.Context) (string, error) {
		return e.next.ReserveSpending(ctx, r, token, expires)
	}, saleKey.String(r.SaleID), orderKey.String(r.OrderID), requestKey.String(flashsale.RequestID(ctx)))
}

func (e *engine) Release(ctx context.Context, saleID, orderID string) error {
	return run(&e.calls, ctx, "release", func(ctx context.Context) error { return e.next.Release(ctx, saleID, orderID) },
		saleKey.String(saleID), orderKey.String(orderID))
}

func (e *engine) AdjustStock(ctx context.Context, saleID string, night, delta int) error {
	return run(&e.calls, ctx, "adjust_stock", func(ctx context.Context) error {
		return e.next.AdjustStock(ctx, saleID, night, delta)
	}, saleKey.String(saleID))
}

func (e *engine) SetStayRules(ctx context.Context, saleID string, rules []flashsale.StayRules) error {
	return run(&e.calls, ctx, "set_stay_rules", func(ctx context.Context) error {
		return e.next.SetStayRules(ctx, saleID, rules)
	}, saleKey.String(saleID))
}

func (e *engine) Retain(ctx context.Context, sale *flashsale.Sale) error {
	return run(&e.calls, ctx, "retain", func(ctx context.Context) error { return e.next.Retain(ctx, sale) }, saleKey.String(sale.ID))
}

func (e *engine) Forget(ctx context.Context, saleID string) error {
	return run(&e.calls, ctx, "forget", func(ctx context.Context) error { return e.next.Forget(ctx, saleID) }, saleKey.String(saleID))
}

func (e *engine) Retake(ctx context.Context, saleID, orderID string) error {
	return run(&e.calls, ctx, "retake", func(ctx context.Context) error { return e.next.Retake(ctx, saleID, orderID) },
		saleKey.String(saleID), orderKey.String(orderID))
}

func (e *engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	return call(&e.calls, ctx, "lookup", func(ctx context.Context) (string, error) {
		return e.next.Lookup(ctx, saleID, userID, key)
	}, saleKey.String(saleID))
}

func (e *engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	return call(&e.calls, ctx, "reservation", func(ctx context.Context) (*flashsale.Reservation, error) {
		return e.next.Reservation(ctx, orderID)
	}, orderKey.String(orderID))
}

func (e *engine) Available(ctx context.Context, saleID string) ([]int, error) {
	return call(&e.calls, ctx, "available", func(ctx context.Context) ([]int, error) { return e.next.Available(ctx, saleID) },
		saleKey.String(saleID))
}

func (e *engine) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	return call(&e.calls, ctx, "available_of", func(ctx context.Context) (map[string][]int, error) {
		return e.next.AvailableOf(ctx, saleIDs)
	}, semconv.DBOperationBatchSize(len(saleIDs)))
}

func (e *engine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	return call(&e.calls, ctx, "missing", func(ctx context.Context) ([]string, error) { return e.next.Missing(ctx, saleIDs) },
		semconv.DBOperationBatchSize(len(saleIDs)))
}

func (e *engine) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	return call(&e.calls, ctx, "snapshot", func(ctx context.Context) (*flashsale.StockSnapshot, error) {
		return e.next.Snapshot(ctx, saleID)
	}, saleKey.String(saleID))
}

func (e *engine) SoldOut(saleID string, firstNight, nights int) bool {
	return e.next.SoldOut(saleID, firstNight, nights)
}

func (e *engine) Shard(saleID string) string { return e.next.Shard(saleID) }

func (e *engine) Ping(ctx context.Context) error { return e.next.Ping(ctx) }

// outbox traces the confirm that follows a publish (the purchase's last
// Redis call) and the relay's scan.
type outbox struct {
	flashsale.Outbox
	e *engine
}

func (o *outbox) Confirm(ctx context.Context, saleID, orderID string) error {
	return run(&o.e.calls, ctx, "outbox_confirm", func(ctx context.Context) error { return o.Outbox.Confirm(ctx, saleID, orderID) },
		saleKey.String(saleID), orderKey.String(orderID))
}

func (o *outbox) Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]flashsale.Reservation, error) {
	return call(&o.e.calls, ctx, "outbox_unconfirmed", func(ctx context.Context) ([]flashsale.Reservation, error) {
		return o.Outbox.Unconfirmed(ctx, olderThan, limit)
	})
}
