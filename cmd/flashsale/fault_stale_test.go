package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The stale-Redis suite (issue 21): Redis comes back not empty but behind
// (a snapshot, an AOF), or flushed, or an instance restarts while the
// engine is rebuilt. Each scenario runs two instances on the test's own
// redis-server, RabbitMQ queue and MariaDB database, a storm of staleGuests
// distinct guests with their own Idempotency-Keys, the fault mid-storm,
// then sells the rest to fresh guests and ends with staleEnd: 0 oversold,
// 0 lost 202s, 0 202s failed, sampled same-key retries naming the same
// order, 0 available on every instance's public view, every instance
// ready, `flashsale audit` balanced, and the first 202 after the fault
// within 30 s.
const (
	staleStock  = 1300
	staleGuests = 1000
	stalePace   = 150 // new guests a second: the storm outlasts every fault
)

// staleRun is one scenario's cluster, Redis and sale.
type staleRun struct {
	c    *cluster
	rs   *testenv.RedisServer
	rdb  *goredis.Client // straight to the test's Redis, for the fault
	sale string
}

func startStale(t *testing.T, redisArgs []string, env ...string) *staleRun {
	t.Helper()
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	rs := testenv.StartRedis(t, redisArgs...)
	u, err := url.Parse(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: u.Host})
	t.Cleanup(func() { rdb.Close() })
	s := startStaleOn(t, rs.URL(), env...)
	s.rs, s.rdb = rs, rdb
	return s
}

// startStaleOn starts the instances on the Redis at redisURL and creates the sale.
func startStaleOn(t *testing.T, redisURL string, env ...string) *staleRun {
	t.Helper()
	c := startCluster(t, 2, testenv.MySQLDatabase(t), append([]string{"FLASHSALE_REDIS_URL=" + redisURL}, env...)...)
	return &staleRun{c: c, sale: c.clients[0].createSale(t, saleJSON([]int{staleStock}, 1, true))}
}

// storm runs the guests with fault once at 202s are in; fault returns when
// the fault is over (Redis answers again), and the probe after it times
// the first 202.
func (s *staleRun) storm(t *testing.T, at int, fault func()) *faultResult {
	t.Helper()
	var p probe
	res := faultStormPaced(t, s.c, s.sale, "stale", staleGuests, at, stalePace, func() {
		fault()
		p.buy(t, s.c, s.sale, "probe-stale")
	})
	p.check(t, res)
	return res
}

// end sells the rest and proves everything the issue asks of a scenario.
func (s *staleRun) end(t *testing.T, res *faultResult) {
	t.Helper()
	ctx := context.Background()
	sellRest(t, s.c, s.sale, res)
	checkBooks(t, s.c, s.sale, staleStock, res.accepted, true)
	if !t.Failed() {
		t.Logf("books balanced: %d purchase requests, %d 202s, %d held orders; 0 oversold, 0 lost, 0 failed after a 202, 0 duplicates, nobody over the limit",
			res.requests.Load(), len(res.accepted), staleStock)
	}
	// A retry of a guest's purchase with the same key names the same order.
	n := 0
	for oid, user := range res.accepted {
		if !strings.HasPrefix(user, "stale-") {
			continue
		}
		if n++; n > 50 {
			break
		}
		status, o, err := s.c.clients[n%2].purchase(ctx, s.sale, user, true, nil, "key-"+user)
		if err != nil || (status != http.StatusAccepted && status != http.StatusOK) || o.OrderID != oid {
			t.Errorf("retry of %s with its key: %d %v %+v, want its order %s", user, status, err, o, oid)
		}
	}
	for i, cl := range s.c.clients {
		var v adminSaleJSON
		if status, err := cl.do(ctx, "GET", "/api/sales/"+s.sale, "", nil, nil, &v); err != nil || status != 200 || len(v.Nights) != 1 || v.Nights[0].Available != 0 {
			t.Errorf("instance %d's public view: %d %v %+v, want 0 available", i, status, err, v.Nights)
		}
		cl.waitReadyz(t, fmt.Sprintf("instance %d at the end", i), func(status int, r readiness) bool {
			return status == http.StatusOK && r.Ready && r.Sales == "ok"
		})
	}
	env := map[string]string{}
	for _, kv := range s.c.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	out, err := runAuditCmd(t, env, "--sale", s.sale)
	if err != nil || !strings.Contains(out, "sale "+s.sale+": balanced") {
		t.Errorf("flashsale audit: %v\n%s", err, out)
	}
}

