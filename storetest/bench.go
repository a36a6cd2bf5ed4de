package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// BenchPlaceOrders measures the group commit at the batch sizes the
// embedded writer and the queue consumer produce (1, 64 and 512), one sale
// with a stock that never runs out. An engine package calls it from its own
// BenchmarkPlaceOrders.
func BenchPlaceOrders(b *testing.B, open OpenFunc) {
	for _, size := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			mustCreateSale(b, s, newSale("bench", 1000, flashsale.MaxStock))
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

// BenchExpireHolds measures what the reaper pays to release a batch of
// 256 holds that all end on one night, alone and while the order consumer
// writes a PlaceOrders batch of 256 to the same night, against the one
// transaction per hold (8 workers) that ExpireHolds replaced. expire-ms is
// the time until the whole batch is released; place-ms the concurrent
// PlaceOrders. An engine package calls it from its own BenchmarkExpireHolds.
func BenchExpireHolds(b *testing.B, open OpenFunc) {
	for _, bc := range []struct {
		name    string
		place   bool
		perHold bool
	}{
		{"batch/alone", false, false},
		{"batch/with-place", true, false},
		{"per-hold/with-place", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchExpireHolds(b, open(b), bc.place, bc.perHold)
		})
	}
}

func benchExpireHolds(b *testing.B, s flashsale.Store, place, perHold bool) {
	const size = 256
	ctx := context.Background()
	mustCreateSale(b, s, newSale("bench", 1000, flashsale.MaxStock))
	batch := func(n *int, user string, hold time.Time) []flashsale.Reservation {
		rs := make([]flashsale.Reservation, size)
		for i := range rs {
			*n++
			rs[i] = flashsale.Reservation{OrderID: fmt.Sprintf("%s%d", user, *n), SaleID: "bench",
				UserID: fmt.Sprintf("%s%d", user, *n%1000), FirstNight: 0, Nights: 1, Rooms: 1, HoldExpiresAt: hold}
		}
		return rs
	}
	var (
		n                 int
		expireDur, plcDur time.Duration
	)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		due := batch(&n, "e", time.Now().Add(-time.Second))
		if _, err := s.PlaceOrders(ctx, due); err != nil {
			b.Fatal(err)
		}
		fresh := batch(&n, "p", time.Now().Add(time.Hour))
		b.StartTimer()

		var wg sync.WaitGroup
		start := make(chan struct{})
		if place {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				if _, err := s.PlaceOrders(ctx, fresh); err != nil {
					b.Error(err)
				}
				plcDur += time.Since(t0)
			})
		}
		wg.Go(func() {
			<-start
			t0 := time.Now()
			defer func() { expireDur += time.Since(t0) }()
			if perHold {
				expireEach(b, s, due)
				return
			}
			got, err := s.ExpireHolds(ctx, time.Now(), size)
			if err != nil {
				b.Error(err)
			} else if len(got) != size {
				b.Errorf("ExpireHolds expired %d, want %d", len(got), size)
			}
		})
		close(start)
		wg.Wait()
	}
	b.ReportMetric(float64(expireDur.Milliseconds())/float64(b.N), "expire-ms")
	if place {
		b.ReportMetric(float64(plcDur.Milliseconds())/float64(b.N), "place-ms")
	}
}

// expireEach expires the orders one transaction each, with 8 workers, as
// the reaper did before ExpireHolds.
func expireEach(b *testing.B, s flashsale.Store, due []flashsale.Reservation) {
	var wg sync.WaitGroup
	next := make(chan string)
	for range 8 {
		wg.Go(func() {
			for id := range next {
				if _, err := s.Transition(context.Background(), id, flashsale.OrderHeld, flashsale.OrderExpired, "", time.Now()); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, r := range due {
		next <- r.OrderID
	}
	close(next)
	wg.Wait()
}
