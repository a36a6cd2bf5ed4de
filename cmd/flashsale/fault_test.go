package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xrate "golang.org/x/time/rate"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/faultproxy"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The fault suite: real processes on the real services, each fault made
// certain by a proxy the test owns on the link it breaks (the shared
// services are never stopped). Each scenario runs a storm of distinct
// guests who retry a 503 with the same Idempotency-Key (what the API asks
// of clients), injects its fault mid-storm, then sells the rest of the
// stock to fresh guests and proves the books with checkBooks: every 202
// is a held order, none failed, nothing oversold, no duplicates, nobody
// over the limit, and the sale sold out exactly. docs/reliability.md
// records the figures these tests log.

// faultStock and faultGuests leave a quarter of the stock for after the
// fault, so "the rest sells out exactly" means something.
const (
	faultStock  = 400
	faultGuests = 300
)

// faultResult is what a storm saw.
type faultResult struct {
	accepted map[string]string // order id -> user, every 202
	requests atomic.Int64      // HTTP purchase attempts, retries included
	retried  atomic.Int64      // 503s answered and retried
}

// faultStorm sends guests g-0..g-(n-1) of run at the sale across the
// instances, each retrying a 503 (or a broken connection) with the same
// key until it gets a final answer. fault runs once at+1 purchases have
// been accepted, while the storm goes on.
func faultStorm(t *testing.T, c *cluster, saleID, run string, n, at int, fault func()) *faultResult {
	t.Helper()
	return faultStormPaced(t, c, saleID, run, n, at, 0, fault)
}

// faultStormPaced is faultStorm with at most perSecond new guests a second
// (0: as fast as they go), so a storm still runs when a slow fault ends.
func faultStormPaced(t *testing.T, c *cluster, saleID, run string, n, at int, perSecond float64, fault func()) *faultResult {
	t.Helper()
	res := &faultResult{accepted: map[string]string{}}
	pace := xrate.NewLimiter(xrate.Inf, 1)
	if perSecond > 0 {
		pace = xrate.NewLimiter(xrate.Limit(perSecond), 1)
	}
	var (
		mu      sync.Mutex
		count   atomic.Int64
		next    atomic.Int64
		faulted sync.WaitGroup
		once    sync.Once
		wg      sync.WaitGroup
	)
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				pace.Wait(context.Background())
				user := fmt.Sprintf("%s-%05d", run, i)
				code := buyUntilFinal(t, c, res, saleID, user, "key-"+user, i, func(orderID string) {
					mu.Lock()
					res.accepted[orderID] = user
					mu.Unlock()
					if count.Add(1) > int64(at) && fault != nil {
						once.Do(func() { faulted.Go(fault) })
					}
				})
				if code == "" {
					return // the test failed
				}
			}
		})
	}
	wg.Wait()
	faulted.Wait()
	t.Logf("%s: %d guests, %d requests, %d 503s retried, %d accepted", run, n, res.requests.Load(), res.retried.Load(), len(res.accepted))
	return res
}

// buyUntilFinal buys one room for user, retrying with the same key until
// the answer is final; it returns "accepted" or the refusal's code.
func buyUntilFinal(t *testing.T, c *cluster, res *faultResult, saleID, user, key string, i int, onAccepted func(orderID string)) string {
	deadline := time.Now().Add(3 * time.Minute)
	for try := 0; ; try++ {
		if time.Now().After(deadline) {
			t.Errorf("%s: no final answer in 3 minutes", user)
			return ""
		}
		res.requests.Add(1)
		cl := c.clients[(i+try)%len(c.clients)]
		status, o, err := cl.purchase(context.Background(), saleID, user, true, nil, key)
		switch {
		case err != nil || status == http.StatusServiceUnavailable || status == 0:
			res.retried.Add(1)
			time.Sleep(50 * time.Millisecond)
			continue
		case status == http.StatusAccepted:
			onAccepted(o.OrderID)
			return "accepted"
		case o.Error.Code == "":
			t.Errorf("%s: status %d without an error code", user, status)
			return ""
		}
		return o.Error.Code
	}
}

// sellRest buys with fresh guests until the sale answers sold_out, and adds
// their 202s to res.
func sellRest(t *testing.T, c *cluster, saleID string, res *faultResult) {
	t.Helper()
	for i := 0; ; i++ {
		user := fmt.Sprintf("rest-%05d", i)
		code := buyUntilFinal(t, c, res, saleID, user, "key-"+user, i, func(orderID string) { res.accepted[orderID] = user })
		switch code {
		case "accepted":
			continue
		case "sold_out":
			return
		default:
			t.Fatalf("%s: %q while selling the rest", user, code)
		}
	}
}

