package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale"
)

// Store wraps a store so each call made on behalf of a traced request or
// order is a client span, "<system> <operation>" (system is the
// db.system.name: mysql, postgresql, sqlite). Migrate and PendingMigrations
// (start-up), Ping (the readiness probe) and Close pass straight through,
// each by name: a method added to a role does not compile until it is
// traced here or passed through on purpose. The boards are not traced;
// the waiting rooms' records are, when s keeps them (Queues nil stays
// nil). Off, it returns s itself.
func (t *Tracing) Store(s flashsale.Store, system string) flashsale.Store {
	if t == nil {
		return s
	}
	w := &store{next: s, calls: calls{t: t, system: system, kind: trace.SpanKindClient,
		attrs: []attribute.KeyValue{semconv.DBSystemNameKey.String(system)}}}
	traced := flashsale.Store{SaleStore: w, OrderStore: w, Books: w, NoticeStore: w, Database: w, Modes: s.Modes, Forces: s.Forces}
	if s.Queues != nil {
		traced.Queues = w
	}
	return traced
}

type store struct {
	next flashsale.Store
	calls
}

func (s *store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	return run(&s.calls, ctx, "create_sale", func(ctx context.Context) error { return s.next.CreateSale(ctx, sale) })
}

func (s *store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	return call(&s.calls, ctx, "sale", func(ctx context.Context) (*flashsale.Sale, error) { return s.next.Sale(ctx, id) },
		saleKey.String(id))
}

func (s *store) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	return call(&s.calls, ctx, "sales", func(ctx context.Context) ([]*flashsale.Sale, error) { return s.next.Sales(ctx, now) })
}

func (s *store) Revisions(ctx context.Context, now time.Time) (map[string]int64, error) {
	return call(&s.calls, ctx, "revisions", func(ctx context.Context) (map[string]int64, error) { return s.next.Revisions(ctx, now) })
}

func (s *store) NightStocksOf(ctx context.Context, saleIDs []string) (map[string][]flashsale.NightStock, error) {
	return call(&s.calls, ctx, "night_stocks_of", func(ctx context.Context) (map[string][]flashsale.NightStock, error) {
		return s.next.NightStocksOf(ctx, saleIDs)
	}, semconv.DBOperationBatchSize(len(saleIDs)))
}

func (s *store) NightStocks(ctx context.Context, saleID string) ([]flashsale.NightStock, error) {
	return call(&s.calls, ctx, "night_stocks", func(ctx context.Context) ([]flashsale.NightStock, error) {
		return s.next.NightStocks(ctx, saleID)
	}, saleKey.String(saleID))
}

// PlaceOrders is the order's database write: the consumer's batch (or the
// group commit's) in one transaction. The span counts the batch and how
// many rows went in held.
func (s *store) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	attrs := []attribute.KeyValue{semconv.DBOperationBatchSize(len(rs))}
	if len(rs) == 1 {
		attrs = append(attrs, saleKey.String(rs[0].SaleID), orderKey.String(rs[0].OrderID))
	}
	ctx, span := s.span(ctx, "place_orders", attrs...)
	results, err := s.next.PlaceOrders(ctx, rs)
	if span != nil && err == nil {
		held := 0
		for _, r := range results {
			if r == nil {
				held++
			}
		}
		span.SetAttributes(heldKey.Int(held))
	}
	end(span, err)
	return results, err
}

func (s *store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	return call(&s.calls, ctx, "order", func(ctx context.Context) (*flashsale.Order, error) { return s.next.Order(ctx, id) },
		orderKey.String(id))
}

func (s *store) OrderByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Order, error) {
	return call(&s.calls, ctx, "order_by_key", func(ctx context.Context) (*flashsale.Order, error) {
		return s.next.OrderByKey(ctx, saleID, userID, key)
	}, saleKey.String(saleID))
}

func (s *store) Transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	return call(&s.calls, ctx, "transition", func(ctx context.Context) (*flashsale.Order, error) {
		return s.next.Transition(ctx, id, from, to, paymentRef, now)
	}, orderKey.String(id), fromKey.String(string(from)), toKey.String(string(to)))
}

func (s *store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]*flashsale.Order, error) {
	return call(&s.calls, ctx, "expire_holds", func(ctx context.Context) ([]*flashsale.Order, error) {
		return s.next.ExpireHolds(ctx, now, limit)
	})
}

func (s *store) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	return call(&s.calls, ctx, "snapshot", func(ctx context.Context) (*flashsale.StockSnapshot, error) {
		return s.next.Snapshot(ctx, saleID)
	}, saleKey.String(saleID))
}

func (s *store) FailOrder(ctx context.Context, r flashsale.Reservation, reason string) error {
	return run(&s.calls, ctx, "fail_order", func(ctx context.Context) error { return s.next.FailOrder(ctx, r, reason) },
		saleKey.String(r.SaleID), orderKey.String(r.OrderID))
}

// The operators' calls: the console and the admin API are traced requests
// too.

func (s *store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	return call(&s.calls, ctx, "list_sales", func(ctx context.Context) ([]*flashsale.Sale, error) { return s.next.ListSales(ctx, q) })
}

func (s *store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	return run(&s.calls, ctx, "update_sale", func(ctx context.Context) error { return s.next.UpdateSale(ctx, sale, rev, c) },
		saleKey.String(sale.ID))
}

func (s *store) AdjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	return call(&s.calls, ctx, "adjust_stock", func(ctx context.Context) (*flashsale.NightStock, error) {
		return s.next.AdjustStock(ctx, saleID, d, c)
	}, saleKey.String(saleID))
}

