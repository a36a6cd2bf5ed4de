package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The waiting room under a Redis fault (issue 24, item 6): the queue lives
// in Redis in the distributed shape, and a guest who was told they have a
// place must keep it whatever Redis does. Each scenario runs two instances
// on the test's own redis-server and MariaDB database: wrGuests join a
// room for wrRooms rooms before the start, poll their place and buy when
// admitted; mid-admission Redis fails; afterwards every guest reads the
// ticket they had, nobody waiting is further back than before, nobody
// admitted or served is sent back to wait, and the sale sells out exactly,
// its books balanced.
const (
	wrGuests = 300
	wrRooms  = 30
)

// wrPlace is what a guest last read of their place.
type wrPlace struct {
	status int
	view   flashsale.QueueView
}

// wrRun is a scenario's instances (a cluster, or one embedded process),
// Redis, sale and guests.
type wrRun struct {
	c    *cluster // nil for the embedded shape
	cls  []*client
	rs   *testenv.RedisServer
	rdb  *goredis.Client
	sale string
	mu   sync.Mutex
	// bought are the guests whose purchase was accepted, by order.
	bought map[string]string
}

func startWaitRoomFault(t *testing.T) *wrRun {
	t.Helper()
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	rs := testenv.StartRedis(t)
	u, err := url.Parse(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: u.Host})
	t.Cleanup(func() { rdb.Close() })
	r := startWaitRoomOn(t, rs.URL())
	r.rs, r.rdb = rs, rdb
	return r
}

// startWaitRoomOn starts the two instances on the Redis at redisURL.
func startWaitRoomOn(t *testing.T, redisURL string) *wrRun {
	t.Helper()
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+redisURL,
		"FLASHSALE_LIMIT_PURCHASE_USER=off", "FLASHSALE_LOG_LEVEL=error")
	return &wrRun{c: c, cls: c.clients, bought: map[string]string{}}
}

// on is the instance guest i talks to.
func (r *wrRun) on(i int) *client { return r.cls[i%len(r.cls)] }

func wrUser(i int) string { return fmt.Sprintf("wf%03d", i) }

// open creates the sale, starting lead from now at 10 admissions a
// second, and has every guest join it before the start.
func (r *wrRun) open(t *testing.T, lead time.Duration) time.Time {
	t.Helper()
	start := time.Now().Add(lead).Truncate(time.Second)
	sale := saleJSON([]int{wrRooms}, 1, true)
	sale["starts_at"] = start.Format(time.RFC3339)
	sale["waiting_room"] = map[string]any{"prequeue_minutes": 5, "admit_per_second": 10, "admission_seconds": 60}
	r.sale = r.cls[0].createSale(t, sale)
	var wg sync.WaitGroup
	for i := range wrGuests {
		wg.Go(func() {
			var v flashsale.QueueView
			st, _, err := joinBeforeStart(t.Context(), r.on(i), r.sale, wrUser(i), start, &v)
			if err != nil || st != http.StatusCreated && st != http.StatusOK { // 200: a retry found the place saved
				t.Errorf("%s joins: %d %v", wrUser(i), st, err)
			}
		})
	}
	wg.Wait()
	if time.Now().After(start) {
		t.Fatalf("the joins ran %v past the start", time.Since(start))
	}
	return start
}

// read is every guest's place as they read it now (one poll each);
// status 0 for a guest whose instance did not answer (it was killed).
func (r *wrRun) read(t *testing.T) []wrPlace {
	t.Helper()
	out := make([]wrPlace, wrGuests)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range wrGuests {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cl := r.on(i)
			st, err := cl.do(t.Context(), "GET", "/api/sales/"+r.sale+"/queue", cl.jwt(wrUser(i)), nil, nil, &out[i].view)
			if err == nil {
				out[i].status = st
			}
		})
	}
	wg.Wait()
	return out
}

