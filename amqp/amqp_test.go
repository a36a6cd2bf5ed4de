package amqp

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// MustConfig returns a Config with a topology of its own, deleted when the
// test ends.
func MustConfig(tb testing.TB) Config {
	tb.Helper()
	cfg := Config{URL: testenv.URL(tb, testenv.AMQP), Name: "test-" + strings.ToLower(rand.Text()[:12])}
	if err := Declare(context.Background(), cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cfg := cfg.withDefaults()
		withChannel(tb, cfg, func(ch *amqp091.Channel) error {
			for _, q := range []string{cfg.queue(), cfg.deadQueue()} {
				if _, err := ch.QueueDelete(q, false, false, false); err != nil {
					return err
				}
			}
			for _, x := range []string{cfg.exchange(), cfg.deadExchange()} {
				if err := ch.ExchangeDelete(x, false, false); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return cfg
}

// withChannel runs fn on a channel of a connection of its own.
func withChannel(tb testing.TB, cfg Config, fn func(ch *amqp091.Channel) error) {
	tb.Helper()
	conn, err := amqp091.Dial(cfg.URL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		tb.Fatal(err)
	}
	if err := fn(ch); err != nil {
		tb.Fatal(err)
	}
}

// queueLen returns the ready messages in a queue.
func queueLen(tb testing.TB, cfg Config, queue string) int {
	tb.Helper()
	var n int
	withChannel(tb, cfg, func(ch *amqp091.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, amqp091.Table{
			amqp091.QueueTypeArg: amqp091.QueueTypeQuorum,
		})
		n = q.Messages
		return err
	})
	return n
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func MustPublisher(tb testing.TB, cfg Config) *Publisher {
	tb.Helper()
	p, err := NewPublisher(context.Background(), cfg, testLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// StartConsumer runs a consumer until the test ends (or the caller closes it).
func StartConsumer(tb testing.TB, cfg Config, h Handler) *Consumer {
	tb.Helper()
	c := NewTestConsumer(tb, cfg, h)
	go c.Run(context.Background())
	return c
}

func NewTestConsumer(tb testing.TB, cfg Config, h Handler) *Consumer {
	tb.Helper()
	c, err := NewConsumer(context.Background(), cfg, h, testLogger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	c.retryMin = 10 * time.Millisecond
	tb.Cleanup(func() { c.Close() })
	return c
}

// checkFor polls cond until it holds or d passes.
func checkFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reservation makes a distinct valid reservation.
func reservation(saleID string, i int) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: fmt.Sprintf("order-%06d", i), SaleID: saleID, UserID: fmt.Sprintf("user-%06d", i),
		IdempotencyKey: fmt.Sprintf("key-%d", i), FirstNight: 0, Nights: 1, Rooms: 1, Amount: 100,
		HoldExpiresAt: time.Now().Add(time.Minute).UTC(), Active: true,
	}
}

// publishAll writes n reservations from workers goroutines and fails the
// test on any error.
func publishAll(tb testing.TB, p *Publisher, saleID string, n, workers int) []*flashsale.Reservation {
	tb.Helper()
	rs := make([]*flashsale.Reservation, n)
	for i := range rs {
		rs[i] = reservation(saleID, i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				status, err := p.Write(context.Background(), rs[i])
				if err != nil {
					errs <- err
				} else if status != flashsale.OrderPending {
					errs <- fmt.Errorf("status %q, want pending", status)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return rs
}

// memStore is a Handler that records orders like a database would: each
// order ID once, ErrDuplicate after that.
type memStore struct {
	mu      sync.Mutex
	orders  map[string]flashsale.Reservation
	inserts map[string]int // successful inserts per order, must stay 1
	dups    int
	batches []int // sizes, in order
	times   []time.Time
	// fail, if set, makes a transaction containing a matching reservation fail.
	fail func(r flashsale.Reservation) bool
	// after, if set, runs after a committed batch.
	after func()
	// latency, if set, is how long each transaction takes before it
	// commits, as a database under load would.
	latency time.Duration
	// down makes every transaction and Ping fail, as an unreachable database.
	down atomic.Bool
}

var errDown = errors.New("database unreachable")

func (s *memStore) Ping(context.Context) error {
	if s.down.Load() {
		return errDown
	}
	return nil
}

func newMemStore() *memStore {
	return &memStore{orders: map[string]flashsale.Reservation{}, inserts: map[string]int{}}
}

func (s *memStore) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return nil, fmt.Errorf("place orders: %w", ctx.Err())
		}
	}
	if s.down.Load() {
		return nil, fmt.Errorf("place orders: %w", errDown)
	}
	s.mu.Lock()
	if s.fail != nil {
		for _, r := range rs {
			if s.fail(r) {
				s.mu.Unlock()
				return nil, fmt.Errorf("place orders: %w", errTx)
			}
		}
	}
	errs := make([]error, len(rs))
	for i, r := range rs {
		if _, ok := s.orders[r.OrderID]; ok {
			errs[i] = flashsale.ErrDuplicate
			s.dups++
			continue
		}
		s.orders[r.OrderID] = r
		s.inserts[r.OrderID]++
	}
	s.batches = append(s.batches, len(rs))
	s.times = append(s.times, time.Now())
	after := s.after
	s.mu.Unlock()
	if after != nil {
		after()
	}
	return errs, nil
}

var errTx = errors.New("transaction failed")

func (s *memStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders)
}

// checkExactlyOnce verifies every reservation was recorded once and as sent.
func (s *memStore) checkExactlyOnce(tb testing.TB, rs []*flashsale.Reservation) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, want := len(s.orders), len(rs); got != want {
		tb.Errorf("orders = %d, want %d", got, want)
	}
	for _, r := range rs {
		got, ok := s.orders[r.OrderID]
		if !ok {
			tb.Errorf("order %s missing", r.OrderID)
			continue
		}
		if n := s.inserts[r.OrderID]; n != 1 {
			tb.Errorf("order %s inserted %d times", r.OrderID, n)
		}
		if got.UserID != r.UserID || got.IdempotencyKey != r.IdempotencyKey || !got.HoldExpiresAt.Equal(r.HoldExpiresAt) {
			tb.Errorf("order %s = %+v, want %+v", r.OrderID, got, *r)
		}
	}
}

// TestPublishConsume publishes 5 000 reservations from 500 goroutines with
// pipelined confirms and checks the consumer hands each to the handler
// exactly once.
func TestPublishConsume(t *testing.T) {
	cfg := MustConfig(t)
	p := MustPublisher(t, cfg)
	store := newMemStore()
	c := StartConsumer(t, cfg, store)

	const n = 5000
	rs := publishAll(t, p, "sale-1", n, 500)
	checkFor(t, 30*time.Second, "all orders consumed", func() bool { return store.count() == n })
	checkFor(t, 5*time.Second, "all acks", func() bool { return c.Stats().Acked == n })
	store.checkExactlyOnce(t, rs)

	if got := p.Stats(); got.Published != n || got.Confirmed != n || got.Failed != 0 {
		t.Errorf("publisher stats = %+v, want %d published and confirmed", got, n)
	}
	if got := c.Stats(); got.Consumed != n || got.Dead != 0 || got.Requeued != 0 {
		t.Errorf("consumer stats = %+v, want %d consumed", got, n)
	}
	store.mu.Lock()
	t.Logf("%d batches for %d orders, largest %d", len(store.batches), n, maxOf(store.batches))
	store.mu.Unlock()
}

// TestEndToEndSQLite is the order path into a real store: reservations
// published from 500 goroutines, consumed in batches into SQLite. The sale
// has rooms for 80% of them, so the rest are recorded as failed
// (ErrSoldOut), which is acked like success.
func TestEndToEndSQLite(t *testing.T) {
	n := 5000
	if raceEnabled {
		n = 1000
	}
	stock := n * 4 / 5
	cfg := MustConfig(t)
	cfg.OnDead = func(ctx context.Context, r flashsale.Reservation, reason error) error {
		t.Errorf("OnDead(%s): %v", r.OrderID, reason)
		return nil
	}
	p := MustPublisher(t, cfg)
	db, path := MustOpenSQLite(t)
	sale := mustCreateSale(t, db.Roles(), stock)
	c := StartConsumer(t, cfg, db)

	rs := publishAll(t, p, sale.ID, n, 500)
	checkFor(t, 60*time.Second, "all orders acked", func() bool { return c.Stats().Acked == uint64(n) })

	checkRows(t, db.Roles(), path, rs, map[flashsale.OrderStatus]int{flashsale.OrderHeld: stock, flashsale.OrderFailed: n - stock})
	nights, err := db.NightStocks(t.Context(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]flashsale.NightStock{{Date: sale.Nights[0].Date, Stock: stock, Held: stock}}, nights); diff != "" {
		t.Errorf("night stocks (-want +got):\n%s", diff)
	}
	if got := c.Stats(); got.Consumed != uint64(n) || got.Dead != 0 || got.Requeued != 0 {
		t.Errorf("consumer stats = %+v, want %d consumed", got, n)
	}
	t.Logf("%d transactions for %d orders", c.Stats().Batches, n)
	if got := queueLen(t, cfg, cfg.withDefaults().deadQueue()); got != 0 {
		t.Errorf("dead letters = %d, want 0", got)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func TestPublishErrors(t *testing.T) {
	t.Run("Unroutable", func(t *testing.T) {
		cfg := MustConfig(t)
		p := MustPublisher(t, cfg)
		withChannel(t, cfg, func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete(cfg.withDefaults().queue(), false, false, false)
			return err
		})
		_, err := p.Write(context.Background(), reservation("sale-1", 1))
		if !errors.Is(err, flashsale.ErrUnavailable) || !errors.Is(err, errReturned) || errors.Is(err, flashsale.ErrIndeterminate) {
			t.Fatalf("Write error = %v, want ErrUnavailable (returned)", err)
		}
		if got := p.Stats(); got.Failed != 1 || got.Confirmed != 0 {
			t.Errorf("stats = %+v, want one failure", got)
		}
	})
	t.Run("Full", func(t *testing.T) {
		cfg := MustConfig(t)
		cfg.MaxInFlight = 2
		p := MustPublisher(t, cfg)
		p.slots <- struct{}{} // two publishes stuck awaiting confirms
		p.slots <- struct{}{}
		_, err := p.Write(context.Background(), reservation("sale-1", 1))
		if !errors.Is(err, flashsale.ErrUnavailable) || !errors.Is(err, errFull) || errors.Is(err, flashsale.ErrIndeterminate) {
			t.Fatalf("Write error = %v, want ErrUnavailable (full)", err)
		}
		<-p.slots
		<-p.slots
		if _, err := p.Write(context.Background(), reservation("sale-1", 2)); err != nil {
			t.Fatalf("Write after slots freed: %v", err)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		cfg := MustConfig(t)
		p := MustPublisher(t, cfg)
		r := reservation("sale-1", 1)
		r.Rooms = 0
		if _, err := p.Write(context.Background(), r); !errors.Is(err, flashsale.ErrUnavailable) {
			t.Fatalf("Write error = %v, want ErrUnavailable", err)
		}
	})
	t.Run("Closed", func(t *testing.T) {
		cfg := MustConfig(t)
		p := MustPublisher(t, cfg)
		p.Close()
		if _, err := p.Write(context.Background(), reservation("sale-1", 1)); !errors.Is(err, flashsale.ErrUnavailable) || !errors.Is(err, errClosed) {
			t.Fatalf("Write error = %v, want ErrUnavailable", err)
		}
	})
}

// TestPublisherReconnect drops the publisher's connection: publishes fail
// with ErrUnavailable while it is down and succeed again once it is back.
func TestPublisherReconnect(t *testing.T) {
	cfg := MustConfig(t)
	p := MustPublisher(t, cfg)
	if _, err := p.Write(context.Background(), reservation("sale-1", 0)); err != nil {
		t.Fatal(err)
	}
	p.pubMu.Lock()
	p.sess.conn.Close()
	p.pubMu.Unlock()
	i := 1
	checkFor(t, 10*time.Second, "a publish after reconnecting", func() bool {
		_, err := p.Write(context.Background(), reservation("sale-1", i))
		i++
		if err != nil && !errors.Is(err, flashsale.ErrUnavailable) {
			t.Fatalf("Write error = %v, want ErrUnavailable", err)
		}
		return err == nil
	})
}

// TestConsumerKilled closes the consumer's connection after a batch
// committed in SQLite but before it was acked: the reconnected consumer gets
// the batch again, the store says ErrDuplicate, and every order still has
// exactly one row.
func TestConsumerKilled(t *testing.T) {
	cfg := MustConfig(t)
	cfg.BatchSize = 50
	p := MustPublisher(t, cfg)
	db, path := MustOpenSQLite(t)
	const n = 500
	sale := mustCreateSale(t, db.Roles(), n)
	rs := publishAll(t, p, sale.ID, n, 50)

	h := &hooked{Handler: db}
	c := NewTestConsumer(t, cfg, h)
	var first atomic.Int64
	h.after = func(errs []error) {
		if first.CompareAndSwap(0, int64(len(errs))) {
			c.killConnection()
		}
	}
	go c.Run(context.Background())

	checkFor(t, 30*time.Second, "all orders acked", func() bool { return c.Stats().Acked == n })
	checkRows(t, db.Roles(), path, rs, map[flashsale.OrderStatus]int{flashsale.OrderHeld: n})
	if got, want := h.dups.Load(), first.Load(); got < want {
		t.Errorf("duplicates = %d, want at least the killed batch of %d", got, want)
	}
	if got := queueLen(t, cfg, cfg.withDefaults().queue()); got != 0 {
		t.Errorf("queue length = %d, want 0", got)
	}
}

// hooked wraps a Handler, counting ErrDuplicate results and running after
// each committed batch.
type hooked struct {
	Handler
	dups  atomic.Int64
	after func(errs []error)
}

func (h *hooked) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	errs, err := h.Handler.PlaceOrders(ctx, rs)
	if err != nil {
		return nil, err
	}
	for _, e := range errs {
		if errors.Is(e, flashsale.ErrDuplicate) {
			h.dups.Add(1)
		}
	}
	if h.after != nil {
		h.after(errs)
	}
	return errs, nil
}

// MustOpenSQLite opens a migrated SQLite store in the test's directory.
func MustOpenSQLite(tb testing.TB) (*sqlite.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "flashsale.db")
	s, err := sqlite.Open(tb.Context(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s, path
}

// mustCreateSale creates an open one-night sale of stock rooms, one per user.
func mustCreateSale(tb testing.TB, db flashsale.Store, stock int) *flashsale.Sale {
	tb.Helper()
	now := time.Now()
	sale := fixture.Sale(fixture.ID("sale-"+strings.ToLower(rand.Text()[:8])), fixture.Stock(stock), fixture.Price(100, 200),
		fixture.Window(now.Add(-time.Hour), now.Add(time.Hour)), fixture.Hold(60), fixture.Created(now))
	if err := db.CreateSale(tb.Context(), sale); err != nil {
		tb.Fatal(err)
	}
	return sale
}

// checkRows checks, storetest-style, that every reservation has exactly one
// order row with its fields, and counts the rows by status.
func checkRows(tb testing.TB, db flashsale.Store, path string, rs []*flashsale.Reservation, want map[flashsale.OrderStatus]int) {
	tb.Helper()
	got := map[flashsale.OrderStatus]int{}
	for _, r := range rs {
		o, err := db.Order(tb.Context(), r.OrderID)
		if err != nil {
			tb.Fatalf("Order(%s): %v", r.OrderID, err)
		}
		got[o.Status]++
		if o.UserID != r.UserID || o.SaleID != r.SaleID || o.Rooms != r.Rooms || o.Amount != r.Amount ||
			o.HoldExpiresAt.Sub(r.HoldExpiresAt).Abs() >= time.Millisecond {
			tb.Errorf("order %s = %+v, want the fields of %+v", r.OrderID, o, *r)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		tb.Errorf("orders by status (-want +got):\n%s", diff)
	}
	raw, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		tb.Fatal(err)
	}
	defer raw.Close()
	var rows, ids int
	if err := raw.QueryRowContext(tb.Context(), "SELECT count(*), count(DISTINCT id) FROM orders").Scan(&rows, &ids); err != nil {
		tb.Fatal(err)
	}
	if rows != len(rs) || ids != len(rs) {
		tb.Errorf("order rows = %d with %d distinct IDs, want %d", rows, ids, len(rs))
	}
}

// TestConsumerClose stops a consumer while batches are in progress: what it
// wrote is acked, the rest stays queued, and a second consumer finishes.
func TestConsumerClose(t *testing.T) {
	cfg := MustConfig(t)
	cfg.BatchSize = 20
	cfg.Prefetch = 40
	p := MustPublisher(t, cfg)
	const n = 400
	rs := publishAll(t, p, "sale-1", n, 20)

	store := newMemStore()
	c1 := NewTestConsumer(t, cfg, store)
	// Stop the consumer (what Close does first) while its first batch is
	// in hand, before that batch is acked.
	store.after = func() { c1.stopOnce.Do(func() { close(c1.stop) }) }
	go c1.Run(context.Background())
	select {
	case <-c1.stop:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the first batch")
	}
	c1.Close()
	s1 := c1.Stats()
	if s1.Acked == 0 || s1.Acked >= n {
		t.Fatalf("first consumer acked %d, want some but not all", s1.Acked)
	}
	if got := uint64(store.count()); got != s1.Acked {
		t.Errorf("first consumer wrote %d and acked %d, want equal (no batch abandoned)", got, s1.Acked)
	}

	store.mu.Lock()
	store.after = nil
	store.mu.Unlock()
	StartConsumer(t, cfg, store)
	checkFor(t, 30*time.Second, "all orders written", func() bool { return store.count() == n })
	store.checkExactlyOnce(t, rs)
}

// TestPoison makes one reservation's transaction fail every time: the rest
// of its batch is written one by one, and the poison is dead-lettered after
// MaxAttempts with OnDead called once.
func TestPoison(t *testing.T) {
	cfg := MustConfig(t)
	cfg.MaxAttempts = 3
	var mu sync.Mutex
	var dead []flashsale.Reservation
	var refusals atomic.Int32
	cfg.OnDead = func(ctx context.Context, r flashsale.Reservation, reason error) error {
		if !errors.Is(reason, errTx) {
			t.Errorf("OnDead reason = %v, want the transaction error", reason)
		}
		// The first call fails, as if the failed row could not be written:
		// the message must stay queued and come back.
		if refusals.Add(1) == 1 {
			return errDown
		}
		mu.Lock()
		dead = append(dead, r)
		mu.Unlock()
		return nil
	}
	p := MustPublisher(t, cfg)
	const n = 20
	rs := publishAll(t, p, "sale-1", n, 5)
	poison := reservation("sale-1", n)
	if _, err := p.Write(context.Background(), poison); err != nil {
		t.Fatal(err)
	}

	store := newMemStore()
	store.fail = func(r flashsale.Reservation) bool { return r.OrderID == poison.OrderID }
	c := StartConsumer(t, cfg, store)
	checkFor(t, 30*time.Second, "poison dead-lettered", func() bool { return c.Stats().Dead == 1 })
	checkFor(t, 10*time.Second, "dead letter queued", func() bool {
		return queueLen(t, cfg, cfg.withDefaults().deadQueue()) == 1
	})
	store.checkExactlyOnce(t, rs)
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 || dead[0].OrderID != poison.OrderID {
		t.Errorf("OnDead calls = %+v, want one for %s", dead, poison.OrderID)
	}
	// MaxAttempts-1 requeues before the first give-up, which OnDead
	// refused: one more, and then the last attempt is dead-lettered.
	if got := c.Stats(); got.Requeued != uint64(cfg.MaxAttempts) {
		t.Errorf("requeued = %d, want %d", got.Requeued, cfg.MaxAttempts)
	}
}

// TestDatabaseOutage makes the database unreachable for longer than
// MaxAttempts deliveries would last: the consumer holds its batch, spends no
// attempt, dead-letters nothing, and writes every order exactly once when
// the database is back. (Before, an outage of minutes dead-lettered every
// queued order and their owners read 404.)
func TestDatabaseOutage(t *testing.T) {
	cfg := MustConfig(t)
	cfg.MaxAttempts = 2
	cfg.OnDead = func(ctx context.Context, r flashsale.Reservation, reason error) error {
		t.Errorf("OnDead(%s) during an outage: %v", r.OrderID, reason)
		return nil
	}
	p := MustPublisher(t, cfg)
	const n = 50
	rs := publishAll(t, p, "sale-1", n, 10)
	store := newMemStore()
	store.down.Store(true)
	c := StartConsumer(t, cfg, store)
	checkFor(t, 30*time.Second, "several retries of the held batch", func() bool { return c.Stats().Retried >= 5 })
	if got := c.Stats(); got.Dead != 0 || got.Requeued != 0 || got.Acked != 0 {
		t.Fatalf("during the outage: %+v, want nothing settled", got)
	}
	store.down.Store(false)
	checkFor(t, 30*time.Second, "all orders written", func() bool { return store.count() == n })
	store.checkExactlyOnce(t, rs)
	checkFor(t, 10*time.Second, "all acked", func() bool { return c.Stats().Acked == n })
	if got := queueLen(t, cfg, cfg.withDefaults().deadQueue()); got != 0 {
		t.Errorf("dead letters = %d, want 0", got)
	}
}

// TestQueueDeleted deletes the queue while the consumer holds a batch it has
// not written yet: the batch is written anyway, since nothing will ever
// redeliver it. (Before, those orders stayed pending forever.)
func TestQueueDeleted(t *testing.T) {
	cfg := MustConfig(t)
	cfg.BatchSize = 1000
	cfg.BatchWait = 3 * time.Second // the batch is still gathering when the queue goes
	p := MustPublisher(t, cfg)
	const n = 10
	rs := publishAll(t, p, "sale-1", n, 10)
	store := newMemStore()
	c := StartConsumer(t, cfg, store)
	checkFor(t, 10*time.Second, "the batch in hand", func() bool { return c.Stats().Consumed == n })
	withChannel(t, cfg, func(ch *amqp091.Channel) error {
		_, err := ch.QueueDelete(cfg.withDefaults().queue(), false, false, false)
		return err
	})
	checkFor(t, 10*time.Second, "the batch written", func() bool { return store.count() == n })
	store.checkExactlyOnce(t, rs)
}

// TestQueueRedeclared deletes the queue with no consumer connected: the
// next publish comes back unroutable (a certain failure, so its units go
// back), and the publisher declares the queue again, so purchases resume
// without waiting for a consumer to reconnect.
func TestQueueRedeclared(t *testing.T) {
	cfg := MustConfig(t)
	p := MustPublisher(t, cfg)
	withChannel(t, cfg, func(ch *amqp091.Channel) error {
		_, err := ch.QueueDelete(cfg.withDefaults().queue(), false, false, false)
		return err
	})
	r := reservation("sale-1", 0)
	if _, err := p.Write(context.Background(), r); !errors.Is(err, errReturned) || errors.Is(err, flashsale.ErrIndeterminate) {
		t.Fatalf("publish to a deleted queue: %v, want returned (certain)", err)
	}
	checkFor(t, 10*time.Second, "a publish confirmed", func() bool {
		_, err := p.Write(context.Background(), r)
		return err == nil
	})
	if got := queueLen(t, cfg, cfg.withDefaults().queue()); got != 1 {
		t.Fatalf("queue holds %d messages, want 1", got)
	}
}

// TestQueueRecreated deletes the queue under a running consumer and
// declares it again (as the publisher does when a message comes back
// unroutable): RabbitMQ leaves the consumer waiting on the old queue
// without a cancel, so only its idle check (no delivery while messages
// are ready) brings it to the new one.
func TestQueueRecreated(t *testing.T) {
	cfg := MustConfig(t)
	store := newMemStore()
	StartConsumer(t, cfg, store)
	p := MustPublisher(t, cfg)
	first := reservation("sale-1", 1000) // an ID of its own: publishAll's start at 0
	if _, err := p.Write(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, "the first order written", func() bool { return store.count() == 1 })
	withChannel(t, cfg, func(ch *amqp091.Channel) error {
		if _, err := ch.QueueDelete(cfg.withDefaults().queue(), false, false, false); err != nil {
			return err
		}
		return declare(ch, cfg.withDefaults())
	})
	rs := publishAll(t, p, "sale-2", 20, 4)
	checkFor(t, 3*idleCheck, "the orders published to the new queue written", func() bool { return store.count() == 21 })
	store.checkExactlyOnce(t, append(rs, first))
}

// TestUndecodable publishes a body that is not a reservation: it is
// dead-lettered at once, without OnDead.
func TestUndecodable(t *testing.T) {
	cfg := MustConfig(t)
	var called atomic.Bool
	cfg.OnDead = func(context.Context, flashsale.Reservation, error) error { called.Store(true); return nil }
	withChannel(t, cfg, func(ch *amqp091.Channel) error {
		return ch.Publish(cfg.withDefaults().exchange(), routingKey, true, false, amqp091.Publishing{Body: []byte(`{"order_id":"x"}`)})
	})
	c := StartConsumer(t, cfg, newMemStore())
	checkFor(t, 10*time.Second, "dead letter", func() bool { return c.Stats().Dead == 1 })
	checkFor(t, 10*time.Second, "dead letter queued", func() bool {
		return queueLen(t, cfg, cfg.withDefaults().deadQueue()) == 1
	})
	if called.Load() {
		t.Error("OnDead was called for an undecodable message")
	}
}

// TestRateCap writes 2 000 orders at 500/s: queued before the consumer
// starts, with fast transactions and with transactions that take 150 ms
// each (a database under a burst), and published to a consumer that has
// been idle for a while.
//
// The cap bounds the time taken from below, so that bound cannot flake; in
// the idle case it also shows that quota does not build up while there is
// nothing to write (with a second of it banked, 2 000 orders would take
// 3 s). The bound from above is what the slow case is about: a consumer
// that sized its batches by a fixed slice of a second, one batch in flight,
// would take at least 40 × 150 ms = 6 s; one that carries the quota a slow
// commit left unused into a bigger next batch takes about 4 s. The 6 s
// bound leaves about 2 s for a loaded machine. The per-second write counts
// go to the log to show the flat line at the cap.
func TestRateCap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration // of each transaction
		idle    time.Duration // the consumer runs this long before the orders are published
	}{
		{"Fast", 0, 0},
		{"SlowCommits", 150 * time.Millisecond, 0},
		{"AfterIdle", 0, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const (
				n    = 2000
				rate = 500
			)
			cfg := MustConfig(t)
			cfg.RatePerSec = rate
			p := MustPublisher(t, cfg)
			store := newMemStore()
			store.latency = tc.latency

			var rs []*flashsale.Reservation
			var start time.Time // from when the consumer could write
			if tc.idle > 0 {
				StartConsumer(t, cfg, store)
				time.Sleep(tc.idle) // an empty queue, as between two sales
				start = time.Now()
				rs = publishAll(t, p, "sale-1", n, 100)
			} else {
				rs = publishAll(t, p, "sale-1", n, 100)
				start = time.Now()
				StartConsumer(t, cfg, store)
			}
			checkFor(t, 30*time.Second, "all orders written", func() bool { return store.count() == n })
			elapsed := time.Since(start)
			store.checkExactlyOnce(t, rs)

			perSec, peak, largest := store.series(start)
			t.Logf("took %s; orders written per second: %v; busiest 1 s window %d; largest batch %d",
				elapsed.Round(time.Millisecond), perSec, peak, largest)
			if min := 3500 * time.Millisecond; elapsed < min {
				t.Errorf("took %s, want at least %s at %d/s", elapsed, min, rate)
			}
			if max := 6 * time.Second; elapsed > max {
				t.Errorf("took %s, want at most %s: the consumer did not keep up with its cap", elapsed, max)
			}
			// The cap is an upper bound the limiter enforces however fast or
			// slow the machine: a quarter second of carried quota at most.
			if limit := rate + rate/4 + 1; peak > limit {
				t.Errorf("busiest 1 s window wrote %d orders, want at most %d at a cap of %d/s", peak, limit, rate)
			}
		})
	}
}

// series returns the orders committed in each second since start, the most
// committed within any 1 s window, and the largest batch.
func (s *memStore) series(start time.Time) (perSec []int, peak, largest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	largest = maxOf(s.batches)
	for i, at := range s.times {
		sec := int(at.Sub(start) / time.Second)
		for len(perSec) <= sec {
			perSec = append(perSec, 0)
		}
		perSec[sec] += s.batches[i]
	}
	// times are in commit order: slide a window over them.
	first, inWindow := 0, 0
	for i, at := range s.times {
		inWindow += s.batches[i]
		for at.Sub(s.times[first]) >= time.Second {
			inWindow -= s.batches[first]
			first++
		}
		peak = max(peak, inWindow)
	}
	return perSec, peak, largest
}

// BenchmarkPublish measures Write including the broker's confirm. Serial
// is the confirm latency; the parallel runs show what pipelining buys when
// many purchases share one channel.
func BenchmarkPublish(b *testing.B) {
	cfg := MustConfig(b)
	p := MustPublisher(b, cfg)
	for _, perCPU := range []int{1, 8, 128} {
		b.Run(fmt.Sprintf("Writers%d", perCPU*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			var id atomic.Int64
			b.SetParallelism(perCPU)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := reservation("sale-1", int(id.Add(1)))
				for pb.Next() {
					if _, err := p.Write(context.Background(), r); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestLostConfirm makes a lost confirm certain: a proxy holds the broker's
// replies, so a publish reaches the queue but its confirm never comes back,
// first until ConfirmTimeout and then until the link is cut. Either way
// Write must say ErrIndeterminate, never a certain failure: the broker did
// keep the message, and a caller that returned the units on a certain
// failure sold those rooms twice (most 202s of a storm ended failed).
func TestLostConfirm(t *testing.T) {
	cfg := MustConfig(t)
	proxy, pcfg := proxied(t, cfg)
	pcfg.ConfirmTimeout = 300 * time.Millisecond
	queued := func() int { return queueLen(t, cfg, cfg.withDefaults().queue()) }
	write := func(p *Publisher, i int) error {
		_, err := p.Write(context.Background(), reservation("sale-1", i))
		return err
	}

	t.Run("Timeout", func(t *testing.T) {
		p := MustPublisher(t, pcfg)
		if err := write(p, 0); err != nil {
			t.Fatal(err)
		}
		proxy.HoldReplies(true)
		defer proxy.HoldReplies(false)
		err := write(p, 1)
		if !errors.Is(err, flashsale.ErrIndeterminate) || !errors.Is(err, flashsale.ErrUnavailable) {
			t.Fatalf("Write with the confirm held = %v, want ErrIndeterminate", err)
		}
		checkFor(t, 10*time.Second, "the unconfirmed message in the queue", func() bool { return queued() == 2 })
		if got := p.Stats(); got.Indeterminate != 1 || got.Failed != 0 {
			t.Errorf("stats = %+v, want 1 indeterminate and no certain failure", got)
		}
		proxy.Cut()
	})
	t.Run("Cut", func(t *testing.T) {
		pcfg := pcfg
		pcfg.ConfirmTimeout = time.Minute // the cut, not the timer, ends the wait
		p := MustPublisher(t, pcfg)
		if err := write(p, 2); err != nil {
			t.Fatal(err)
		}
		proxy.HoldReplies(true)
		defer proxy.HoldReplies(false)
		done := make(chan error, 1)
		go func() { done <- write(p, 3) }()
		checkFor(t, 10*time.Second, "the message in the queue", func() bool { return queued() == 4 })
		proxy.Cut()
		if err := <-done; !errors.Is(err, flashsale.ErrIndeterminate) {
			t.Fatalf("Write cut while awaiting its confirm = %v, want ErrIndeterminate", err)
		}
		if got := p.Stats(); got.Indeterminate != 1 || got.Failed != 0 {
			t.Errorf("stats = %+v, want 1 indeterminate and no certain failure", got)
		}
	})
}

// TestPauseDrain: Pause returns only once the consumer holds nothing (all
// it was given is written and acked, the rest is still ready in the queue),
// nothing is written while paused, Drain empties the queue into the store
// and leaves the consumer paused, and Resume starts it again.
func TestPauseDrain(t *testing.T) {
	cfg := MustConfig(t)
	cfg.BatchSize, cfg.Prefetch = 10, 1 // it prefetches two batches, not the queue
	p := MustPublisher(t, cfg)
	publish := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := p.Write(context.Background(), reservation("sale-1", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 200)
	store := newMemStore()
	store.latency = 20 * time.Millisecond // a batch takes a while: Pause catches one in hand
	c := StartConsumer(t, cfg, store)
	ready := func() int { return queueLen(t, cfg, cfg.withDefaults().queue()) }
	checkFor(t, 10*time.Second, "some orders written", func() bool { return store.count() >= 30 })
	if err := c.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	written := store.count()
	if got := c.Stats().Acked; got != uint64(written) {
		t.Fatalf("paused with %d written but %d acked: it still holds some", written, got)
	}
	checkFor(t, 10*time.Second, "the rest back in the queue", func() bool { return written+ready() == 200 })
	if written == 200 {
		t.Fatal("everything was written before the pause; the test proves nothing")
	}
	publish(200, 20)
	time.Sleep(300 * time.Millisecond)
	if got := store.count(); got != written {
		t.Fatalf("%d orders written while paused", got-written)
	}
	if err := c.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, r := store.count(), ready(); got != 220 || r != 0 {
		t.Fatalf("after Drain: %d written, %d ready; want 220 and 0", got, r)
	}
	publish(220, 5)
	time.Sleep(300 * time.Millisecond)
	if got := store.count(); got != 220 {
		t.Fatalf("%d orders written after Drain: it must leave the consumer paused", got-220)
	}
	c.Resume()
	checkFor(t, 10*time.Second, "written after Resume", func() bool { return store.count() == 225 })
}

// failingConn is a publisher's connection whose next large write (a
// publish's frames; a heartbeat is 8 bytes) fails once armed: mode
// sendThenFail writes the bytes and then fails, as a flush by another frame
// that carried a publish's frames and failed after them; failUnsent fails
// having written nothing. Reads are untouched, so the library's reader sees
// a healthy connection.
type failingConn struct {
	net.Conn
	mode *atomic.Int32
}

const (
	sendThenFail = 1
	failUnsent   = 2
)

func (c *failingConn) Write(b []byte) (int, error) {
	if len(b) > 64 {
		switch c.mode.Swap(0) {
		case sendThenFail:
			n, _ := c.Conn.Write(b)
			return n, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
		case failUnsent:
			return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}
		}
	}
	return c.Conn.Write(b)
}

// TestPublishWriteFailed: a publish whose write fails is an unknown outcome,
// never a certain failure, since its frames may have left whole (the first
// case puts it in the queue); and the publisher reconnects at once, so the
// next publish does not fail on the library's stored write error.
func TestPublishWriteFailed(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   int32
		queued int // messages in the queue after the failed one
	}{
		{"SentThenFailed", sendThenFail, 2},
		{"FailedUnsent", failUnsent, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := MustConfig(t)
			var mode atomic.Int32
			cfg.wrapConn = func(nc net.Conn) net.Conn { return &failingConn{Conn: nc, mode: &mode} }
			p := MustPublisher(t, cfg)
			if _, err := p.Write(context.Background(), reservation("sale-1", 0)); err != nil {
				t.Fatal(err)
			}
			mode.Store(c.mode)
			_, err := p.Write(context.Background(), reservation("sale-1", 1))
			// Sent whole, the message may be confirmed before the write's
			// error reaches the publisher: then the answer is certain, and
			// true (CI saw it once). Otherwise it must be indeterminate.
			confirmed := err == nil && c.mode == sendThenFail
			if !confirmed && (!errors.Is(err, flashsale.ErrIndeterminate) || !errors.Is(err, flashsale.ErrUnavailable)) {
				t.Fatalf("Write whose write failed = %v, want ErrIndeterminate", err)
			}
			checkFor(t, 10*time.Second, fmt.Sprintf("%d messages in the queue", c.queued), func() bool {
				return queueLen(t, cfg, cfg.withDefaults().queue()) == c.queued
			})
			// A reconnection takes the backoff's first 100 ms.
			start, i := time.Now(), 2
			for {
				_, err := p.Write(context.Background(), reservation("sale-1", i))
				if err == nil {
					break
				}
				if time.Since(start) > 1500*time.Millisecond {
					t.Fatalf("publishes still fail %v after the failed write: %v", time.Since(start), err)
				}
				i++
				time.Sleep(10 * time.Millisecond)
			}
			// The publishes in between found no session (certain
			// failures); one on the old session would have failed on its
			// stored write error, indeterminate too.
			want := uint64(1)
			if confirmed {
				want = 0
			}
			if got := p.Stats(); got.Indeterminate != want {
				t.Errorf("stats = %+v, want %d indeterminate (the failed write's, unless its confirm won)", got, want)
			}
		})
	}
}