// orders logs how many orders of the sale the database has.
func (s *staleRun) orders(t *testing.T, what string) {
	t.Logf("%s: %d orders in the database", what, countOrders(t, s.c, s.sale))
}

// learn asks again, with the same key, for user's purchase of saleID
// that was answered "not known yet", until the answer is something else
// (at most 10 s: the relay republishes within seconds). It starts at the
// other instance, as a guest's retry may land anywhere.
func (s *staleRun) learn(saleID, user string, i int) (int, orderJSON, error) {
	var (
		status int
		o      orderJSON
		err    error
	)
	for try, end := 1, time.Now().Add(10*time.Second); time.Now().Before(end); try++ {
		time.Sleep(100 * time.Millisecond)
		status, o, err = s.c.clients[(i+try)%len(s.c.clients)].purchase(context.Background(), saleID, user, false, nil, "key-"+user)
		if err != nil || status != http.StatusServiceUnavailable || o.Error.Message != flashsale.ErrIndeterminate.Message {
			break
		}
	}
	return status, o, err
}

// TestStaleSnapshot (issue 21, a): Redis saves a snapshot mid-storm, the
// storm goes on 2 s (hundreds of reservations), then Redis is killed and
// started again from that snapshot 1 s later. Before, nothing noticed: the
// rooms taken after the snapshot were sold again and those 202s ended
// failed. Now every script finds the sale stamped by another Redis
// process, unloads it, and the fenced rebuild reloads it.
func TestStaleSnapshot(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	s := startStale(t, nil)
	res := s.storm(t, 200, func() {
		if err := s.rdb.Save(context.Background()).Err(); err != nil {
			t.Errorf("SAVE: %v", err)
		}
		s.orders(t, "snapshot saved")
		time.Sleep(2 * time.Second)
		s.orders(t, "Redis killed 2 s after the snapshot")
		s.rs.Kill()
		time.Sleep(time.Second)
		s.rs.Start()
	})
	s.end(t, res)
}

// TestStaleAOF (issue 21, b): Redis with an AOF (appendfsync everysec) is
// killed mid-storm and started again from it, missing its last second: a
// kill -9 loses only what the process had not written, so the test cuts
// the AOF back to its length a second before the kill, which is what a
// machine crash leaves of what everysec had not fsynced yet.
func TestStaleAOF(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	s := startStale(t, []string{"--appendonly", "yes", "--appendfsync", "everysec"})
	res := s.storm(t, 300, func() {
		aof := incrAOF(t, s.rs.Dir())
		fi, err := os.Stat(aof)
		if err != nil {
			t.Error(err)
			return
		}
		s.orders(t, "AOF length taken")
		time.Sleep(time.Second)
		s.orders(t, "Redis killed a second later")
		s.rs.Kill()
		if err := os.Truncate(aof, fi.Size()); err != nil {
			t.Error(err)
		}
		s.rs.Start()
	})
	s.end(t, res)
}

// incrAOF is the file Redis 7 appends every write to (its multi-part AOF's
// last incr file).
func incrAOF(t *testing.T, dir string) string {
	files, err := filepath.Glob(filepath.Join(dir, "appendonlydir", "*.incr.aof"))
	if err != nil || len(files) == 0 {
		t.Errorf("no incr AOF in %s: %v", dir, err)
		return ""
	}
	slices.Sort(files)
	return files[len(files)-1]
}

