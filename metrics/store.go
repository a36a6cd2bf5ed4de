package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale"
)

// placeResults are the per-reservation results of Store.PlaceOrders.
var placeResults = [...]struct {
	name string
	err  error
}{
	{"held", nil},
	{"duplicate", flashsale.ErrDuplicate},
	{"sold_out", flashsale.ErrSoldOut},
	{"limit_exceeded", flashsale.ErrLimitExceeded},
	{"key_conflict", flashsale.ErrKeyConflict},
	{"not_found", flashsale.ErrNotFound},
	{"invalid", flashsale.ErrInvalid},
	{"other", nil},
}

// Store wraps a store, timing and counting every call, counting each
// reservation PlaceOrders' conditional insert placed or refused, and each
// order paid (the funnel's last step: whichever path paid it, the
// transition to paid happens here exactly once).
func (m *Metrics) Store(next flashsale.Store) flashsale.Store {
	op := func(name string) *call { return newCall(m.dbDur, m.dbCalls, name) }
	s := &store{next: next, m: m,
		createSale: op("create_sale"), sale: op("sale"), sales: op("sales"), revisions: op("revisions"), nightStocks: op("night_stocks"), nightStocksOf: op("night_stocks_of"),
		placeOrders: op("place_orders"), order: op("order"), orderByKey: op("order_by_key"),
		transition: op("transition"), expireHolds: op("expire_holds"), snapshot: op("snapshot"),
		failOrder: op("fail_order"), ping: op("ping"), pendingMigrations: op("pending_migrations"),
		listSales: op("list_sales"), updateSale: op("update_sale"), adjustStock: op("adjust_stock"),
		saleChanges: op("sale_changes"), saleOrders: op("sale_orders"), deleteSale: op("delete_sale"),
		claimNotices: op("claim_notices"), ackNotices: op("ack_notices"), noticeCursor: op("notice_cursor"),
		recordDeliveries: op("record_deliveries"), deliveries: op("deliveries"), pruneOutbox: op("prune_outbox"),
		recordPlaces: op("record_places"), recordPassed: op("record_passed"), recordUse: op("record_use"),
		recordDraw: op("record_draw"), queueRecord: op("queue_record"),
	}
	for i, r := range placeResults {
		s.placed[i] = m.dbPlaced.WithLabelValues(r.name)
	}
	wrapped := flashsale.Store{SaleStore: s, OrderStore: s, Books: s, NoticeStore: s, Database: s, Modes: next.Modes, Forces: next.Forces}
	if next.Queues != nil {
		wrapped.Queues = s
	}
	return wrapped
}

type store struct {
	next flashsale.Store
	m    *Metrics

	createSale, sale, sales, nightStocks, placeOrders, order, orderByKey *call
	revisions, nightStocksOf                                             *call
	transition, expireHolds, snapshot, failOrder, ping                   *call
	listSales, updateSale, adjustStock, saleChanges, saleOrders          *call
	deleteSale                                                           *call
	claimNotices, ackNotices, noticeCursor, recordDeliveries, deliveries *call
	pruneOutbox, pendingMigrations                                       *call
	recordPlaces, recordPassed, recordUse, recordDraw, queueRecord       *call
	placed                                                               [len(placeResults)]prometheus.Counter
}

func (s *store) CreateSale(ctx context.Context, sale *flashsale.Sale) error {
	start := time.Now()
	err := s.next.CreateSale(ctx, sale)
	s.createSale.done(start, err)
	return err
}

func (s *store) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	start := time.Now()
	sale, err := s.next.Sale(ctx, id)
	s.sale.done(start, err)
	return sale, err
}

func (s *store) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	start := time.Now()
	sales, err := s.next.Sales(ctx, now)
	s.sales.done(start, err)
	return sales, err
}

func (s *store) Revisions(ctx context.Context, now time.Time) (map[string]int64, error) {
	start := time.Now()
	revs, err := s.next.Revisions(ctx, now)
	s.revisions.done(start, err)
	return revs, err
}

func (s *store) NightStocksOf(ctx context.Context, saleIDs []string) (map[string][]flashsale.NightStock, error) {
	start := time.Now()
	ns, err := s.next.NightStocksOf(ctx, saleIDs)
	s.nightStocksOf.done(start, err)
	return ns, err
}

func (s *store) NightStocks(ctx context.Context, saleID string) ([]flashsale.NightStock, error) {
	start := time.Now()
	ns, err := s.next.NightStocks(ctx, saleID)
	s.nightStocks.done(start, err)
	return ns, err
}

func (s *store) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	start := time.Now()
	results, err := s.next.PlaceOrders(ctx, rs)
	s.placeOrders.done(start, err)
	if err == nil {
		for _, res := range results {
			s.placed[placeResult(res)].Inc()
		}
	}
	return results, err
}

func placeResult(err error) int {
	if err == nil {
		return 0
	}
	for i, r := range placeResults[1 : len(placeResults)-1] {
		if errors.Is(err, r.err) {
			return i + 1
		}
	}
	return len(placeResults) - 1
}

func (s *store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	start := time.Now()
	o, err := s.next.Order(ctx, id)
	s.order.done(start, err)
	return o, err
}

func (s *store) OrderByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Order, error) {
	start := time.Now()
	o, err := s.next.OrderByKey(ctx, saleID, userID, key)
	s.orderByKey.done(start, err)
	return o, err
}

func (s *store) Transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	start := time.Now()
	o, err := s.next.Transition(ctx, id, from, to, paymentRef, now)
	s.transition.done(start, err)
	if err == nil && to == flashsale.OrderPaid {
		s.m.sale(o.SaleID).steps[stepPaid].Inc()
	}
	return o, err
}

