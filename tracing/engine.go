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
// answer, a name computed without I/O, and the readiness probe. The engine
// is embedded, so a method added to flashsale.StockEngine later would pass
// through untraced too: TestWrapsEveryMethod fails until it is traced here
// or named a pass-through. Outbox returns the engine's outbox wrapped the same
// way (nil when it keeps none). Off, it returns e itself.
func (t *Tracing) Engine(e flashsale.StockEngine, system string) flashsale.StockEngine {
	if t == nil {
		return e
	}
	w := &engine{StockEngine: e, calls: calls{t: t, system: system, kind: trace.SpanKindInternal}}
	if system == "redis" {
		w.kind, w.attrs = trace.SpanKindClient, []attribute.KeyValue{semconv.DBSystemNameRedis}
	}
	if ob := e.Outbox(); ob != nil {
		w.outbox = &outbox{Outbox: ob, e: w}
	}
	return w
}

type engine struct {
	flashsale.StockEngine
	calls
	outbox flashsale.Outbox // nil when the engine keeps none
}

var _ flashsale.StockEngine = (*engine)(nil)

func (e *engine) Load(ctx context.Context, snap *flashsale.StockSnapshot, now time.Time) error {
	return run(&e.calls, ctx, "load", func(ctx context.Context) error { return e.StockEngine.Load(ctx, snap, now) },
		saleKey.String(snap.Sale.ID))
}

func (e *engine) Reserve(ctx context.Context, r *flashsale.Reservation) (string, error) {
	return call(&e.calls, ctx, "reserve", func(ctx context.Context) (string, error) { return e.StockEngine.Reserve(ctx, r) },
		saleKey.String(r.SaleID), orderKey.String(r.OrderID), requestKey.String(flashsale.RequestID(ctx)))
}

func (e *engine) ReserveSpending(ctx context.Context, r *flashsale.Reservation, token string, expires time.Time) (string, error) {
	return call(&e.calls, ctx, "reserve_spending", func(ctx context.Context) (string, error) {
		return e.StockEngine.ReserveSpending(ctx, r, token, expires)
	}, saleKey.String(r.SaleID), orderKey.String(r.OrderID), requestKey.String(flashsale.RequestID(ctx)))
}

func (e *engine) Release(ctx context.Context, saleID, orderID string) error {
	return run(&e.calls, ctx, "release", func(ctx context.Context) error { return e.StockEngine.Release(ctx, saleID, orderID) },
		saleKey.String(saleID), orderKey.String(orderID))
}

func (e *engine) AdjustStock(ctx context.Context, saleID string, night, delta int) error {
	return run(&e.calls, ctx, "adjust_stock", func(ctx context.Context) error {
		return e.StockEngine.AdjustStock(ctx, saleID, night, delta)
	}, saleKey.String(saleID))
}

func (e *engine) Retake(ctx context.Context, saleID, orderID string) error {
	return run(&e.calls, ctx, "retake", func(ctx context.Context) error { return e.StockEngine.Retake(ctx, saleID, orderID) },
		saleKey.String(saleID), orderKey.String(orderID))
}

func (e *engine) Lookup(ctx context.Context, saleID, userID, key string) (string, error) {
	return call(&e.calls, ctx, "lookup", func(ctx context.Context) (string, error) {
		return e.StockEngine.Lookup(ctx, saleID, userID, key)
	}, saleKey.String(saleID))
}

func (e *engine) Reservation(ctx context.Context, orderID string) (*flashsale.Reservation, error) {
	return call(&e.calls, ctx, "reservation", func(ctx context.Context) (*flashsale.Reservation, error) {
		return e.StockEngine.Reservation(ctx, orderID)
	}, orderKey.String(orderID))
}

func (e *engine) Available(ctx context.Context, saleID string) ([]int, error) {
	return call(&e.calls, ctx, "available", func(ctx context.Context) ([]int, error) { return e.StockEngine.Available(ctx, saleID) },
		saleKey.String(saleID))
}

func (e *engine) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	return call(&e.calls, ctx, "snapshot", func(ctx context.Context) (*flashsale.StockSnapshot, error) {
		return e.StockEngine.Snapshot(ctx, saleID)
	}, saleKey.String(saleID))
}

func (e *engine) Outbox() flashsale.Outbox { return e.outbox }

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