// TestStaleFlush (issue 21, d): FLUSHALL mid-storm: the sale, its
// reservations, the outbox and the fence's keys are gone at once. Redis
// never stops answering, so no instance may leave the load balancer while
// the sale is rebuilt: before, every instance answered /readyz 503 at once.
func TestStaleFlush(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	s := startStale(t, nil)
	notReady := s.watchReady()
	res := s.storm(t, 300, func() {
		if err := s.rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Errorf("FLUSHALL: %v", err)
		}
		s.orders(t, "FLUSHALL")
	})
	if got := notReady(); len(got) > 0 {
		t.Errorf("/readyz was not 200 %d times during the rebuild, first: %s", len(got), got[0])
	}
	s.end(t, res)
}

// TestStaleLostKeys (issue 21, item 4): the sale's idempotency bindings
// are lost mid-storm while the rest of the sale stays (a key evicted, or
// deleted by hand). Before the sentinel nothing noticed: a guest's retry
// with the same Idempotency-Key missed its binding and was answered as a
// new purchase (a second room, or limit_exceeded at a limit of one)
// instead of with its order. Now the next script finds the hash's
// sentinel gone, unloads the sale, and the fenced rebuild reloads the
// bindings from the database and the drained queue.
func TestStaleLostKeys(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	s := startStale(t, nil)
	res := s.storm(t, 300, func() {
		ctx := context.Background()
		keys, err := s.rdb.Keys(ctx, "*{"+s.sale+"}:keys").Result()
		if err != nil || len(keys) != 1 {
			t.Errorf("the sale's keys hash: %v %v", keys, err)
			return
		}
		if err := s.rdb.Del(ctx, keys[0]).Err(); err != nil {
			t.Errorf("DEL %s: %v", keys[0], err)
		}
		s.orders(t, "idempotency bindings deleted")
	})
	s.end(t, res)
}

// watchReady polls every instance's /readyz until the returned function is
// called, which returns each answer that was not 200.
func (s *staleRun) watchReady() func() []string {
	var (
		mu   sync.Mutex
		bad  []string
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for i, cl := range s.c.clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				var r readiness
				status, err := cl.do(context.Background(), "GET", "/readyz", "", nil, nil, &r)
				if err != nil || status != http.StatusOK {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("instance %d: %d %v %v", i, status, err, r.Reasons))
					mu.Unlock()
				}
			}
		})
	}
	return func() []string {
		close(stop)
		wg.Wait()
		return bad
	}
}

// TestStaleRestartDuringRebuild (issue 21, c): Redis is lost with a queue
// backlog (each consumer capped at 20 orders/s), back empty 3 s later, and
// an instance is restarted: 2 s later with SIGTERM (an operator seeing
// 503s), 2 s later with kill -9, or at once, before any instance noticed.
// Before, the restarted instance loaded the sale from the database alone
// while its orders were still queued: each of them became a failed 202,
// and both instances stayed not ready.
func TestStaleRestartDuringRebuild(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	for _, tc := range []struct {
		name  string
		after time.Duration
		sig   syscall.Signal
	}{
		{"SIGTERM", 2 * time.Second, syscall.SIGTERM},
		{"Kill", 2 * time.Second, syscall.SIGKILL},
		{"BeforeNoticed", 0, syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own cluster, Redis and database
			s := startStale(t, nil, "FLASHSALE_ORDER_RATE=20")
			res := s.storm(t, 600, func() {
				s.rs.Kill()
				s.orders(t, "Redis killed")
				time.Sleep(3 * time.Second)
				s.rs.Start()
				time.Sleep(tc.after)
				s.orders(t, "instance 1 stopped ("+tc.sig.String()+")")
				if err := s.c.procs[1].Process.Signal(tc.sig); err != nil {
					t.Error(err)
				}
				s.c.procs[1].Wait()
				s.c.start(t, 1)
			})
			s.end(t, res)
		})
	}
}

