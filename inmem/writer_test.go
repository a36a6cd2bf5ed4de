package inmem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/writertest"
)

// MustOpenStore opens a migrated SQLite store in a fresh file and closes
// it when the test ends.
func MustOpenStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	s := mustOpenStoreNoClose(tb)
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

func mustOpenStoreNoClose(tb testing.TB) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "flashsale.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	return s
}

// MustNewWriter starts a writer over store and closes it when the test ends
// (before the store, since cleanups run last-registered first).
func MustNewWriter(tb testing.TB, store flashsale.OrderStore, cfg inmem.WriterConfig) *inmem.Writer {
	tb.Helper()
	w := inmem.NewWriter(store, cfg, slog.New(slog.DiscardHandler))
	tb.Cleanup(func() {
		if err := w.Close(); err != nil {
			tb.Errorf("close writer: %v", err)
		}
	})
	return w
}

var saleSeq atomic.Int64

// mustCreateSale creates a one-night sale with stock rooms and a limit.
func mustCreateSale(tb testing.TB, store flashsale.SaleStore, stock, limit int) *flashsale.Sale {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := fixture.Sale(fixture.ID(fmt.Sprint("sale-", saleSeq.Add(1))), fixture.Stock(stock), fixture.Price(69900, 99900),
		fixture.OpenAt(now), fixture.Limit(limit), fixture.Created(now))
	if err := store.CreateSale(tb.Context(), s); err != nil {
		tb.Fatalf("create sale: %v", err)
	}
	return s
}

func newRes(s *flashsale.Sale, orderID, userID, key string) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: orderID, SaleID: s.ID, UserID: userID, IdempotencyKey: key,
		Nights: 1, Rooms: 1, Amount: s.Price,
		HoldExpiresAt: time.Now().Add(30 * time.Second).UTC().Truncate(time.Millisecond), Active: true,
	}
}

func checkStatus(tb testing.TB, store flashsale.OrderStore, id string, want flashsale.OrderStatus) {
	tb.Helper()
	o, err := store.Order(tb.Context(), id)
	if err != nil {
		tb.Fatalf("Order(%s): %v", id, err)
	}
	if o.Status != want {
		tb.Fatalf("Order(%s).Status = %s, want %s", id, o.Status, want)
	}
}

func checkNoOrder(tb testing.TB, store flashsale.OrderStore, id string) {
	tb.Helper()
	if o, err := store.Order(tb.Context(), id); !errors.Is(err, flashsale.ErrNotFound) {
		tb.Fatalf("Order(%s) = %+v, %v, want ErrNotFound", id, o, err)
	}
}

// gatedStore holds every PlaceOrders until release is closed, so a test can
// fill the writer's queue behind a transaction in flight.
type gatedStore struct {
	*sqlite.Store
	entered chan struct{}
	release chan struct{}
}

func newGatedStore(s *sqlite.Store) *gatedStore {
	return &gatedStore{Store: s, entered: make(chan struct{}, 1000), release: make(chan struct{})}
}

func (s *gatedStore) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.PlaceOrders(ctx, rs)
}

