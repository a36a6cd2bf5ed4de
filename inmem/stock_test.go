package inmem_test

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/stocktest"
)

func TestEngine(t *testing.T) {
	stocktest.Run(t, func(tb testing.TB) flashsale.StockEngine { return inmem.NewEngine().Roles() })
}

// TestEngineShared runs the suite on one engine for every test, as the
// Redis engine runs it on one server.
func TestEngineShared(t *testing.T) {
	e := inmem.NewEngine()
	stocktest.Run(t, func(tb testing.TB) flashsale.StockEngine { return e.Roles() })
}

// benchPool is how many distinct order and user IDs a benchmark cycles
// through; the sale is reloaded (reset) each time the pool wraps around.
const benchPool = 1 << 16

var benchIDs = func() []string {
	ids := make([]string, benchPool)
	for i := range ids {
		ids[i] = "id-" + strconv.Itoa(i)
	}
	return ids
}()

// mustLoadBench loads a one-night sale with the given stock and limit.
func mustLoadBench(tb testing.TB, e *inmem.Engine, id string, stock, limit int) {
	tb.Helper()
	// Not on sale until an hour from now: loaded again and again.
	s := fixture.Sale(fixture.ID(id), fixture.Stock(stock), fixture.Limit(limit), fixture.Window(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)))
	snap := &flashsale.StockSnapshot{Sale: s, Nights: []flashsale.NightStock{{Date: s.Nights[0].Date, Stock: stock, Available: stock}}}
	if err := e.Load(tb.Context(), snap, time.Now()); err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkReserve(b *testing.B) {
	b.Run("accepted", func(b *testing.B) {
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", benchPool, 1)
		r := flashsale.Reservation{SaleID: "sale", Nights: 1, Rooms: 1}
		for i := 0; b.Loop(); i++ {
			if i%benchPool == 0 && i > 0 {
				b.StopTimer()
				mustLoadBench(b, e, "sale", benchPool, 1)
				b.StartTimer()
			}
			r.OrderID, r.UserID = benchIDs[i%benchPool], benchIDs[i%benchPool]
			if _, err := e.Reserve(b.Context(), &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sold_out", func(b *testing.B) {
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", 0, 1)
		r := flashsale.Reservation{SaleID: "sale", OrderID: "o", UserID: "u", Nights: 1, Rooms: 1}
		for b.Loop() {
			if _, err := e.Reserve(b.Context(), &r); !errors.Is(err, flashsale.ErrSoldOut) {
				b.Fatal(err)
			}
		}
	})
	b.Run("sold_out_keyed", func(b *testing.B) {
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", 0, 1)
		r := flashsale.Reservation{SaleID: "sale", OrderID: "o", UserID: "u", IdempotencyKey: "k", Nights: 1, Rooms: 1}
		for b.Loop() {
			if _, err := e.Reserve(b.Context(), &r); !errors.Is(err, flashsale.ErrSoldOut) {
				b.Fatal(err)
			}
		}
	})
	b.Run("limit_exceeded", func(b *testing.B) {
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", 1000, 1)
		r := flashsale.Reservation{SaleID: "sale", OrderID: "first", UserID: "u", Nights: 1, Rooms: 1}
		if _, err := e.Reserve(b.Context(), &r); err != nil {
			b.Fatal(err)
		}
		r.OrderID = "o"
		for b.Loop() {
			if _, err := e.Reserve(b.Context(), &r); !errors.Is(err, flashsale.ErrLimitExceeded) {
				b.Fatal(err)
			}
		}
	})

	b.Run("accepted_parallel", func(b *testing.B) {
		// Every goroutine shares one sale: the worst case for the sale's lock.
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", flashsale.MaxStock, 1000)
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			r := flashsale.Reservation{SaleID: "sale", Nights: 1, Rooms: 1}
			for pb.Next() {
				i := next.Add(1)
				r.OrderID, r.UserID = strconv.FormatInt(i, 10), benchIDs[i%benchPool]
				if _, err := e.Reserve(b.Context(), &r); err != nil && !errors.Is(err, flashsale.ErrSoldOut) {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("accepted_parallel_sales", func(b *testing.B) {
		// Each goroutine has a sale of its own: sales must not contend.
		b.ReportAllocs()
		e := inmem.NewEngine()
		var next, sales atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			sale := "sale-" + strconv.FormatInt(sales.Add(1), 10)
			mustLoadBench(b, e, sale, flashsale.MaxStock, 1000)
			r := flashsale.Reservation{SaleID: sale, Nights: 1, Rooms: 1}
			for pb.Next() {
				i := next.Add(1)
				r.OrderID, r.UserID = strconv.FormatInt(i, 10), benchIDs[i%benchPool]
				if _, err := e.Reserve(b.Context(), &r); err != nil && !errors.Is(err, flashsale.ErrSoldOut) {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("sold_out_parallel", func(b *testing.B) {
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", 0, 1)
		b.RunParallel(func(pb *testing.PB) {
			r := flashsale.Reservation{SaleID: "sale", OrderID: "o", UserID: "u", Nights: 1, Rooms: 1}
			for pb.Next() {
				if _, err := e.Reserve(b.Context(), &r); !errors.Is(err, flashsale.ErrSoldOut) {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("limit_exceeded_parallel", func(b *testing.B) {
		b.ReportAllocs()
		e := inmem.NewEngine()
		mustLoadBench(b, e, "sale", 1000, 1)
		first := flashsale.Reservation{SaleID: "sale", OrderID: "first", UserID: "u", Nights: 1, Rooms: 1}
		if _, err := e.Reserve(b.Context(), &first); err != nil {
			b.Fatal(err)
		}
		b.RunParallel(func(pb *testing.PB) {
			r := flashsale.Reservation{SaleID: "sale", OrderID: "o", UserID: "u", Nights: 1, Rooms: 1}
			for pb.Next() {
				if _, err := e.Reserve(b.Context(), &r); !errors.Is(err, flashsale.ErrLimitExceeded) {
					b.Fatal(err)
				}
			}
		})
	})
}