// balanced proves the books (checkBooks, exact) and logs the scenario's
// figures for docs/reliability.md.
func balanced(t *testing.T, c *cluster, saleID string, res *faultResult) {
	t.Helper()
	balancedDead(t, c, saleID, res, 0)
}

// balancedDead is balanced for a scenario that put dead messages of its own
// in the queue: exactly dead of them end in the dead-letter queue.
func balancedDead(t *testing.T, c *cluster, saleID string, res *faultResult, dead int) {
	t.Helper()
	checkBooksDead(t, c, saleID, faultStock, res.accepted, true, dead)
	if !t.Failed() {
		t.Logf("books balanced: %d purchase requests, %d 202s, %d held orders; 0 oversold, 0 lost, 0 failed after a 202, 0 duplicates, nobody over the limit",
			res.requests.Load(), len(res.accepted), faultStock)
	}
}

// proxied starts a proxy to the host of raw and returns it with raw
// pointed through it.
func proxied(t *testing.T, raw string) (*faultproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.Start(t, u.Host)
	return p, p.URL(raw)
}

// TestFaultLostConfirm holds the broker's replies at the proxy for a second
// mid-storm (publishes reach the queue, confirms never come back) and then
// cuts the link. Before, every such publish handed its units back although
// the broker kept the message: over 60% of the 202s ended failed and Redis
// kept phantom rooms. Now the outcome is indeterminate, the units stay, the
// relay republishes, and the books balance.
func TestFaultLostConfirm(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	proxy, amqpURL := proxied(t, testenv.URL(t, testenv.AMQP))
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_AMQP_URL="+amqpURL, "FLASHSALE_LOG_LEVEL=info")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	res := faultStorm(t, c, id, "lost", faultGuests, 100, func() {
		proxy.HoldReplies(true)
		time.Sleep(time.Second)
		proxy.Cut()
		proxy.HoldReplies(false)
		t.Logf("broker replies held for 1 s, then the link cut")
	})
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// TestFaultDatabaseDown makes the database unreachable for 20 s mid-storm
// (every connection cut, new ones refused): longer than MaxAttempts
// redeliveries last. Before, a 4-minute outage dead-lettered every queued
// order and all their owners read 404. Now purchases go on (the sale is
// cached, stock is in Redis, orders in the queue), their owners read
// pending, the consumer waits the outage out, and every 202 is written.
func TestFaultDatabaseDown(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	for name, db := range distributedDatabases(t) {
		t.Run(name, func(t *testing.T) { faultDatabaseDown(t, db(t)) })
	}
}

