package sqlite_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/flashsale/flashsale/storetest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

// TestMain checks that closing a store leaves no goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// MustOpenStore opens a migrated store in a fresh file under tb.TempDir()
// and closes it when the test ends.
func MustOpenStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	return mustOpenPath(tb, filepath.Join(tb.TempDir(), "flashsale.db"))
}

func mustOpenPath(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	testenv.Load(tb) // a load a timed test waits out (testenv.Alone)
	s, err := sqlite.Open(tb.Context(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) flashsale.Store { return MustOpenStore(tb).Roles() })
}

func testSale(id string) *flashsale.Sale {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return fixture.Sale(fixture.ID(id), fixture.Stock(1_000_000), fixture.Price(100, 200),
		fixture.Window(now.Add(-time.Hour), now.Add(time.Hour)), fixture.Created(now))
}

// TestReopen checks that committed data survives Close and a fresh Open,
// and that Migrate is idempotent on an existing database.
func TestReopen(t *testing.T) {
	path := "sqlite://" + filepath.Join(t.TempDir(), "flashsale.db")
	sale := testSale("s1")
	r := flashsale.Reservation{OrderID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", FirstNight: 0,
		Nights: 1, Rooms: 1, Amount: 100, HoldExpiresAt: time.Now().Add(time.Minute)}

	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := s.CreateSale(t.Context(), sale); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	if errs, err := s.PlaceOrders(t.Context(), []flashsale.Reservation{r}); err != nil || errs[0] != nil {
		t.Fatalf("PlaceOrders = %v, %v", errs, err)
	}
	want, err := s.Order(t.Context(), "o1")
	if err != nil {
		t.Fatalf("Order: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2 := mustOpenPath(t, path) // migrates again: must be a no-op
	got, err := s2.Order(t.Context(), "o1")
	if err != nil {
		t.Fatalf("Order after reopen: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order after reopen mismatch (-want +got):\n%s", diff)
	}
	gotSale, err := s2.Sale(t.Context(), "s1")
	if err != nil {
		t.Fatalf("Sale after reopen: %v", err)
	}
	if diff := cmp.Diff(sale, gotSale); diff != "" {
		t.Errorf("sale after reopen mismatch (-want +got):\n%s", diff)
	}
	nights, err := s2.NightStocks(t.Context(), "s1")
	if err != nil {
		t.Fatalf("NightStocks: %v", err)
	}
	if got, want := nights[0].Held, 1; got != want {
		t.Errorf("held after reopen = %d, want %d", got, want)
	}
	// The key is still bound after reopen.
	errs, err := s2.PlaceOrders(t.Context(), []flashsale.Reservation{r})
	if err != nil || len(errs) != 1 || errs[0] != flashsale.ErrDuplicate {
		t.Errorf("redelivery after reopen = %v, %v; want ErrDuplicate", errs, err)
	}
}

func TestCreateSaleConflict(t *testing.T) {
	s := MustOpenStore(t)
	if err := s.CreateSale(t.Context(), testSale("s1")); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	err := s.CreateSale(t.Context(), testSale("s1"))
	if got, want := flashsale.ErrorCode(err), flashsale.EConflict; got != want {
		t.Errorf("CreateSale twice = %v (code %q), want code %q", err, got, want)
	}
}

func TestOpenInvalidPath(t *testing.T) {
	for _, path := range []string{"", "sqlite://", "a.db?mode=ro"} {
		if s, err := sqlite.Open(t.Context(), path, nil); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", path)
		}
	}
}

// TestPlaceOrdersLargeBatch places a batch larger than one statement
// carries (512 rows), so PlaceOrders reads and writes it in chunks, the
// last of one row: a reservation in the last chunk must still see the
// first chunk's orders and users.
func TestPlaceOrdersLargeBatch(t *testing.T) {
	s := MustOpenStore(t)
	if err := s.CreateSale(t.Context(), testSale("s1")); err != nil { // limit 1 per user
		t.Fatalf("CreateSale: %v", err)
	}
	hold := time.Now().Add(time.Hour)
	r := func(id, user string) flashsale.Reservation {
		return flashsale.Reservation{OrderID: id, SaleID: "s1", UserID: user, Nights: 1, Rooms: 1, Amount: 100, HoldExpiresAt: hold}
	}
	var rs []flashsale.Reservation
	want := make([]error, 1001)
	for i := range 999 {
		rs = append(rs, r(fmt.Sprintf("o%d", i), fmt.Sprintf("u%d", i)))
	}
	rs = append(rs, r("o0", "u1000"), r("o1000", "u0"))
	want[999], want[1000] = flashsale.ErrDuplicate, flashsale.ErrLimitExceeded
	got, err := s.PlaceOrders(t.Context(), rs)
	if err != nil {
		t.Fatalf("PlaceOrders: %v", err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
		t.Errorf("PlaceOrders results (-want +got):\n%s", diff)
	}
	nights, err := s.NightStocks(t.Context(), "s1")
	if err != nil {
		t.Fatalf("NightStocks: %v", err)
	}
	if nights[0].Held != 999 {
		t.Errorf("held = %d, want 999", nights[0].Held)
	}
}

// BenchmarkPlaceOrders measures one reservation's cost when PlaceOrders
// commits batches of the given size: every commit is an fsync, so batching
// (group commit) divides that cost among the batch.
func BenchmarkPlaceOrders(b *testing.B) {
	for _, size := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := MustOpenStore(b)
			const perSale = 512 * 1000 // a multiple of every batch size, below MaxStock
			hold := time.Now().Add(time.Hour)
			batch := make([]flashsale.Reservation, 0, size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += size {
				if i%perSale < size { // a new sale before the stock runs out
					b.StopTimer()
					if err := s.CreateSale(b.Context(), testSale(fmt.Sprintf("s%d", i/perSale))); err != nil {
						b.Fatalf("CreateSale: %v", err)
					}
					b.StartTimer()
				}
				batch = batch[:0]
				for j := i; j < min(i+size, b.N); j++ {
					batch = append(batch, flashsale.Reservation{
						OrderID: fmt.Sprintf("o%09d", j), SaleID: fmt.Sprintf("s%d", i/perSale), UserID: fmt.Sprintf("u%09d", j),
						Nights: 1, Rooms: 1, Amount: 100, HoldExpiresAt: hold,
					})
				}
				errs, err := s.PlaceOrders(b.Context(), batch)
				if err != nil {
					b.Fatalf("PlaceOrders: %v", err)
				}
				for _, err := range errs {
					if err != nil {
						b.Fatalf("PlaceOrders result: %v", err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}

// BenchmarkOrder measures reading one order by its ID (a guest reading
// the order a 202 named), from every core at once, among 4 096 orders.
func BenchmarkOrder(b *testing.B) {
	s := MustOpenStore(b)
	if err := s.CreateSale(b.Context(), testSale("s1")); err != nil {
		b.Fatalf("CreateSale: %v", err)
	}
	hold := time.Now().Add(time.Hour)
	rs := make([]flashsale.Reservation, 4096)
	for i := range rs {
		rs[i] = flashsale.Reservation{
			OrderID: fmt.Sprintf("o%09d", i), SaleID: "s1", UserID: fmt.Sprintf("u%09d", i),
			Nights: 1, Rooms: 1, Amount: 100, HoldExpiresAt: hold,
		}
	}
	if _, err := s.PlaceOrders(b.Context(), rs); err != nil {
		b.Fatalf("PlaceOrders: %v", err)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := rs[next.Add(1)%int64(len(rs))].OrderID
			if o, err := s.Order(b.Context(), id); err != nil || o.ID != id {
				b.Errorf("Order(%s) = %v, %v", id, o, err)
				return
			}
		}
	})
}

// BenchmarkExpireHolds measures expiring a reaper batch of 256 due holds on
// one night, each of a different user (the flash-sale worst case for the
// user counters): one ExpireHolds transaction, against the 256 per-hold
// Transition calls it replaced. One op is one batch of 256.
func BenchmarkExpireHolds(b *testing.B) {
	const batch = 256
	for _, bc := range []struct {
		name   string
		expire func(b *testing.B, s *sqlite.Store, now time.Time, ids []string)
	}{
		{"ExpireHolds", func(b *testing.B, s *sqlite.Store, now time.Time, ids []string) {
			got, err := s.ExpireHolds(b.Context(), now, batch)
			if err != nil || len(got) != len(ids) {
				b.Fatalf("ExpireHolds = %d orders, %v; want %d", len(got), err, len(ids))
			}
		}},
		{"PerHoldTransition", func(b *testing.B, s *sqlite.Store, now time.Time, ids []string) {
			for _, id := range ids {
				if _, err := s.Transition(b.Context(), id, flashsale.OrderHeld, flashsale.OrderExpired, "", now); err != nil {
					b.Fatalf("Transition: %v", err)
				}
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := MustOpenStore(b)
			if err := s.CreateSale(b.Context(), testSale("s1")); err != nil {
				b.Fatalf("CreateSale: %v", err)
			}
			now := time.Now()
			rs := make([]flashsale.Reservation, batch)
			ids := make([]string, batch)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for i := range rs {
					ids[i] = fmt.Sprintf("o%09d", n)
					rs[i] = flashsale.Reservation{OrderID: ids[i], SaleID: "s1", UserID: fmt.Sprintf("u%09d", n),
						Nights: 1, Rooms: 1, Amount: 100, HoldExpiresAt: now.Add(-time.Second)}
					n++
				}
				if _, err := s.PlaceOrders(b.Context(), rs); err != nil {
					b.Fatalf("PlaceOrders: %v", err)
				}
				b.StartTimer()
				bc.expire(b, s, now, ids)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/hold")
		})
	}
}
