package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/postgres"
	"github.com/flashsale/flashsale/redis"
)

// dbOrder is one row of the orders table read straight from the database,
// so the test sees the timestamps the consumer and the reaper wrote rather
// than the API's view of them.
type dbOrder struct {
	ID, UserID, Status                  string
	Rooms                               int
	HoldExpiresMS, CreatedMS, UpdatedMS int64
}

// rowScanner is what database/sql's and pgx's rows have in common.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// mustOpenOrders opens the cluster's database (MariaDB or PostgreSQL, by the
// URL's scheme) and returns a function that reads every order of a sale.
func mustOpenOrders(tb testing.TB, dbURL string) func(saleID string) []dbOrder {
	tb.Helper()
	ctx := context.Background()
	const cols = `id, user_id, status, rooms, hold_expires_at_ms, created_at_ms, updated_at_ms FROM orders WHERE sale_id = `
	scan := func(rows rowScanner) []dbOrder {
		var out []dbOrder
		for rows.Next() {
			var o dbOrder
			if err := rows.Scan(&o.ID, &o.UserID, &o.Status, &o.Rooms, &o.HoldExpiresMS, &o.CreatedMS, &o.UpdatedMS); err != nil {
				tb.Fatal(err)
			}
			out = append(out, o)
		}
		if err := rows.Err(); err != nil {
			tb.Fatal(err)
		}
		return out
	}
	if strings.HasPrefix(dbURL, "mysql://") {
		s, err := mysql.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return func(saleID string) []dbOrder {
			rows, err := s.DB().QueryContext(ctx, "SELECT "+cols+"?", saleID)
			if err != nil {
				tb.Fatal(err)
			}
			defer rows.Close()
			return scan(rows)
		}
	}
	s, err := postgres.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return func(saleID string) []dbOrder {
		rows, err := s.Pool().Query(ctx, "SELECT "+cols+"$1", saleID)
		if err != nil {
			tb.Fatal(err)
		}
		defer rows.Close()
		return scan(rows)
	}
}

// startClusterEngine starts n instances and opens the Redis engine they
// share in the test, on the cluster's key prefix, so the test can read and
// touch the stock the instances share.
func startClusterEngine(t *testing.T, n int, dbURL string, extra ...string) (*cluster, *redis.Engine) {
	t.Helper()
	c := startCluster(t, n, dbURL, extra...)
	e, err := redis.Open(context.Background(), c.redis, redis.Options{Prefix: c.prefix, PoolSize: 8}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return c, e
}

// getOrder asks instance c for an order as user.
func getOrder(ctx context.Context, c *client, user, id string) (int, orderJSON, error) {
	var o orderJSON
	status, err := c.do(ctx, "GET", "/api/orders/"+id, c.jwt(user), nil, nil, &o)
	return status, o, err
}

// percentile returns the q-quantile (nearest rank) of sorted values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(0, int(math.Ceil(q*float64(len(sorted))))-1)]
}

// TestDistributedHolds runs three instances on a sale whose holds last one
// second and keeps buying for several seconds, so holds expire while the
// storm runs and the released rooms are bought again; some orders are paid.
// Once everything settles it proves I5 and I1: every expired hold was
// released exactly once (Redis and the database agree order by order, and
// Redis available + held + sold == stock), released units were sold again
// without the database refusing any, and the release latency (updated_at -
// hold_expires_at of each expired row) has p99 under one second.
//
// That bound is the machine's as much as the code's: in CI, with another
// package's storm beside it on two cores, p99 reached 1.03 s, and with two
// busy loops beside it 1.38 s, every reaper transaction waiting for rows
// (user_rooms, notice_lock) held by consumer batches whose process was
// waiting for a core. So it runs alone among the tests that use the
// services (testenv.Alone), as it would in production.
//
// One storm per database, then a sub-test for each concern of what it
// left: the books, releases, the release latency, the rooms bought again.
func TestDistributedHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("distributed storm skipped in -short")
	}
	testenv.Alone(t)
	for name, db := range distributedDatabases(t) {
		t.Run(name, func(t *testing.T) {
			dbURL := db(t)
			c, engine := startClusterEngine(t, 3, dbURL)
			readOrders := mustOpenOrders(t, dbURL)
			sale := saleJSON([]int{holdsStock}, 1, true)
			sale["hold_seconds"] = 1
			r := newHoldsRun(c, c.clients[0].createSale(t, sale))
			r.storm(t, name)
			if t.Failed() {
				t.FailNow()
			}
			r.checkRefusals(t)
			orders, night := r.settle(t, readOrders)
			t.Run("books", func(t *testing.T) { r.checkBooks(t, orders, night) })
			t.Run("released_once", func(t *testing.T) { checkReleasedOnce(t, engine, orders) })
			t.Run("release_latency", func(t *testing.T) { checkReleaseLatency(t, name, orders) })
			t.Run("bought_again", func(t *testing.T) { r.checkBoughtAgain(t, name, orders) })
			if _, dead := c.queueDepth(t); dead != 0 {
				t.Errorf("%d messages dead-lettered", dead)
			}
		})
	}
}

