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
// and then buying (stock 100, so most are told sold_out), and reports the
// p99 of a guest's whole exchange beside the p99 of the same 2 000 guests
// making the same two requests to the ceiling handler. Each iteration runs
// one ceiling burst and one flashsale burst back to back, so a noisy
// neighbour hits both; the ratio is of the medians. Target: 1.2 or better.
func BenchmarkBurst(b *testing.B) {
	const guests = 2000
	ceiling := newClient(startCeiling(b), "", testJWTSecret)
	_, c := MustRunMain(b, nil)
	ctx := context.Background()
	users := make([]string, guests)
	for i := range users { // sign the guests' JWTs before the clock runs
		users[i] = fmt.Sprintf("g%d", i)
		c.jwt(users[i])
		ceiling.jwt(users[i])
	}
	burst := func(cl *client, saleID string) time.Duration {
		lat, errs := distBurst(guests, func(i int) error {
			status, err := guest(ctx, cl, saleID, users[i])
			if err != nil || (status != 202 && status != 409) {
				return fmt.Errorf("guest %d: %d %v", i, status, err)
			}
			return nil
		})
		distErrs(b, errs)
		slices.Sort(lat)
		return distPct(lat, 0.99)
	}
	var ceil, fs []float64
	for b.Loop() {
		id := c.createSale(b, saleJSON([]int{100}, 1, true))
		ceil = append(ceil, float64(burst(ceiling, id).Microseconds())/1000)
		fs = append(fs, float64(burst(c, id).Microseconds())/1000)
	}
	mc, mf := median(ceil), median(fs)
	b.ReportMetric(mc, "ceiling-p99-ms")
	b.ReportMetric(mf, "p99-ms")
	b.ReportMetric(mf/mc, "p99-ratio")
}

// guest is one guest's exchange: take a token, then buy with it. Against
// the ceiling both requests get its 409; the client does the same work.
func guest(ctx context.Context, cl *client, saleID, user string) (int, error) {
	var tok struct {
		Token string `json:"token"`
		apiError
	}
	if _, err := cl.do(ctx, "POST", "/api/sales/"+saleID+"/token", cl.jwt(user), nil, nil, &tok); err != nil {
		return 0, err
	}
	var o orderJSON
	return cl.do(ctx, "POST", "/api/sales/"+saleID+"/purchase", cl.jwt(user), map[string]any{"token": tok.Token}, nil, &o)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
