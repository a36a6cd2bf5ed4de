package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(tb testing.TB) flashsale.Store { return MustOpenStore(tb) })
}

// MustOpenStore opens a migrated store on a fresh database that is dropped
// when the test ends.
func MustOpenStore(tb testing.TB) *mysql.Store {
	tb.Helper()
	s, err := mysql.Open(context.Background(), MustCreateDatabase(tb), slog.New(slog.NewTextHandler(tb.Output(), nil)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s
}

// MustCreateDatabase creates a database of the test's own and returns its URL.
func MustCreateDatabase(tb testing.TB) string {
	tb.Helper()
	return testenv.MySQLDatabase(tb)
}

func TestMigrate(t *testing.T) {
	dsn := MustCreateDatabase(t)
	ctx := t.Context()
	// Several instances starting at once: all succeed, the schema is applied once.
	const instances = 4
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Go(func() {
			s, err := mysql.Open(ctx, dsn, nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			errs[i] = s.Migrate(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	s, err := mysql.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// And once more, serially: nothing to do.
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if got, want := n, 1; got != want {
		t.Errorf("schema_migrations rows = %d, want %d", got, want)
	}
}

func TestOpen(t *testing.T) {
	for _, u := range []string{"postgres://x@localhost/db", "mysql://root@127.0.0.1:3306", "::"} {
		if _, err := mysql.Open(t.Context(), u, nil); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}

// newSale returns a valid sale with the given stock per night, open now.
func newSale(id string, stock ...int) *flashsale.Sale {
	s := &flashsale.Sale{
		ID: id, Title: "Winter deal", Hotel: "Grand", RoomType: "Deluxe King",
		Price: 50000, OriginalPrice: 80000, Currency: "CNY",
		StartsAt:     time.Now().Add(-time.Minute).Truncate(time.Millisecond).UTC(),
		EndsAt:       time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC(),
		PerUserLimit: 2, HoldSeconds: 30,
	}
	d := time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)
	for i, n := range stock {
		s.Nights = append(s.Nights, flashsale.Night{Date: d.AddDate(0, 0, i).Format(flashsale.DateLayout), Stock: n})
	}
	return s
}

func TestPlaceOrdersSmoke(t *testing.T) {
	s := MustOpenStore(t)
	ctx := t.Context()
	sale := newSale("s1", 3, 1)
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sale(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sale, got); diff != "" {
		t.Errorf("Sale mismatch (-want +got):\n%s", diff)
	}
	hold := time.Now().Add(30 * time.Second).Truncate(time.Millisecond)
	rs := []flashsale.Reservation{
		{OrderID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", FirstNight: 0, Nights: 2, Rooms: 1, HoldExpiresAt: hold},
		{OrderID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", FirstNight: 0, Nights: 2, Rooms: 1, HoldExpiresAt: hold},
		{OrderID: "o2", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", FirstNight: 0, Nights: 1, Rooms: 1, HoldExpiresAt: hold},
		{OrderID: "o3", SaleID: "s1", UserID: "u2", FirstNight: 0, Nights: 2, Rooms: 1, HoldExpiresAt: hold},
		{OrderID: "o4", SaleID: "s1", UserID: "u1", FirstNight: 0, Nights: 1, Rooms: 2, HoldExpiresAt: hold},
		{OrderID: "o5", SaleID: "s1", UserID: "u3", FirstNight: 0, Nights: 1, Rooms: 2, HoldExpiresAt: hold},
		{OrderID: "o6", SaleID: "nope", UserID: "u3", FirstNight: 0, Nights: 1, Rooms: 1, HoldExpiresAt: hold},
	}
	res, err := s.PlaceOrders(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, flashsale.ErrDuplicate, flashsale.ErrKeyConflict, flashsale.ErrSoldOut, flashsale.ErrLimitExceeded, nil, flashsale.ErrSoldOut}
	for i := range want {
		if !errors.Is(res[i], want[i]) {
			t.Errorf("result[%d] = %v, want %v", i, res[i], want[i])
		}
	}
	nights, err := s.NightStocks(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]flashsale.NightStock{
		{Date: "2026-12-24", Stock: 3, Held: 3, Available: 0},
		{Date: "2026-12-25", Stock: 1, Held: 1, Available: 0},
	}, nights); diff != "" {
		t.Errorf("NightStocks mismatch (-want +got):\n%s", diff)
	}
	o2, err := s.Order(ctx, "o2")
	if err != nil {
		t.Fatal(err)
	}
	if o2.Status != flashsale.OrderFailed || o2.IdempotencyKey != "" {
		t.Errorf("o2 = %+v, want failed without key", o2)
	}
	o1, err := s.OrderByKey(ctx, "s1", "u1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if o1.ID != "o1" || o1.CheckIn != "2026-12-24" || !o1.HoldExpiresAt.Equal(hold) {
		t.Errorf("OrderByKey = %+v", o1)
	}

	// Pay o1, cancel o5, then pay o5 late: its rooms are still free.
	if _, err := s.Transition(ctx, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1", time.Now()); !errors.Is(err, flashsale.ErrStale) {
		t.Errorf("second pay: %v, want ErrStale", err)
	}
	if _, err := s.Transition(ctx, "zz", flashsale.OrderHeld, flashsale.OrderPaid, "", time.Now()); !errors.Is(err, flashsale.ErrNotFound) {
		t.Errorf("unknown: %v, want ErrNotFound", err)
	}
	if _, err := s.Transition(ctx, "o5", flashsale.OrderHeld, flashsale.OrderCancelled, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	o5, err := s.Transition(ctx, "o5", flashsale.OrderCancelled, flashsale.OrderPaid, "pay-5", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if o5.Status != flashsale.OrderPaid || o5.PaymentRef != "pay-5" {
		t.Errorf("o5 = %+v", o5)
	}
	nights, err = s.NightStocks(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]flashsale.NightStock{
		{Date: "2026-12-24", Stock: 3, Sold: 3, Available: 0},
		{Date: "2026-12-25", Stock: 1, Sold: 1, Available: 0},
	}, nights); diff != "" {
		t.Errorf("NightStocks mismatch (-want +got):\n%s", diff)
	}
	snap, err := s.Snapshot(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(snap.Reservations), 5; got != want {
		t.Errorf("snapshot reservations = %d, want %d", got, want)
	}
}

// BenchmarkPlaceOrders measures the group commit at the batch sizes the
// embedded writer and the queue consumer produce.
func BenchmarkPlaceOrders(b *testing.B) {
	for _, size := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := MustOpenStore(b)
			ctx := context.Background()
			sale := newSale("bench", flashsale.MaxStock)
			sale.PerUserLimit = 1000
			if err := s.CreateSale(ctx, sale); err != nil {
				b.Fatal(err)
			}
			hold := time.Now().Add(time.Minute)
			rs := make([]flashsale.Reservation, size)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for i := range rs {
					n++
					rs[i] = flashsale.Reservation{OrderID: fmt.Sprintf("o%d", n), SaleID: "bench",
						UserID: fmt.Sprintf("u%d", n%5000), FirstNight: 0, Nights: 1, Rooms: 1, HoldExpiresAt: hold}
				}
				if _, err := s.PlaceOrders(ctx, rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "orders/s")
		})
	}
}

// TestPlaceOrdersModel checks PlaceOrders against a sequential model over
// many batches of random reservations (redeliveries, key clashes, limits,
// stays past the last night, unknown sales), so every path through the
// batch, including refusals in the middle of a batch, gives exactly the
// result one-at-a-time processing would.
func TestPlaceOrdersModel(t *testing.T) {
	s := MustOpenStore(t)
	ctx := t.Context()
	sale := newSale("m", 9, 6, 4)
	if err := s.CreateSale(ctx, sale); err != nil {
		t.Fatal(err)
	}
	type userKey struct{ sale, user, key string }
	var (
		ids   = map[string]bool{}
		keys  = map[userKey]bool{}
		users = map[string]int{}
		held  = make([]int, len(sale.Nights))
	)
	model := func(r flashsale.Reservation) error {
		switch {
		case ids[r.OrderID]:
			return flashsale.ErrDuplicate
		case r.IdempotencyKey != "" && keys[userKey{r.SaleID, r.UserID, r.IdempotencyKey}]:
			ids[r.OrderID] = true
			return flashsale.ErrKeyConflict
		}
		ids[r.OrderID] = true
		if r.IdempotencyKey != "" {
			keys[userKey{r.SaleID, r.UserID, r.IdempotencyKey}] = true
		}
		if r.SaleID != sale.ID {
			return flashsale.ErrSoldOut
		}
		if users[r.UserID]+r.Rooms > sale.PerUserLimit {
			return flashsale.ErrLimitExceeded
		}
		if r.FirstNight+r.Nights > len(held) {
			return flashsale.ErrSoldOut
		}
		for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
			if sale.Nights[i].Stock-held[i] < r.Rooms {
				return flashsale.ErrSoldOut
			}
		}
		for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
			held[i] += r.Rooms
		}
		users[r.UserID] += r.Rooms
		return nil
	}

	rng := rand.New(rand.NewPCG(7, 11))
	for batch := range 40 {
		rs := make([]flashsale.Reservation, 1+rng.IntN(40))
		for i := range rs {
			r := flashsale.Reservation{
				OrderID: fmt.Sprintf("o%d", rng.IntN(400)), SaleID: sale.ID,
				UserID: fmt.Sprintf("u%d", rng.IntN(30)), FirstNight: rng.IntN(3), Nights: 1 + rng.IntN(2),
				Rooms: 1 + rng.IntN(2), Amount: 100, HoldExpiresAt: time.Now().Add(time.Minute),
			}
			if rng.IntN(3) == 0 {
				r.IdempotencyKey = fmt.Sprintf("k%d", rng.IntN(3))
			}
			if rng.IntN(25) == 0 {
				r.SaleID = "unknown"
			}
			rs[i] = r
		}
		got, err := s.PlaceOrders(ctx, rs)
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		for i, r := range rs {
			if want := model(r); got[i] != want {
				t.Fatalf("batch %d, reservation %d (%+v): got %v, want %v", batch, i, r, got[i], want)
			}
		}
	}
	nights, err := s.NightStocks(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nights {
		if n.Held != held[i] {
			t.Errorf("night %d held %d, model %d", i, n.Held, held[i])
		}
	}
	if got := len(ids); got < 200 {
		t.Errorf("only %d distinct orders: the model test exercised too little", got)
	}
}