// The storm of TestDistributedHolds: guests buying back to back for
// holdsStorm, at random among holdsUsers, on holdsStock rooms held a second.
const (
	holdsStock   = 300
	holdsUsers   = 3000
	holdsWorkers = 24
	holdsPayers  = 4
	holdsStorm   = 3500 * time.Millisecond
)

// holdsRun is one storm of TestDistributedHolds and what it was answered.
type holdsRun struct {
	c     *cluster
	id    string // the sale's
	start time.Time

	mu        sync.Mutex
	accepted  map[string]string // order -> user
	paid      map[string]bool
	codes     map[string]int // refusals
	payResult map[string]int
	samples   atomic.Int64 // the monitor's admin views
}

func newHoldsRun(c *cluster, saleID string) *holdsRun {
	return &holdsRun{c: c, id: saleID, accepted: map[string]string{}, paid: map[string]bool{},
		codes: map[string]int{}, payResult: map[string]int{}}
}

// storm runs the buyers, the payers and the monitor until the buyers stop,
// and waits for all of them.
func (r *holdsRun) storm(t *testing.T, name string) {
	var (
		wg, payWG sync.WaitGroup
		toPay     = make(chan string, 1024)
		stop      = make(chan struct{})
		monitor   = make(chan struct{})
	)
	go func() { defer close(monitor); r.monitor(t, stop) }()
	for range holdsPayers {
		payWG.Go(func() {
			for oid := range toPay {
				r.pay(t, oid)
			}
		})
	}
	r.start = time.Now()
	for w := range holdsWorkers {
		wg.Go(func() { r.buy(t, w, toPay) })
	}
	wg.Wait()
	close(toPay)
	payWG.Wait()
	close(stop)
	<-monitor
	t.Logf("%s: %d accepted, %d paid, payments %v, refused %v, %d admin samples in %v",
		name, len(r.accepted), len(r.paid), r.payResult, r.codes, r.samples.Load(), time.Since(r.start).Round(time.Millisecond))
}

// monitor samples the admin view every 50 ms until stop: the engine never
// shows more than the stock, the database never holds or sells more than it.
func (r *holdsRun) monitor(t *testing.T, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		var v adminSaleJSON
		cl := r.c.clients[i%len(r.c.clients)]
		status, err := cl.do(context.Background(), "GET", "/api/admin/sales/"+r.id, cl.admin, nil, nil, &v)
		if err == nil && status == http.StatusServiceUnavailable {
			continue // the database past the request's deadline on a loaded machine: no sample, not a fault
		}
		if err != nil || status != http.StatusOK {
			t.Errorf("admin sale during the storm: %d %v", status, err)
			continue
		}
		if n := v.Nights[0]; n.Available < 0 || n.Available > holdsStock || n.Held+n.Sold > holdsStock {
			t.Errorf("during the storm: night %+v", n)
		}
		r.samples.Add(1)
	}
}

// buy is buyer w: a guest at a time, a token from one instance and the
// purchase at the next, until the storm ends; one accepted order in eight
// goes to the payers.
func (r *holdsRun) buy(t *testing.T, w int, toPay chan<- string) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(r.start.UnixNano())))
	cs := r.c.clients
	for i := 0; time.Since(r.start) < holdsStorm; i++ {
		user := fmt.Sprintf("guest-%05d", rng.IntN(holdsUsers))
		status, o, err := purchaseAcross(context.Background(), cs[(w+i)%len(cs)], cs[(w+i+1)%len(cs)], r.id, user)
		switch {
		case err != nil:
			t.Errorf("%s: %v", user, err)
			return
		case status == http.StatusAccepted:
			r.mu.Lock()
			r.accepted[o.OrderID] = user
			n := len(r.accepted)
			r.mu.Unlock()
			if n%8 == 0 {
				toPay <- o.OrderID
			}
		default:
			r.mu.Lock()
			r.codes[o.Error.Code]++
			r.mu.Unlock()
		}
	}
}