func (s *store) SaleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	return call(&s.calls, ctx, "sale_changes", func(ctx context.Context) ([]flashsale.SaleChange, error) {
		return s.next.SaleChanges(ctx, saleID)
	}, saleKey.String(saleID))
}

func (s *store) DeleteSale(ctx context.Context, id string) error {
	return run(&s.calls, ctx, "delete_sale", func(ctx context.Context) error { return s.next.DeleteSale(ctx, id) }, saleKey.String(id))
}

func (s *store) SaleOrders(ctx context.Context, saleID string, q flashsale.OrderQuery) ([]*flashsale.Order, error) {
	return call(&s.calls, ctx, "sale_orders", func(ctx context.Context) ([]*flashsale.Order, error) {
		return s.next.SaleOrders(ctx, saleID, q)
	}, saleKey.String(saleID))
}

// The order events' outbox: traced when a caller's context carries a span
// (the dispatchers' own loops carry none, and make none).

func (s *store) ClaimNotices(ctx context.Context, transport, owner string, until time.Time, limit int) (ns []flashsale.Notice, ok bool, err error) {
	ctx, span := s.span(ctx, "claim_notices", transportKey.String(transport))
	ns, ok, err = s.next.ClaimNotices(ctx, transport, owner, until, limit)
	end(span, err)
	return ns, ok, err
}

func (s *store) AckNotices(ctx context.Context, transport, owner string, seq int64) error {
	return run(&s.calls, ctx, "ack_notices", func(ctx context.Context) error { return s.next.AckNotices(ctx, transport, owner, seq) },
		transportKey.String(transport))
}

func (s *store) NoticeCursor(ctx context.Context, transport string) (cursor, last int64, err error) {
	ctx, span := s.span(ctx, "notice_cursor", transportKey.String(transport))
	cursor, last, err = s.next.NoticeCursor(ctx, transport)
	end(span, err)
	return cursor, last, err
}

func (s *store) RecordDeliveries(ctx context.Context, ds []flashsale.Delivery) error {
	return run(&s.calls, ctx, "record_deliveries", func(ctx context.Context) error { return s.next.RecordDeliveries(ctx, ds) })
}

func (s *store) Deliveries(ctx context.Context, q flashsale.DeliveryQuery) ([]flashsale.Delivery, error) {
	return call(&s.calls, ctx, "deliveries", func(ctx context.Context) ([]flashsale.Delivery, error) { return s.next.Deliveries(ctx, q) })
}

func (s *store) PruneOutbox(ctx context.Context, before time.Time, limit int) (notices, deliveries int, err error) {
	ctx, span := s.span(ctx, "prune_outbox")
	notices, deliveries, err = s.next.PruneOutbox(ctx, before, limit)
	end(span, err)
	return notices, deliveries, err
}

// The waiting rooms' records (flashsale.QueueRecords): traced with the
// sale and, for a batch, its size.

func (s *store) RecordPlaces(ctx context.Context, saleID string, places []flashsale.PlaceRecord) error {
	return run(&s.calls, ctx, "record_places", func(ctx context.Context) error {
		return s.next.Queues.RecordPlaces(ctx, saleID, places)
	}, saleKey.String(saleID), semconv.DBOperationBatchSize(len(places)))
}

func (s *store) RecordPassed(ctx context.Context, saleID string, admitted []string, until time.Time, skipped []string) error {
	return run(&s.calls, ctx, "record_passed", func(ctx context.Context) error {
		return s.next.Queues.RecordPassed(ctx, saleID, admitted, until, skipped)
	}, saleKey.String(saleID), semconv.DBOperationBatchSize(len(admitted)+len(skipped)))
}

func (s *store) RecordUse(ctx context.Context, saleID, userID string) error {
	return run(&s.calls, ctx, "record_use", func(ctx context.Context) error {
		return s.next.Queues.RecordUse(ctx, saleID, userID)
	}, saleKey.String(saleID))
}

func (s *store) RecordDraw(ctx context.Context, d flashsale.Draw) error {
	return run(&s.calls, ctx, "record_draw", func(ctx context.Context) error { return s.next.Queues.RecordDraw(ctx, d) },
		saleKey.String(d.SaleID))
}

func (s *store) QueueRecord(ctx context.Context, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	ctx, span := s.span(ctx, "queue_record", saleKey.String(saleID))
	d, places, err := s.next.Queues.QueueRecord(ctx, saleID)
	end(span, err)
	return d, places, err
}

// The attributes that name what a call is about.
var (
	saleKey  = attribute.Key("flashsale.sale.id")
	orderKey = attribute.Key("flashsale.order.id")
	heldKey  = attribute.Key("flashsale.orders.held")
	fromKey  = attribute.Key("flashsale.order.from")
	toKey    = attribute.Key("flashsale.order.to")
	// transportKey names an events transport (webhook, nats, ...).
	transportKey = attribute.Key("flashsale.notice.transport")
	// requestKey is the request id the order's log lines carry, on the
	// spans where an order begins (the reserve), to go from a log line to
	// its trace.
	requestKey = attribute.Key("flashsale.request.id")
)

func (s *store) Migrate(ctx context.Context) error { return s.next.Migrate(ctx) }

func (s *store) PendingMigrations(ctx context.Context) ([]string, error) {
	return s.next.PendingMigrations(ctx)
}

func (s *store) Ping(ctx context.Context) error { return s.next.Ping(ctx) }

func (s *store) Close() error { return s.next.Close() }