func (s *store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]*flashsale.Order, error) {
	start := time.Now()
	os, err := s.next.ExpireHolds(ctx, now, limit)
	s.expireHolds.done(start, err)
	return os, err
}

func (s *store) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	start := time.Now()
	snap, err := s.next.Snapshot(ctx, saleID)
	s.snapshot.done(start, err)
	return snap, err
}

func (s *store) FailOrder(ctx context.Context, r flashsale.Reservation, reason string) error {
	start := time.Now()
	err := s.next.FailOrder(ctx, r, reason)
	s.failOrder.done(start, err)
	return err
}

func (s *store) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.Sale, error) {
	start := time.Now()
	sales, err := s.next.ListSales(ctx, q)
	s.listSales.done(start, err)
	return sales, err
}

func (s *store) UpdateSale(ctx context.Context, sale *flashsale.Sale, rev int64, c flashsale.SaleChange) error {
	start := time.Now()
	err := s.next.UpdateSale(ctx, sale, rev, c)
	s.updateSale.done(start, err)
	return err
}

func (s *store) AdjustStock(ctx context.Context, saleID string, d flashsale.StockDelta, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	start := time.Now()
	n, err := s.next.AdjustStock(ctx, saleID, d, c)
	s.adjustStock.done(start, err)
	return n, err
}

func (s *store) SaleChanges(ctx context.Context, saleID string) ([]flashsale.SaleChange, error) {
	start := time.Now()
	cs, err := s.next.SaleChanges(ctx, saleID)
	s.saleChanges.done(start, err)
	return cs, err
}

func (s *store) DeleteSale(ctx context.Context, id string) error {
	start := time.Now()
	err := s.next.DeleteSale(ctx, id)
	s.deleteSale.done(start, err)
	return err
}

func (s *store) SaleOrders(ctx context.Context, saleID string, q flashsale.OrderQuery) ([]*flashsale.Order, error) {
	start := time.Now()
	os, err := s.next.SaleOrders(ctx, saleID, q)
	s.saleOrders.done(start, err)
	return os, err
}

func (s *store) ClaimNotices(ctx context.Context, transport, owner string, until time.Time, limit int) ([]flashsale.Notice, bool, error) {
	start := time.Now()
	ns, ok, err := s.next.ClaimNotices(ctx, transport, owner, until, limit)
	s.claimNotices.done(start, err)
	return ns, ok, err
}

func (s *store) AckNotices(ctx context.Context, transport, owner string, seq int64) error {
	start := time.Now()
	err := s.next.AckNotices(ctx, transport, owner, seq)
	s.ackNotices.done(start, err)
	return err
}

func (s *store) NoticeCursor(ctx context.Context, transport string) (cursor, last int64, err error) {
	start := time.Now()
	cursor, last, err = s.next.NoticeCursor(ctx, transport)
	s.noticeCursor.done(start, err)
	return cursor, last, err
}

func (s *store) RecordDeliveries(ctx context.Context, ds []flashsale.Delivery) error {
	start := time.Now()
	err := s.next.RecordDeliveries(ctx, ds)
	s.recordDeliveries.done(start, err)
	return err
}

func (s *store) Deliveries(ctx context.Context, q flashsale.DeliveryQuery) ([]flashsale.Delivery, error) {
	start := time.Now()
	ds, err := s.next.Deliveries(ctx, q)
	s.deliveries.done(start, err)
	return ds, err
}

func (s *store) PruneOutbox(ctx context.Context, before time.Time, limit int) (int, int, error) {
	start := time.Now()
	n, d, err := s.next.PruneOutbox(ctx, before, limit)
	s.pruneOutbox.done(start, err)
	return n, d, err
}

func (s *store) PendingMigrations(ctx context.Context) ([]string, error) {
	start := time.Now()
	p, err := s.next.PendingMigrations(ctx)
	s.pendingMigrations.done(start, err)
	return p, err
}

func (s *store) Ping(ctx context.Context) error {
	start := time.Now()
	err := s.next.Ping(ctx)
	s.ping.done(start, err)
	return err
}

// The waiting rooms' records (flashsale.QueueRecords), when next keeps them.

func (s *store) RecordPlaces(ctx context.Context, saleID string, places []flashsale.PlaceRecord) error {
	start := time.Now()
	err := s.next.Queues.RecordPlaces(ctx, saleID, places)
	s.recordPlaces.done(start, err)
	return err
}

func (s *store) RecordPassed(ctx context.Context, saleID string, admitted []string, until time.Time, skipped []string) error {
	start := time.Now()
	err := s.next.Queues.RecordPassed(ctx, saleID, admitted, until, skipped)
	s.recordPassed.done(start, err)
	return err
}

func (s *store) RecordUse(ctx context.Context, saleID, userID string) error {
	start := time.Now()
	err := s.next.Queues.RecordUse(ctx, saleID, userID)
	s.recordUse.done(start, err)
	return err
}

func (s *store) RecordDraw(ctx context.Context, d flashsale.Draw) error {
	start := time.Now()
	err := s.next.Queues.RecordDraw(ctx, d)
	s.recordDraw.done(start, err)
	return err
}

func (s *store) QueueRecord(ctx context.Context, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	start := time.Now()
	d, places, err := s.next.Queues.QueueRecord(ctx, saleID)
	s.queueRecord.done(start, err)
	return d, places, err
}

func (s *store) Close() error { return s.next.Close() }

// Migrate runs once, at start-up, before the metrics matter.
func (s *store) Migrate(ctx context.Context) error { return s.next.Migrate(ctx) }