// writeAsync runs Write in a goroutine and returns where its outcome lands.
func writeAsync(ctx context.Context, w *inmem.Writer, r *flashsale.Reservation) <-chan error {
	done := make(chan error, 1)
	go func() {
		status, err := w.Write(ctx, r)
		if err == nil && status != flashsale.OrderHeld {
			err = fmt.Errorf("status %s, want held", status)
		}
		done <- err
	}()
	return done
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriter(t *testing.T) {
	t.Run("Outcomes", func(t *testing.T) {
		store := MustOpenStore(t)
		w := MustNewWriter(t, store, inmem.WriterConfig{})
		ctx := t.Context()
		one := mustCreateSale(t, store, 1, 1)
		many := mustCreateSale(t, store, 10, 1)
		for _, tt := range []struct {
			name       string
			r          *flashsale.Reservation
			wantStatus flashsale.OrderStatus
			wantErr    error
			wantRow    flashsale.OrderStatus
		}{
			{"OK", newRes(one, "o1", "u1", "k1"), flashsale.OrderHeld, nil, flashsale.OrderHeld},
			{"Redelivery", newRes(one, "o1", "u1", "k1"), flashsale.OrderHeld, nil, flashsale.OrderHeld},
			{"ErrSoldOut", newRes(one, "o2", "u2", ""), flashsale.OrderFailed, flashsale.ErrSoldOut, flashsale.OrderFailed},
			{"OK2", newRes(many, "o3", "u1", "k1"), flashsale.OrderHeld, nil, flashsale.OrderHeld},
			{"ErrLimitExceeded", newRes(many, "o4", "u1", ""), flashsale.OrderFailed, flashsale.ErrLimitExceeded, flashsale.OrderFailed},
			{"ErrKeyConflict", newRes(many, "o5", "u1", "k1"), flashsale.OrderFailed, flashsale.ErrKeyConflict, flashsale.OrderFailed},
		} {
			status, err := w.Write(ctx, tt.r)
			if status != tt.wantStatus || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("%s: Write = %s, %v, want %s, %v", tt.name, status, err, tt.wantStatus, tt.wantErr)
			}
			checkStatus(t, store, tt.r.OrderID, tt.wantRow)
		}
	})

	t.Run("GroupCommit", func(t *testing.T) {
		const n = 2000
		store := MustOpenStore(t)
		w := MustNewWriter(t, store, inmem.WriterConfig{})
		sale := mustCreateSale(t, store, n, 1)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				r := newRes(sale, fmt.Sprint("order-", i), fmt.Sprint("user-", i), "")
				if status, err := w.Write(t.Context(), r); err != nil || status != flashsale.OrderHeld {
					t.Errorf("Write(%s) = %s, %v, want held", r.OrderID, status, err)
				}
			})
		}
		close(start)
		wg.Wait()
		st := w.Stats()
		if st.Orders != n {
			t.Errorf("Stats().Orders = %d, want %d", st.Orders, n)
		}
		if st.Batches > n/10 {
			t.Errorf("%d writes took %d transactions, want far fewer (at most %d)", n, st.Batches, n/10)
		}
		t.Logf("%d writes in %d transactions", n, st.Batches)
		nights, err := store.NightStocks(t.Context(), sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := nights[0]; got.Held != n || got.Available != 0 {
			t.Errorf("night = %+v, want %d held and none available", got, n)
		}
	})

	t.Run("QueueFull", func(t *testing.T) {
		store := newGatedStore(MustOpenStore(t))
		w := MustNewWriter(t, store, inmem.WriterConfig{MaxBatch: 1, Queue: 4})
		sale := mustCreateSale(t, store, 10, 10)
		var pending []<-chan error
		pending = append(pending, writeAsync(t.Context(), w, newRes(sale, "o0", "u", "")))
		<-store.entered // o0 is in flight, the queue is empty
		for i := 1; i <= 4; i++ {
			pending = append(pending, writeAsync(t.Context(), w, newRes(sale, fmt.Sprint("o", i), "u", "")))
		}
		waitFor(t, "a full queue", func() bool { return w.Stats().Queued == 4 })

		status, err := w.Write(t.Context(), newRes(sale, "o5", "u", ""))
		if status != "" || !errors.Is(err, flashsale.ErrUnavailable) {
			t.Fatalf("Write(queue full) = %q, %v, want ErrUnavailable", status, err)
		}
		close(store.release)
		for i, done := range pending {
			if err := <-done; err != nil {
				t.Errorf("Write(o%d): %v", i, err)
			}
		}
		checkNoOrder(t, store, "o5")
		if got, want := w.Stats(), (inmem.WriterStats{Batches: 5, Orders: 5}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
	})

	t.Run("CloseDrains", func(t *testing.T) {
		db := MustOpenStore(t)
		store := newGatedStore(db)
		w := inmem.NewWriter(store, inmem.WriterConfig{MaxBatch: 2, Queue: 3}, slog.New(slog.DiscardHandler))
		sale := mustCreateSale(t, store, 10, 10)
		var pending []<-chan error
		pending = append(pending, writeAsync(t.Context(), w, newRes(sale, "o0", "u", "")))
		<-store.entered
		for i := 1; i <= 3; i++ {
			pending = append(pending, writeAsync(t.Context(), w, newRes(sale, fmt.Sprint("o", i), "u", "")))
		}
		waitFor(t, "a full queue", func() bool { return w.Stats().Queued == 3 })

		closed := make(chan error, 1)
		go func() { closed <- w.Close() }()
		// A full queue answers the bare sentinel; a closed writer says so.
		waitFor(t, "the writer to close", func() bool {
			_, err := w.Write(t.Context(), newRes(sale, "late", "u", ""))
			return err != flashsale.ErrUnavailable && errors.Is(err, flashsale.ErrUnavailable)
		})
		close(store.release)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		for i, done := range pending {
			if err := <-done; err != nil {
				t.Errorf("Write(o%d): %v", i, err)
			}
			checkStatus(t, db, fmt.Sprint("o", i), flashsale.OrderHeld)
		}
		checkNoOrder(t, db, "late")
		if err := w.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})

	t.Run("ContextCancelled", func(t *testing.T) {
		store := newGatedStore(MustOpenStore(t))
		w := MustNewWriter(t, store, inmem.WriterConfig{})
		sale := mustCreateSale(t, store, 10, 10)

		// Never queued: the caller's context was already done.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if status, err := w.Write(ctx, newRes(sale, "never", "u", "")); status != "" || !errors.Is(err, context.Canceled) {
			t.Fatalf("Write(cancelled ctx) = %q, %v, want context.Canceled", status, err)
		}

		// Queued, then cancelled: the write completes all the same.
		first := writeAsync(t.Context(), w, newRes(sale, "o0", "u", ""))
		<-store.entered
		ctx, cancel = context.WithCancel(t.Context())
		second := writeAsync(ctx, w, newRes(sale, "o1", "u", ""))
		waitFor(t, "o1 queued", func() bool { return w.Stats().Queued == 1 })
		cancel()
		close(store.release)
		for i, done := range []<-chan error{first, second} {
			if err := <-done; err != nil {
				t.Errorf("Write(o%d): %v", i, err)
			}
		}
		checkStatus(t, store, "o1", flashsale.OrderHeld)
		checkNoOrder(t, store, "never")
	})

	t.Run("TransactionError", func(t *testing.T) {
		// A store that cannot commit fails every write of the batch as
		// unavailable, so callers return their units.
		store := mustOpenStoreNoClose(t)
		sale := mustCreateSale(t, store, 10, 10)
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
		w := MustNewWriter(t, store, inmem.WriterConfig{})
		status, err := w.Write(t.Context(), newRes(sale, "o0", "u", ""))
		if status != "" || !errors.Is(err, flashsale.ErrUnavailable) {
			t.Fatalf("Write(closed database) = %q, %v, want ErrUnavailable", status, err)
		}
	})
}

func BenchmarkWriter(b *testing.B) {
	b.ReportAllocs()
	store := MustOpenStore(b)
	w := MustNewWriter(b, store, inmem.WriterConfig{})
	sale := mustCreateSale(b, store, flashsale.MaxStock, 1)
	var next atomic.Int64
	b.SetParallelism(64) // many purchases in flight, as in a storm
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			r := newRes(sale, fmt.Sprint("order-", i), fmt.Sprint("user-", i), "")
			if _, err := w.Write(b.Context(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := w.Stats()
	b.ReportMetric(float64(st.Orders)/float64(max(st.Batches, 1)), "orders/batch")
}

// TestWriterConformance: the group-commit writer passes the suite every
// order writer passes, over SQLite.
func TestWriterConformance(t *testing.T) {
	writertest.Run(t, func(tb testing.TB) writertest.Harness {
		store := MustOpenStore(tb)
		return writertest.Harness{Writer: MustNewWriter(tb, store, inmem.WriterConfig{}), Store: store.Roles()}
	})
}