// pay confirms an order, retrying for up to 10 s while it is still pending
// or the answer is a 503; a payment that arrives after the expiry may
// retake the rooms or be told hold_expired.
func (r *holdsRun) pay(t *testing.T, oid string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var o orderJSON
		cl := r.c.clients[rand.IntN(len(r.c.clients))]
		status, err := cl.do(context.Background(), "POST", "/api/orders/"+oid+"/paid", cl.admin, map[string]any{"payment_ref": "pay-" + oid}, nil, &o)
		switch {
		case err != nil:
			t.Errorf("pay %s: %v", oid, err)
		case status == http.StatusOK && o.Status == "paid":
			r.mu.Lock()
			r.paid[oid] = true
			r.payResult["paid"]++
			r.mu.Unlock()
		case status == http.StatusConflict && o.Error.Code == flashsale.EOrderPending && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond) // still pending: retry
			continue
		case status == http.StatusServiceUnavailable && time.Now().Before(deadline):
			// What the contract asks of the payment platform: a 503
			// (here the database past the 1 s request deadline under
			// the storm, CI once) is retried.
			time.Sleep(50 * time.Millisecond)
			continue
		case status == http.StatusConflict && o.Error.Code == flashsale.EHoldExpired:
			r.mu.Lock()
			r.payResult["hold_expired"]++
			r.mu.Unlock()
		default:
			t.Errorf("pay %s: %d %+v", oid, status, o)
		}
		return
	}
}

// checkRefusals: a purchase was refused only as sold out or over the limit.
func (r *holdsRun) checkRefusals(t *testing.T) {
	for code := range r.codes {
		if code != flashsale.ESoldOut && code != flashsale.ELimitExceeded {
			t.Errorf("unexpected refusal %q", code)
		}
	}
}

// settle waits up to 30 s until every 202 is a row, the queue is empty, no
// hold is left (each lasted a second), and Redis's available plus the
// database's sold is the stock; it returns the rows and the night then.
func (r *holdsRun) settle(t *testing.T, readOrders func(saleID string) []dbOrder) ([]dbOrder, adminNight) {
	var (
		orders             []dbOrder
		n                  adminNight
		found, held, ready int
	)
	if !testenv.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		orders = readOrders(r.id)
		found, held = 0, 0
		for _, o := range orders {
			if _, ok := r.accepted[o.ID]; ok {
				found++
			}
			if o.Status == string(flashsale.OrderHeld) {
				held++
			}
		}
		ready, _ = r.c.queueDepth(t)
		n = r.c.clients[0].adminSale(t, r.id).Nights[0]
		return found == len(r.accepted) && held == 0 && ready == 0 && n.Held == 0 && n.Available+n.Sold == holdsStock
	}) {
		t.Fatalf("not settled: %d of %d 202s in the database, %d held, %d ready in queue, night %+v",
			found, len(r.accepted), held, ready, n)
	}
	t.Logf("settled %v after the storm", time.Since(r.start.Add(holdsStorm)).Round(time.Millisecond))
	return orders, n
}