// TestStaleClusterFailover (issue 21, e): a Redis Cluster of 3 masters with
// a replica each (cluster-node-timeout 1 s). Mid-storm the replica of the
// sale's shard is stopped (SIGSTOP) for 2 s and its replication link cut
// at the master, so it misses those writes (a stopped replica alone
// misses nothing: the kernel keeps the stream for it), then its master is
// killed and the replica resumed; the cluster promotes it. The
// promoted replica's copy of the sale is stamped by the dead master, so it
// is rebuilt. Before, the Cluster client kept sending the sale's calls to
// the dead master until its slot map aged out (60 s). A second sale on
// another shard is bought throughout and must get nothing but 202s: the
// breaker keeps a state per shard (before, one per instance refused every
// sale while the dead master kept it open: 237 of 695).
func TestStaleClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	rc := testenv.StartRedisCluster(t, 3, 1, time.Second)
	s := startStaleOn(t, rc.URL())
	master, replicas := rc.Shard("{" + s.sale + "}")
	if len(replicas) != 1 {
		t.Fatalf("shard of %s: master %s, replicas %v", s.sale, master, replicas)
	}
	var other string
	for range 50 {
		id := s.c.clients[0].createSale(t, saleJSON([]int{5000}, 1, false))
		if m, _ := rc.Shard("{" + id + "}"); m != master {
			other = id
			break
		}
	}
	if other == "" {
		t.Fatal("no sale landed on another shard in 50 tries")
	}
	var (
		otherOK      atomic.Int64
		otherLearned atomic.Int64 // 202s learnt by asking again after "not known yet"
		otherMu      sync.Mutex
		otherBad     []string
		stopOther    = make(chan struct{})
		otherDone    sync.WaitGroup
	)
	otherDone.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopOther:
				return
			case <-time.After(20 * time.Millisecond):
			}
			user := fmt.Sprintf("other-%05d", i)
			status, o, err := s.c.clients[i%2].purchase(context.Background(), other, user, false, nil, "key-"+user)
			if err == nil && status == http.StatusAccepted {
				otherOK.Add(1)
				continue
			}
			if err == nil && status == http.StatusServiceUnavailable && o.Error.Message == flashsale.ErrIndeterminate.Message {
				// A publish whose confirm outran the request's deadline
				// (CI, both cores busy: the same instance's Redis reads
				// timed out in the same instant) is a truthful "not known
				// yet", not a refusal: the guest asks again with the same
				// key, as the answer says, and learns the 202.
				if status, o, err = s.learn(other, user, i); err == nil && status == http.StatusAccepted {
					otherOK.Add(1)
					otherLearned.Add(1)
					continue
				}
			}
			otherMu.Lock()
			otherBad = append(otherBad, fmt.Sprintf("%s: %d %v %s %s", time.Now().Format("15:04:05.000"), status, err, o.Error.Code, o.Error.Message))
			otherMu.Unlock()
		}
	})
	res := s.storm(t, 300, func() {
		rc.Signal(replicas[0], syscall.SIGSTOP)
		rc.CutReplicas(master)
		s.orders(t, "replica "+replicas[0]+" stopped, its link cut")
		time.Sleep(2 * time.Second)
		rc.Signal(master, syscall.SIGKILL)
		rc.Signal(replicas[0], syscall.SIGCONT)
		killed := time.Now()
		s.orders(t, "master "+master+" killed, the replica resumed")
		for rc.Role(replicas[0]) != "master" {
			if time.Since(killed) > 30*time.Second {
				t.Errorf("the replica was not promoted in 30 s")
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("replica promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
	})
	close(stopOther)
	otherDone.Wait()
	t.Logf("the sale on another shard: %d 202s (%d learnt on asking again after \"not known yet\"), %d other answers during the storm", otherOK.Load(), otherLearned.Load(), len(otherBad))
	if len(otherBad) > 0 {
		t.Errorf("the sale on another shard was refused %d times; first: %s", len(otherBad), otherBad[0])
	}
	s.end(t, res)
}