// buy has every admitted guest of ps buy their room, as the page would.
func (r *wrRun) buy(t *testing.T, ps []wrPlace) {
	t.Helper()
	var wg sync.WaitGroup
	for i, p := range ps {
		if p.status != 200 || p.view.State != flashsale.QueueAdmitted || p.view.AdmittedUntil == nil {
			continue
		}
		r.mu.Lock()
		_, done := r.bought[wrUser(i)]
		r.mu.Unlock()
		if done {
			continue
		}
		wg.Go(func() {
			cl := r.on(i)
			st, o, err := cl.purchase(t.Context(), r.sale, wrUser(i), true, nil, "key-"+wrUser(i))
			switch {
			case err != nil:
				t.Errorf("%s admitted, buys: %v", wrUser(i), err)
			case st == http.StatusAccepted || st == http.StatusOK:
				r.mu.Lock()
				r.bought[wrUser(i)] = o.OrderID
				r.mu.Unlock()
			case st == http.StatusServiceUnavailable:
				// The fault: the guest tries again at the next poll.
			default:
				t.Errorf("%s admitted, but the purchase: %d %+v", wrUser(i), st, o.Error)
			}
		})
	}
	wg.Wait()
}

// follow polls and buys for d.
func (r *wrRun) follow(t *testing.T, d time.Duration) []wrPlace {
	t.Helper()
	var ps []wrPlace
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		ps = r.read(t)
		r.buy(t, ps)
	}
	return ps
}

// after checks the places read after the fault against those before: the
// same ticket; a guest waiting is no further back; one admitted (or who
// bought) is not sent back to wait.
func (r *wrRun) after(t *testing.T, before []wrPlace) {
	t.Helper()
	var ps []wrPlace
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		ps = r.read(t)
		served := 0
		for _, p := range ps {
			if p.status == 200 {
				served++
			}
		}
		if served == wrGuests {
			break
		}
		for i, p := range ps {
			if p.status != 200 && p.status != http.StatusServiceUnavailable && p.status != 0 {
				t.Fatalf("%s after the fault: %d %+v, want their place (or 503 while it is restored)", wrUser(i), p.status, p.view)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d guests could read their place 60 s after the fault", served, wrGuests)
		}
	}
	moved := 0
	for i, b := range before {
		a := ps[i]
		if b.status != 200 {
			continue
		}
		if a.view.Ticket != b.view.Ticket {
			t.Fatalf("%s: ticket %s before the fault, %s after: a new place", wrUser(i), b.view.Ticket, a.view.Ticket)
		}
		switch b.view.State {
		case flashsale.QueueWaiting:
			if a.view.State == flashsale.QueueWaiting && a.view.Position > b.view.Position {
				t.Fatalf("%s: position %d before the fault, %d after", wrUser(i), b.view.Position, a.view.Position)
			}
		case flashsale.QueueAdmitted:
			if a.view.State == flashsale.QueueWaiting || a.view.State == flashsale.QueueSoldOut {
				t.Fatalf("%s: admitted before the fault, %s after", wrUser(i), a.view.State)
			}
		}
		if a.view.State != b.view.State || a.view.Position != b.view.Position {
			moved++
		}
	}
	t.Logf("after the fault: every guest has their ticket; %d of %d moved on meanwhile (admitted, or nearer the front)", moved, wrGuests)
}

// finish sells the rest: the guests follow until every room is bought,
// then the books must balance (nothing oversold, every 202 an order).
func (r *wrRun) finish(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; {
		r.follow(t, time.Second)
		r.mu.Lock()
		n := len(r.bought)
		r.mu.Unlock()
		if n == wrRooms {
			break
		}
		if n > wrRooms {
			t.Fatalf("%d guests bought %d rooms", n, wrRooms)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rooms bought 90 s on", n, wrRooms)
		}
	}
	accepted := map[string]string{}
	for u, o := range r.bought {
		accepted[o] = u
	}
	if r.c != nil {
		checkBooks(t, r.c, r.sale, wrRooms, accepted, true)
		return
	}
	n := r.cls[0].adminSale(t, r.sale).Nights[0]
	if n.Held+n.Sold != wrRooms || n.Available != 0 || n.Held+n.Sold != len(accepted) {
		t.Fatalf("the night after the sale: %+v, %d bought; want %d held or sold, each a 202", n, len(accepted), wrRooms)
	}
}

// TestWaitRoomRedisLost: Redis is killed mid-admission and comes back
// empty (no persistence). The instances answer 503 while the engine and
// the queue are rebuilt from the database, then every guest has the place
// they had.
func TestWaitRoomRedisLost(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	r := startWaitRoomFault(t)
	start := r.open(t, 4*time.Second)
	time.Sleep(time.Until(start))
	before := r.follow(t, 1500*time.Millisecond)
	r.rs.Kill()
	r.rs.Start()
	r.after(t, before)
	r.finish(t)
}