func faultDatabaseDown(t *testing.T, dbURL string) {
	proxy, viaProxy := proxied(t, dbURL)
	c := startCluster(t, 2, dbURL, "FLASHSALE_DATABASE_URL="+viaProxy)
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	var during faultResult
	during.accepted = map[string]string{}
	res := faultStorm(t, c, id, "dbdown", faultGuests, 50, func() {
		proxy.Refuse(true)
		proxy.Cut()
		start := time.Now()
		// Purchases made during the outage are 202s too, and their owners
		// read them (pending) while the database is still down.
		for i := 0; time.Since(start) < 20*time.Second; i++ {
			user := fmt.Sprintf("during-%05d", i)
			buyUntilFinal(t, c, &during, id, user, "key-"+user, i, func(orderID string) {
				// A 503 is a fair answer on a machine too loaded to finish
				// within the deadline (the guest retries); a 404 or a 500,
				// what this used to answer, never is.
				var o orderJSON
				var status int
				var err error
				for try := 0; try < 5; try++ {
					o = orderJSON{}
					status, err = c.clients[(i+1)%2].do(context.Background(), "GET", "/api/orders/"+orderID, c.clients[0].jwt(user), nil, nil, &o)
					if status != http.StatusServiceUnavailable {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil || status != 200 || o.Status != "pending" {
					t.Errorf("order %s read with the database down: %d %v %+v, want 200 pending", orderID, status, err, o)
				}
				during.accepted[orderID] = user
			})
			time.Sleep(500 * time.Millisecond)
		}
		// What needs the database answers 503, never 500; the instance
		// stays ready, since it still sells.
		for _, path := range []string{"/api/sales", "/api/admin/sales/" + id} {
			var e apiError
			if status, err := c.clients[0].do(context.Background(), "GET", path, c.clients[0].admin, nil, nil, &e); err != nil || status != 503 {
				t.Errorf("GET %s with the database down: %d %v %+v, want 503", path, status, err, e)
			}
		}
		ready := 0 // 503 every time is the old behaviour; one may be load
		for try := 0; try < 5 && ready != 200; try++ {
			if resp, err := http.Get("http://" + c.addrs[0] + "/readyz"); err == nil {
				ready = resp.StatusCode
				resp.Body.Close()
			}
			time.Sleep(100 * time.Millisecond)
		}
		if ready != 200 {
			t.Errorf("/readyz with the database down: %d, want 200 (purchases still sell)", ready)
		}
		proxy.Refuse(false)
		t.Logf("database unreachable for %v; %d purchases accepted meanwhile", time.Since(start).Round(time.Millisecond), len(during.accepted))
	})
	if len(during.accepted) == 0 {
		t.Error("no purchase was accepted while the database was down")
	}
	for oid, u := range during.accepted {
		res.accepted[oid] = u
	}
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// TestFaultSilentStart starts serve against a dependency that accepts
// connections and never answers: it must fail within StartTimeout and say
// what it waited for. (Before, serve hung for over 40 s without listening
// or saying why.)
func TestFaultSilentStart(t *testing.T) {
	dbURL := testenv.MySQLDatabase(t)
	redisURL := testenv.URL(t, testenv.Redis)
	for _, tc := range []struct {
		name, want string
		silence    func(cfg *app.Config)
	}{
		{"Database", "open database", func(cfg *app.Config) {
			p, u := proxied(t, dbURL)
			p.Blackhole(true)
			cfg.DatabaseURL = u
		}},
		{"Redis", "open redis", func(cfg *app.Config) {
			p, u := proxied(t, redisURL)
			p.Blackhole(true)
			cfg.DatabaseURL, cfg.RedisURL = dbURL, u
			cfg.AMQPURL = testenv.URL(t, testenv.AMQP)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := app.ParseConfig(nil, nil, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
			cfg.AdminToken, cfg.JWTSecret = testAdminToken, testJWTSecret
			cfg.StartTimeout = 2 * time.Second
			tc.silence(&cfg)
			m := app.NewMain(cfg, slog.New(slog.DiscardHandler), io.Discard)
			done := make(chan error, 1)
			go func() { done <- m.Open(context.Background()) }()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Open still waiting a minute after a 2 s start timeout")
			}
			m.Close()
			// Redis gives up on its own command timeout, before the start's.
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "timeout") && !strings.Contains(err.Error(), "deadline") {
				t.Fatalf("Open = %v, want an error naming %q and the timeout", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
}

// TestFaultRedisStalled freezes Redis (every byte held at the proxy, as
// SIGSTOP would) for 6 s mid-storm. Before, purchases and /readyz hung until
// the HTTP server's own timeout. Now each answers 503 within its deadline;
// the commands Redis runs when it wakes (the reserves the guests were told
// 503 for) are kept, the guests' retries with their keys find those orders,
// and the books balance.
func TestFaultRedisStalled(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	proxy, redisURL := proxied(t, testenv.URL(t, testenv.Redis))
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+redisURL, "FLASHSALE_REQUEST_TIMEOUT=1s")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	res := faultStorm(t, c, id, "stall", faultGuests, 100, func() {
		proxy.Pause(true)
		start := time.Now()
		probe := func(what string, do func() int) {
			t0 := time.Now()
			status := do()
			// The bound is the deadline plus generous slack for a loaded
			// machine: what is being caught is a hang, not a slow answer.
			if d := time.Since(t0); status != http.StatusServiceUnavailable || d > 3*time.Second {
				t.Errorf("%s with Redis stalled: %d after %v, want 503 within the 1 s deadline", what, status, d)
			}
		}
		probe("purchase", func() int {
			status, _, _ := c.clients[0].purchase(context.Background(), id, "probe", true, nil, "probe-key")
			return status
		})
		probe("readyz", func() int {
			resp, err := http.Get("http://" + c.addrs[1] + "/readyz")
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		})
		time.Sleep(6*time.Second - time.Since(start))
		proxy.Pause(false)
		t.Logf("Redis stalled for %v", time.Since(start).Round(time.Millisecond))
	})
	// The probe's purchase may have been run by Redis after it woke: its
	// owner's retry with the key settles it like any guest's.
	if code := buyUntilFinal(t, c, res, id, "probe", "probe-key", 0, func(oid string) { res.accepted[oid] = "probe" }); code != "accepted" {
		t.Fatalf("probe: %s", code)
	}
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// TestFaultRedisLatency adds 25 ms each way (50 ms a round trip) to every
// Redis command for a whole storm: slower, but no 5xx at all.
func TestFaultRedisLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	proxy, redisURL := proxied(t, testenv.URL(t, testenv.Redis))
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+redisURL)
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	proxy.Latency(25 * time.Millisecond)
	res := faultStorm(t, c, id, "slow", faultGuests, faultGuests, nil)
	if n := res.retried.Load(); n != 0 {
		t.Errorf("%d purchases answered 503 (or dropped) with 50 ms of Redis latency, want 0", n)
	}
	proxy.Latency(0)
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// TestFaultRedisLost kill -9s the test's own Redis mid-storm, with a
// backlog in the queue (the order rate is capped), and starts it again
// empty 3 s later. Before, every purchase was 503 for over a minute until
// an instance was restarted, and a restart's rebuild ignored the queued
// orders: 148 of 1 148 202s ended failed and phantom rooms kept selling.
// Now an instance notices the lost sale, leads a fenced rebuild (every
// consumer paused, the queue drained, then the database loaded), and the
// sale sells on; no owner of a 202 reads 404 meanwhile.
func TestFaultRedisLost(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	rs := testenv.StartRedis(t)
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+rs.URL(), "FLASHSALE_ORDER_RATE=10")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	var p probe
	res := faultStorm(t, c, id, "redislost", faultGuests, 150, func() {
		rs.Kill()
		t.Logf("Redis killed with %d orders written", countOrders(t, c, id))
		time.Sleep(3 * time.Second)
		rs.Start()
		t.Logf("Redis back empty with %d orders written", countOrders(t, c, id))
		p.buy(t, c, id, "probe-lost")
	})
	p.check(t, res)
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// probe times the first 202 after a fault: buy, run as the fault ends,
// buys one room for user until the answer is final; check adds its 202 to
// the storm's and wants it within 30 s.
type probe struct {
	mu       sync.Mutex
	recovery time.Duration
	user     string
	orderID  string
}

func (p *probe) buy(t *testing.T, c *cluster, saleID, user string) {
	back := time.Now()
	var r faultResult
	code := buyUntilFinal(t, c, &r, saleID, user, "probe-key", 0, func(oid string) {
		p.mu.Lock()
		p.recovery, p.user, p.orderID = time.Since(back), user, oid
		p.mu.Unlock()
	})
	if code != "accepted" {
		t.Errorf("probe after the fault: %s", code)
	}
	t.Logf("first purchase accepted %v after the fault ended (%d attempts)", p.recovery.Round(time.Millisecond), r.requests.Load())
}

func (p *probe) check(t *testing.T, res *faultResult) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.orderID != "" {
		res.accepted[p.orderID] = p.user
	}
	if p.recovery == 0 || p.recovery > 30*time.Second {
		t.Errorf("the first 202 after the fault came %v later, want under 30 s", p.recovery)
	}
}

// countOrders is the number of order rows of a sale in the database.
func countOrders(t *testing.T, c *cluster, saleID string) int {
	t.Helper()
	store, err := app.OpenStore(context.Background(), app.Config{DatabaseURL: c.dbURL, StartTimeout: time.Minute}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	snap, err := store.Snapshot(context.Background(), saleID)
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Reservations)
}

// TestFaultBrokerCutTwice closes every broker connection twice, half a
// second apart, mid-storm (without holding replies: whatever was in flight
// when the link went is uncertain). Before, units went back for publishes
// the broker had kept: 274 of 2 273 202s ended failed and a phantom room
// made every later 202 fail. Then (CI, 9 and 12 of 400) a 202 whose retry
// retook it after a failed publish, and whose next publish's outcome was
// lost, was not in the outbox, so the relay never republished it: the
// retake now puts it back (redis/retake.lua). The scheduled audit is left
// at its default here, so only the relay can land such a 202 in time.
func TestFaultBrokerCutTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	proxy, amqpURL := proxied(t, testenv.URL(t, testenv.AMQP))
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_AMQP_URL="+amqpURL, "FLASHSALE_LOG_LEVEL=info")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	res := faultStorm(t, c, id, "cut2", faultGuests, 100, func() {
		proxy.Cut()
		time.Sleep(500 * time.Millisecond)
		proxy.Cut()
		t.Logf("broker connections cut twice")
	})
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// TestFaultQueueDeleted deletes the order queue mid-storm while it holds a
// backlog (the order rate is capped): the messages in it are gone, but each
// is still an active, confirmed reservation in Redis with no order row. The
// consumer's batch in hand is written anyway, and the scheduled audit finds
// the rest stranded and publishes them again. Before, they stayed pending
// forever with their rooms locked.
func TestFaultQueueDeleted(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_ORDER_RATE=20",
		"FLASHSALE_AUDIT_INTERVAL=1s", "FLASHSALE_AUDIT_GRACE=3s")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	res := faultStorm(t, c, id, "qdel", faultGuests, 150, func() {
		conn, ch, err := dialBroker(t)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		n, err := ch.QueueDelete(c.queue+".orders", false, false, false)
		if err != nil {
			t.Error(err)
			return
		}
		t.Logf("order queue deleted with %d messages in it; %d orders written", n, countOrders(t, c, id))
	})
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}