// checkBooks: one row per 202, each of its guest, paid exactly where the
// payment was answered 200, none failed; the night's counters are the sum
// of the active rows and add up to the stock.
func (r *holdsRun) checkBooks(t *testing.T, orders []dbOrder, n adminNight) {
	statuses := map[string]int{}
	activeRooms, paidRows := 0, 0
	for _, o := range orders {
		statuses[o.Status]++
		if u, ok := r.accepted[o.ID]; !ok || u != o.UserID {
			t.Errorf("order %s of %s was never answered 202 (202 said %q)", o.ID, o.UserID, u)
		}
		switch flashsale.OrderStatus(o.Status) {
		case flashsale.OrderHeld, flashsale.OrderPaid:
			activeRooms += o.Rooms
		}
		if o.Status == string(flashsale.OrderPaid) {
			paidRows++
			if !r.paid[o.ID] {
				t.Errorf("order %s is paid but its payment was not answered 200", o.ID)
			}
		}
	}
	t.Logf("orders by status: %v; night %+v", statuses, n)
	if got, want := len(orders), len(r.accepted); got != want {
		t.Errorf("%d order rows, want one per 202 (%d)", got, want)
	}
	if got, want := paidRows, len(r.paid); got != want {
		t.Errorf("%d paid rows, want %d", got, want)
	}
	if got := statuses[string(flashsale.OrderFailed)]; got != 0 {
		t.Errorf("%d orders failed: the engine let a guest buy rooms the database had not released", got)
	}
	if got, want := n.Held+n.Sold, activeRooms; got != want {
		t.Errorf("database held+sold = %d, rooms of held and paid rows = %d", got, want)
	}
	if got, want := n.Available+n.Held+n.Sold, holdsStock; got != want {
		t.Errorf("Redis available %d + held %d + sold %d = %d, want stock %d", n.Available, n.Held, n.Sold, got, want)
	}
}

// checkReleasedOnce: Redis marks inactive exactly the rows the database
// ended, and no row it still counts.
func checkReleasedOnce(t *testing.T, engine *redis.Engine, orders []dbOrder) {
	released, expired := 0, 0
	for _, o := range orders {
		r, err := engine.Reservation(context.Background(), o.ID)
		if err != nil {
			t.Fatalf("engine reservation %s: %v", o.ID, err)
		}
		if want := flashsale.OrderStatus(o.Status).Active(); r.Active != want {
			t.Errorf("order %s is %s in the database but active=%v in Redis", o.ID, o.Status, r.Active)
		}
		if !r.Active {
			released++
		}
		if o.Status == string(flashsale.OrderExpired) {
			expired++
		}
	}
	if released != expired {
		t.Errorf("Redis released %d reservations, the database expired %d orders", released, expired)
	}
}

// checkReleaseLatency is I5: each expired hold was released after its
// expiry, never before, and the p99 of how long after is under a second.
func checkReleaseLatency(t *testing.T, name string, orders []dbOrder) {
	var lat []time.Duration
	for _, o := range orders {
		if o.Status != string(flashsale.OrderExpired) {
			continue
		}
		d := time.Duration(o.UpdatedMS-o.HoldExpiresMS) * time.Millisecond
		if d < 0 {
			t.Errorf("order %s released %v before its hold expired", o.ID, -d)
		}
		lat = append(lat, d)
	}
	if len(lat) == 0 {
		t.Fatal("no hold expired")
	}
	slices.Sort(lat)
	// A row the consumer wrote after its hold had ended adds its queue
	// time to the latency: log how late the latest one landed, so a slow
	// p99 can be told apart from a slow queue.
	var landedLate time.Duration
	for _, o := range orders {
		landedLate = max(landedLate, time.Duration(o.CreatedMS-o.HoldExpiresMS)*time.Millisecond)
	}
	p50, p99, worst := percentile(lat, 0.50), percentile(lat, 0.99), lat[len(lat)-1]
	t.Logf("%s: release latency over %d expired holds: p50 %v, p99 %v, max %v (latest row landed %v after its expiry)",
		name, len(lat), p50, p99, worst, landedLate)
	if p99 >= time.Second {
		t.Errorf("release latency p99 = %v, want < 1s (I5)", p99)
	}
}

// checkBoughtAgain: released rooms were sold again: more 202s than rooms,
// and orders written after the first release landed as holds.
func (r *holdsRun) checkBoughtAgain(t *testing.T, name string, orders []dbOrder) {
	firstRelease := int64(math.MaxInt64)
	for _, o := range orders {
		if o.Status == string(flashsale.OrderExpired) {
			firstRelease = min(firstRelease, o.UpdatedMS)
		}
	}
	if firstRelease == math.MaxInt64 {
		t.Skip("no hold expired (release_latency fails)")
	}
	rebought := 0
	for _, o := range orders {
		if o.CreatedMS > firstRelease && o.Status != string(flashsale.OrderFailed) {
			rebought++
		}
	}
	t.Logf("%s: %d orders written after the first release at +%v", name, rebought,
		time.UnixMilli(firstRelease).Sub(r.start).Round(time.Millisecond))
	if len(r.accepted) <= holdsStock {
		t.Errorf("%d purchases accepted for %d rooms: released rooms were never bought again", len(r.accepted), holdsStock)
	}
	if rebought == 0 {
		t.Error("no order was written after the first release")
	}
}

