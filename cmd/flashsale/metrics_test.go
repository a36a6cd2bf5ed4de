package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/metrics/metricstest"
)

// metricsStorm fires attempts purchases (no token) from users guests at
// once and returns how many each answer came back: "ok" for a 202, else
// the refusal's code.
func metricsStorm(t *testing.T, c *client, saleID string, users, attempts int) map[string]int {
	t.Helper()
	var (
		mu    sync.Mutex
		seen  = map[string]int{}
		wg    sync.WaitGroup
		start = make(chan struct{})
		slots = make(chan struct{}, 64)
	)
	for i := range attempts {
		user := fmt.Sprintf("guest-%04d", i%users)
		wg.Go(func() {
			<-start
			slots <- struct{}{}
			defer func() { <-slots }()
			status, o, err := c.purchase(t.Context(), saleID, user, false, nil, "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("%s: %v", user, err)
			case status == http.StatusAccepted:
				seen["ok"]++
			default:
				seen[o.Error.Code]++
			}
		})
	}
	close(start)
	wg.Wait()
	return seen
}

// TestMetricsStorm: 1 500 purchases of 50 rooms from 500 guests (a room
// each) through real HTTP on the embedded shape; /metrics on the main
// listener then counts exactly what the clients saw: every request, each
// outcome, as many reserved and written as 202s, as many rows held, the
// stock per night, and the purchase route's latency samples.
func TestMetricsStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	m, c := MustRunMain(t, nil)
	id := c.createSale(t, saleJSON([]int{50}, 1, false))
	const users, attempts = 500, 1500
	seen := metricsStorm(t, c, id, users, attempts)
	t.Logf("answers: %v", seen)
	if seen["ok"] != 50 {
		t.Fatalf("%d 202s, want 50", seen["ok"])
	}
	f := metricstest.Scrape(t, "http://"+m.Addr()+"/metrics")
	checkFunnel(t, f, id, seen, attempts)
	if got := f.Value("flashsale_db_orders_placed_total", "result", "held"); got != 50 {
		t.Errorf("rows held by the conditional insert = %v, want 50", got)
	}
	if got := f.Value("flashsale_http_request_duration_seconds", "route", "POST /api/sales/{id}/purchase"); got != attempts {
		t.Errorf("purchase route latency samples = %v, want %d", got, attempts)
	}
	for state, want := range map[string]float64{"available": 0, "held": 50, "sold": 0} {
		if got := f.Value("flashsale_stock_rooms", "sale", id, "state", state); got != want {
			t.Errorf("stock %s = %v, want %v", state, got, want)
		}
	}
	if got := f.Value("flashsale_group_commit_batch_size"); got < 1 || got > 50 {
		t.Errorf("group commits = %v, want 1 to 50 for 50 orders", got)
	}
}

// checkFunnel: the funnel's counters of saleID equal the answers seen.
func checkFunnel(t *testing.T, f metricstest.Families, saleID string, seen map[string]int, attempts int) {
	t.Helper()
	total := 0
	for outcome, n := range seen {
		total += n
		if got := f.Value("flashsale_purchases_total", "sale", saleID, "outcome", outcome); got != float64(n) {
			t.Errorf("purchases{outcome=%s} = %v, clients saw %d", outcome, got, n)
		}
	}
	if got := f.Value("flashsale_purchases_total", "sale", saleID); got != float64(total) {
		t.Errorf("purchases of the sale = %v, clients saw %d answers", got, total)
	}
	steps := func(s string) float64 { return f.Value("flashsale_funnel_steps_total", "sale", saleID, "step", s) }
	if got := steps("requested"); got != float64(attempts) {
		t.Errorf("requested = %v, want %d", got, attempts)
	}
	ok := float64(seen["ok"])
	if steps("reserved") != ok || steps("written") != ok {
		t.Errorf("reserved %v, written %v, want both %v (the 202s)", steps("reserved"), steps("written"), ok)
	}
	// Admitted: past the sold-out flag and the limits; the engine may
	// still refuse some (sold out in the race, the per-user limit).
	if a := steps("admitted"); a < ok || a > float64(attempts) {
		t.Errorf("admitted = %v, want between %v and %d", a, ok, attempts)
	}
}

// TestMetricsAddr: with FLASHSALE_METRICS_ADDR, /metrics is served there
// and not on the public port.
func TestMetricsAddr(t *testing.T) {
	m, c := MustRunMain(t, func(cfg *app.Config) { cfg.MetricsAddr = "127.0.0.1:0" })
	if m.MetricsAddr() == "" {
		t.Fatal("no metrics listener")
	}
	f := metricstest.Scrape(t, "http://"+m.MetricsAddr()+"/metrics")
	if _, ok := f["flashsale_purchases_total"]; !ok {
		t.Error("flashsale_purchases_total missing on the metrics listener")
	}
	status, err := c.do(context.Background(), "GET", "/metrics", "", nil, nil, nil)
	if err != nil || status != http.StatusNotFound {
		t.Errorf("GET /metrics on the public port = %d %v, want 404", status, err)
	}
}

// TestMetricsDistributed: one instance of the distributed shape (Redis,
// RabbitMQ, MySQL): the queue counters follow the storm: every 202 was
// published and confirmed, and once the queue drained as many were
// consumed and acked and placed as held rows.
func TestMetricsDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	prefix, queue := testenv.Name("fs-m-")+":", testenv.Name("fs-mq-")
	m, c := MustRunMain(t, func(cfg *app.Config) {
		cfg.DatabaseURL = testenv.MySQLDatabase(t)
		cfg.RedisURL, cfg.RedisPrefix = testenv.URL(t, testenv.Redis), prefix
		cfg.AMQPURL, cfg.QueueName = testenv.URL(t, testenv.AMQP), queue
	})
	t.Cleanup(func() {
		testenv.DeleteKeys(testenv.URL(t, testenv.Redis), prefix)
		deleteTopology(testenv.URL(t, testenv.AMQP), queue)
	})
	id := c.createSale(t, saleJSON([]int{40}, 1, false))
	const attempts = 400
	seen := metricsStorm(t, c, id, 200, attempts)
	t.Logf("answers: %v", seen)
	if seen["ok"] != 40 {
		t.Fatalf("%d 202s, want 40", seen["ok"])
	}
	url := "http://" + m.Addr() + "/metrics"
	var f metricstest.Families
	// Not there in 20 s: checkFunnel says which figure is short.
	testenv.Poll(20*time.Second, 50*time.Millisecond, func() bool {
		f = metricstest.Scrape(t, url)
		return f.Value("flashsale_queue_acked_total") >= 40
	})
	checkFunnel(t, f, id, seen, attempts)
	for name, want := range map[string]float64{
		"flashsale_queue_published_total": 40, "flashsale_queue_confirmed_total": 40,
		"flashsale_queue_consumed_total": 40, "flashsale_queue_acked_total": 40,
		"flashsale_queue_dead_lettered_total": 0, "flashsale_queue_backlog_messages": 0,
	} {
		if got := f.Value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := f.Value("flashsale_db_orders_placed_total", "result", "held"); got != 40 {
		t.Errorf("rows held = %v, want 40", got)
	}
	if got := f.Value("flashsale_breaker_state", "state", "closed"); got != 1 {
		t.Errorf("breaker closed = %v, want 1", got)
	}
	if got := f.Value("flashsale_engine_calls_total", "op", "reserve", "outcome", "ok"); got != 40 {
		t.Errorf("engine reserves ok = %v, want 40", got)
	}
}
