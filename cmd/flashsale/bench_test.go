package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// startCeiling serves the cheapest possible endpoint, the same handler as
// ../shared/bench/ceiling: read the body, answer a small JSON 409. Every
// HTTP figure is quoted as a ratio to it, measured with the same client in
// the same run, because absolute numbers on a shared machine mean little.
func startCeiling(tb testing.TB) string {
	tb.Helper()
	body := []byte(`{"error":{"code":"sold_out","message":"sold out"}}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		w.Write(body)
	})}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// BenchmarkPurchase measures the purchase path over loopback HTTP beside the
// ceiling handler. Compare ns/op of sold_out with ceiling: the target is a
// throughput ratio of 0.8 or better.
func BenchmarkPurchase(b *testing.B) {
	ceiling := startCeiling(b)
	m, c := MustRunMain(b, nil)
	soldOut := c.createSale(b, saleJSON([]int{0}, 1, true))
	open := c.createSale(b, saleJSON([]int{1_000_000}, 1000, false))
	ctx := context.Background()
	_ = m

	b.Run("ceiling", func(b *testing.B) {
		cc := newClient(ceiling, "", testJWTSecret)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if status, _ := cc.do(ctx, "POST", "/api/sales/x/purchase", cc.jwt("u"), map[string]any{"token": "t"}, nil, nil); status != 409 {
					b.Errorf("ceiling status %d", status)
				}
			}
		})
	})
	b.Run("sold_out", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if status, _ := c.do(ctx, "POST", "/api/sales/"+soldOut+"/purchase", c.jwt("u"), map[string]any{"token": "t"}, nil, nil); status != 409 {
					b.Errorf("sold-out status %d", status)
				}
			}
		})
	})
	b.Run("accepted", func(b *testing.B) {
		b.ReportAllocs()
		var n sync.Mutex
		i := 0
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Lock()
				i++
				user := fmt.Sprintf("u%d", i%50000)
				n.Unlock()
				if status, _, _ := c.purchase(ctx, open, user, false, nil, ""); status != 202 && status != 409 {
					b.Errorf("accepted status %d", status)
				}
			}
		})
	})
}

// BenchmarkBurst fires 2 000 concurrent guests at once, each taking a token
// and then buying (stock 100), and reports the p99 of a guest's whole
// exchange beside the p99 of 2 000 guests making two requests to the ceiling.
// Target: flashsale p99 within 1.2x of the ceiling's.
func BenchmarkBurst(b *testing.B) {
	const guests = 2000
	ceiling := startCeiling(b)
	_, c := MustRunMain(b, nil)
	ctx := context.Background()
	for i := range guests { // sign the guests' JWTs before the clock runs
		c.jwt(fmt.Sprintf("g%d", i))
	}
	burst := func(b *testing.B, guest func(i int) bool) time.Duration {
		lat := make([]time.Duration, guests)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range guests {
			wg.Go(func() {
				<-start
				t := time.Now()
				if !guest(i) {
					b.Errorf("guest %d failed", i)
				}
				lat[i] = time.Since(t)
			})
		}
		close(start)
		wg.Wait()
		slices.Sort(lat)
		return lat[guests*99/100]
	}
	var ceilP99, fsP99 time.Duration
	b.Run("ceiling", func(b *testing.B) {
		cc := newClient(ceiling, "", testJWTSecret)
		for i := range guests {
			cc.jwt(fmt.Sprintf("g%d", i))
		}
		for b.Loop() {
			ceilP99 = burst(b, func(i int) bool {
				s1, _ := cc.do(ctx, "POST", "/token", cc.jwt(fmt.Sprintf("g%d", i)), nil, nil, nil)
				s2, _ := cc.do(ctx, "POST", "/purchase", cc.jwt(fmt.Sprintf("g%d", i)), map[string]any{"token": "t"}, nil, nil)
				return s1 == 409 && s2 == 409
			})
		}
		b.ReportMetric(float64(ceilP99.Microseconds())/1000, "p99-ms")
	})
	b.Run("flashsale", func(b *testing.B) {
		for b.Loop() {
			id := c.createSale(b, saleJSON([]int{100}, 1, true))
			fsP99 = burst(b, func(i int) bool {
				status, _, err := c.purchase(ctx, id, fmt.Sprintf("g%d", i), true, nil, "")
				return err == nil && (status == 202 || status == 409)
			})
		}
		b.ReportMetric(float64(fsP99.Microseconds())/1000, "p99-ms")
		if ceilP99 > 0 {
			b.ReportMetric(float64(fsP99)/float64(ceilP99), "p99-ratio")
		}
	})
}