// TestDistributedPending caps the consumers at five orders a second each so
// accepted orders wait in the queue: a 202 says pending, the owner reads the
// order as pending (the engine's record) rather than 404 until the
// consumer writes it, then as held; another user gets 404 either way.
func TestDistributedPending(t *testing.T) {
	if testing.Short() {
		t.Skip("distributed storm skipped in -short")
	}
	for name, db := range distributedDatabases(t) {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, 3, db(t), "FLASHSALE_ORDER_RATE=5")
			id := c.clients[0].createSale(t, saleJSON([]int{100}, 1, true))
			ctx := context.Background()
			const buyers = 40

			type buy struct{ user, order string }
			var (
				mu     sync.Mutex
				bought []buy
				wg     sync.WaitGroup
			)
			for i := range buyers {
				wg.Go(func() {
					user := fmt.Sprintf("pending-%02d", i)
					status, o, err := purchaseAcross(ctx, c.clients[i%3], c.clients[(i+1)%3], id, user)
					if err != nil || status != http.StatusAccepted {
						t.Errorf("%s: %d %v %+v", user, status, err, o)
						return
					}
					if o.Status != string(flashsale.OrderPending) {
						t.Errorf("%s: 202 says %q, want pending", user, o.Status)
					}
					mu.Lock()
					bought = append(bought, buy{user, o.OrderID})
					mu.Unlock()
				})
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}

			// Read each order back at once, newest first (the last ones
			// wait longest in the queue): pending or held, never 404. For
			// one that is pending before and after, a stranger's read is
			// 404 while it is provably pending.
			pending, strangerChecked := 0, false
			for i := len(bought) - 1; i >= 0; i-- {
				b := bought[i]
				cl := c.clients[i%3]
				status, o, err := getOrder(ctx, cl, b.user, b.order)
				if err != nil || status != http.StatusOK || (o.Status != "pending" && o.Status != "held") || o.UserID != b.user {
					t.Fatalf("owner reads %s right after its 202: %d %v %+v", b.order, status, err, o)
				}
				if o.Status != "pending" {
					continue
				}
				pending++
				if strangerChecked {
					continue
				}
				status, so, err := getOrder(ctx, cl, "stranger", b.order)
				if err != nil || status != http.StatusNotFound || so.Error.Code != flashsale.ENotFound {
					t.Errorf("a stranger reads pending order %s: %d %v %+v", b.order, status, err, so)
				}
				if _, again, _ := getOrder(ctx, cl, b.user, b.order); again.Status == "pending" {
					strangerChecked = true
				}
			}
			t.Logf("%s: %d of %d orders read back as pending", name, pending, len(bought))
			if pending == 0 {
				t.Fatal("no order was seen pending: the rate cap did not keep any in the queue")
			}
			if !strangerChecked {
				t.Error("no order stayed pending long enough to check a stranger's read")
			}

			// Then each becomes held once the consumer writes it.
			start := time.Now()
			deadline := start.Add(30 * time.Second)
			for i, b := range bought {
				for {
					status, o, err := getOrder(ctx, c.clients[i%3], b.user, b.order)
					if err != nil || status != http.StatusOK {
						t.Fatalf("owner reads %s: %d %v %+v", b.order, status, err, o)
					}
					if o.Status == "held" {
						break
					}
					if o.Status != "pending" || time.Now().After(deadline) {
						t.Fatalf("order %s is %q after %v, want held", b.order, o.Status, time.Since(start))
					}
					time.Sleep(50 * time.Millisecond)
				}
				if status, o, err := getOrder(ctx, c.clients[i%3], "stranger", b.order); err != nil || status != http.StatusNotFound {
					t.Errorf("a stranger reads held order %s: %d %v %+v", b.order, status, err, o)
				}
			}
			t.Logf("%s: all %d held %v after the last 202", name, len(bought), time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestDistributedRelay leaves what a process killed between the reserve
// script and the publish leaves: reservations in Redis (stock taken, in
// the outbox) that RabbitMQ never saw. The relays in the running instances
// must republish them, and each must land as exactly one held order.
func TestDistributedRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("distributed storm skipped in -short")
	}
	for name, db := range distributedDatabases(t) {
		t.Run(name, func(t *testing.T) {
			dbURL := db(t)
			c, engine := startClusterEngine(t, 3, dbURL)
			readOrders := mustOpenOrders(t, dbURL)
			const stock, orphans = 10, 4
			id := c.clients[0].createSale(t, saleJSON([]int{stock}, 1, true))
			ctx := context.Background()

			users := map[string]string{} // order -> user
			for i := range orphans {
				r := &flashsale.Reservation{
					OrderID: ulid.Make().String(), SaleID: id, UserID: fmt.Sprintf("orphan-%d", i),
					Nights: 1, Rooms: 1, Amount: 39900,
					HoldExpiresAt: time.Now().Add(5 * time.Minute).UTC().Truncate(time.Millisecond),
					Active:        true,
				}
				if _, err := engine.Reserve(ctx, r); err != nil {
					t.Fatalf("reserve %d: %v", i, err)
				}
				users[r.OrderID] = r.UserID
			}
			start := time.Now()
			// Until the relay runs the owner sees the order pending.
			for oid, user := range users {
				if status, o, err := getOrder(ctx, c.clients[1], user, oid); err != nil || status != http.StatusOK || (o.Status != "pending" && o.Status != "held") {
					t.Errorf("owner reads orphan %s: %d %v %+v", oid, status, err, o)
				}
			}

			var (
				orders []dbOrder
				held   int
			)
			if !testenv.Poll(time.Until(start.Add(10*time.Second)), 50*time.Millisecond, func() bool {
				orders, held = readOrders(id), 0
				for _, o := range orders {
					if _, ok := users[o.ID]; ok && o.Status == string(flashsale.OrderHeld) {
						held++
					}
				}
				return held == orphans
			}) {
				t.Fatalf("after %v only %d of %d orphaned reservations are held orders: %+v", time.Since(start), held, orphans, orders)
			}
			t.Logf("%s: %d orphaned reservations held in the database %v after the reserve", name, orphans, time.Since(start).Round(time.Millisecond))

			// The relay confirms what it republished, so the outbox empties
			// and nothing is sent again and again.
			var (
				left  []flashsale.Reservation
				ready int
			)
			if !testenv.Poll(time.Until(start.Add(20*time.Second)), 50*time.Millisecond, func() bool {
				var err error
				if left, err = engine.Unconfirmed(ctx, time.Now().Add(time.Hour), 100); err != nil {
					t.Fatal(err)
				}
				ready, _ = c.queueDepth(t)
				return len(left) == 0 && ready == 0
			}) {
				t.Fatalf("outbox still has %d reservations, queue %d ready", len(left), ready)
			}

			// Exactly once: one row each and nothing else, counted once.
			orders = readOrders(id)
			if got, want := len(orders), orphans; got != want {
				t.Errorf("%d order rows, want %d: %+v", got, want, orders)
			}
			for _, o := range orders {
				if users[o.ID] != o.UserID || o.Status != string(flashsale.OrderHeld) || o.Rooms != 1 {
					t.Errorf("row %+v, want a held order of %s", o, users[o.ID])
				}
			}
			n := c.clients[2].adminSale(t, id).Nights[0]
			if n.Held != orphans || n.Sold != 0 || n.Available != stock-orphans {
				t.Errorf("night %+v, want held %d, available %d", n, orphans, stock-orphans)
			}
			if _, dead := c.queueDepth(t); dead != 0 {
				t.Errorf("%d messages dead-lettered", dead)
			}
			// The orphans count toward their owners' limit everywhere.
			for oid, user := range users {
				status, o, err := c.clients[0].purchase(ctx, id, user, true, nil, "")
				if err != nil || status != http.StatusConflict || o.Error.Code != flashsale.ELimitExceeded {
					t.Errorf("%s (owns %s) buys again: %d %v %+v, want limit_exceeded", user, oid, status, err, o)
				}
				status, o, err = getOrder(ctx, c.clients[0], user, oid)
				if err != nil || status != http.StatusOK || o.Status != "held" {
					t.Errorf("owner reads %s: %d %v %+v", oid, status, err, o)
				}
			}
		})
	}
}