// TestWaitRoomRedisStale: Redis saves a snapshot once everyone has joined
// (before the draw), the queue moves on (the draw, admissions,
// purchases), then Redis is killed and started again from that snapshot:
// a queue with every place but no draw and nobody admitted. Its scripts
// refuse it (stamped by another Redis process) until the rebuild restores
// it from the database; then every guest has the place they had.
func TestWaitRoomRedisStale(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	r := startWaitRoomFault(t)
	start := r.open(t, 4*time.Second)
	if err := r.rdb.Save(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start))
	before := r.follow(t, 1500*time.Millisecond)
	r.rs.Kill()
	r.rs.Start()
	r.after(t, before)
	r.finish(t)
}

// TestWaitRoomInstanceKilled: one of the two instances is killed (-9)
// mid-admission and started again: the queue is in Redis, so its guests
// (who get no answer meanwhile) find their places as they were, and the
// admission clock goes on.
func TestWaitRoomInstanceKilled(t *testing.T) {
	r := startWaitRoomFault(t)
	start := r.open(t, 4*time.Second)
	time.Sleep(time.Until(start))
	before := r.follow(t, 1500*time.Millisecond)
	r.c.kill(t, 1)
	r.follow(t, time.Second) // the other instance's guests go on
	r.c.start(t, 1)
	r.after(t, before)
	r.finish(t)
}

// TestWaitRoomEmbeddedKilled: the embedded shape's process, whose queue
// is in its memory, is killed (-9) mid-admission and started again on its
// data directory: every place comes back from the database (a join is
// answered only once its place is recorded; admissions and purchases are
// recorded as they happen).
func TestWaitRoomEmbeddedKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	bin := buildBinary(t)
	addr := testenv.FreeAddr(t)
	env := []string{"FLASHSALE_ADDR=" + addr, "FLASHSALE_DATA_DIR=" + t.TempDir(), "FLASHSALE_LIMIT_PURCHASE_USER=off",
		"FLASHSALE_ADMIN_TOKEN=" + testAdminToken, "FLASHSALE_JWT_SECRET=" + testJWTSecret, "FLASHSALE_LOG_LEVEL=error"}
	proc := startBinary(t, bin, env...)
	waitReady(t, "http://"+addr)
	r := &wrRun{cls: []*client{newClient("http://"+addr, testAdminToken, testJWTSecret)}, bought: map[string]string{}}
	start := r.open(t, 4*time.Second)
	time.Sleep(time.Until(start))
	before := r.follow(t, 1500*time.Millisecond)
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	startBinary(t, bin, env...)
	waitReady(t, "http://"+addr)
	r.after(t, before)
	r.finish(t)
}

// TestWaitRoomClusterFailover: the queue on a Redis Cluster whose shard
// fails over to a replica that is behind. The sale's replica is stopped
// and cut off from its master, the queue moves on for 2 s (admissions,
// purchases the replica never sees), then the master is killed and the
// replica promoted: its queue is the one from before the cut, stamped by
// another Redis process, so it is refused until the rebuild restores it
// from the database; then every guest has the place they had.
func TestWaitRoomClusterFailover(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	rc := testenv.StartRedisCluster(t, 3, 1, time.Second)
	r := startWaitRoomOn(t, rc.URL())
	start := r.open(t, 4*time.Second)
	master, replicas := rc.Shard("{" + r.sale + "}")
	if len(replicas) != 1 {
		t.Fatalf("shard of %s: master %s, replicas %v", r.sale, master, replicas)
	}
	time.Sleep(time.Until(start))
	r.follow(t, time.Second)
	rc.Signal(replicas[0], syscall.SIGSTOP)
	rc.CutReplicas(master)
	before := r.follow(t, 2*time.Second) // the replica misses this
	rc.Signal(master, syscall.SIGKILL)
	rc.Signal(replicas[0], syscall.SIGCONT)
	for killed := time.Now(); rc.Role(replicas[0]) != "master"; time.Sleep(100 * time.Millisecond) {
		if time.Since(killed) > 30*time.Second {
			t.Fatal("the replica was not promoted in 30 s")
		}
	}
	r.after(t, before)
	r.finish(t)
}
