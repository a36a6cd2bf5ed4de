package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/procstat"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/redis"
)

// The shape BenchmarkDistributed measures. One op of every sub-benchmark is
// one round (so -benchtime 1x is a complete, quick smoke run and -benchtime
// 5x five rounds); the figures to quote are the custom metrics, never ns/op.
const (
	distInstances = 3
	// distDBCap is the order write rate the database should see. The
	// consumer's cap (FLASHSALE_ORDER_RATE) is per instance, so each of the
	// instances is given an equal share of it.
	distDBCap = 500.0
	// distGuests is the size of one burst: this many guests each take a
	// token and buy, all at once.
	distGuests = 2000

	distScriptRound   = 20000 // EVALSHAs per round of redis_script
	distScriptClients = 50    // redis-benchmark -c (its default)
	distAcceptedRound = 3000  // purchases per round of accepted
	// distAcceptedWorkers is the number of guests buying back to back in
	// accepted: enough to keep three instances busy on two cores; more only
	// queues in the client and adds latency.
	distAcceptedWorkers = 64
	distAcceptedUsers   = 10000 // cycled, per-user limit 1000
)

// BenchmarkDistributed measures the distributed shape (three `flashsale
// serve` processes on Redis, RabbitMQ and MariaDB), each figure beside its
// own ceiling in the same run, because absolute numbers on a shared two-core
// machine mean little:
//
//   - redis_script: reserve.lua alone, run by redis-benchmark (a C client
//     that does nothing else) through EVALSHA with the engine's key layout:
//     what this Redis does with the script, the rate the others are quoted
//     against.
//   - engine_accepted: the Redis part of an accepted purchase (the reserve
//     spending the purchase token, then confirm) through the engine and its
//     Go client, distAcceptedWorkers goroutines, a new guest each (bench
//     --parts' reserve part); ratio to redis_script.
//   - ceiling_accepted: the same client and loop as accepted against three
//     ceiling processes: the most any HTTP path could do here; its ratio to
//     redis_script bounds accepted's.
//   - broker_confirm: the same loop publishing reservations straight to
//     RabbitMQ through one publisher per instance: what the broker alone
//     confirms on this machine (bench --parts' publish part).
//   - accepted: accepted purchases (no token, stock never runs out) spread
//     over the instances; ratio = accepted req/s / redis_script req/s.
//   - burst: distGuests guests at once, each a token from one instance and
//     a purchase at the next, every one accepted; each round also sends the
//     same guests' two requests to three ceiling processes just before;
//     ratio = median p99 / median ceiling p99, and the servers' CPU per
//     burst on each side.
//   - burst_500: the same with 500 rooms, the flash sale as it happens.
//   - write_rate: on a fresh cluster, rounds of bursts while the database's
//     order count is sampled every 100 ms: the rate while the bursts run
//     (burst-orders/s), while the backlog drains after them (orders/s,
//     ratio to distDBCap) and in the busiest second (peak-orders/s). Flat
//     at the cap means orders/s and peak-orders/s both near distDBCap.
func BenchmarkDistributed(b *testing.B) {
	redisURL := testenv.URL(b, testenv.Redis)
	testenv.URL(b, testenv.AMQP)
	testenv.URL(b, testenv.MySQL)
	ctx := context.Background()
	buildBinary(b) // before anything is measured: a tree that does not build fails at once
	rate := "FLASHSALE_ORDER_RATE=" + strconv.FormatFloat(distDBCap/distInstances, 'f', 3, 64)

	var scriptRPS float64
	b.Run("redis_script", func(b *testing.B) {
		rps, p50, p99 := distRedisBenchmark(b, redisURL, b.N*distScriptRound)
		scriptRPS = rps
		b.ReportMetric(rps, "req/s")
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")
	})

	// The Redis part of an accepted purchase as an instance does it (the
	// script spending the token and the order index in one pipeline, then
	// the confirm), through the engine and its Go client, in the same loop
	// as accepted: how close the engine gets to the script's own rate.
	b.Run("engine_accepted", func(b *testing.B) {
		e, sale, _ := distEngine(b, redisURL)
		b.ResetTimer()
		rps, lat := distClosedLoop(b, b.N*distScriptRound, 202, distPart(bench.ReservePart(e, sale, "a")))
		b.StopTimer()
		distReportLoop(b, rps, lat, scriptRPS)
	})

	var ceilings []*client
	ceilingURLs, ceilingPIDs := startCeilingProcesses(b, distInstances)
	for _, base := range ceilingURLs {
		ceilings = append(ceilings, newClient(base, "", testJWTSecret))
	}
	// What the same client gets from trivial handlers in the same loop: no
	// HTTP path, however cheap its handler, goes faster than this here.
	b.Run("ceiling_accepted", func(b *testing.B) {
		distSignAccepted(ceilings)
		b.ResetTimer()
		rps, lat := distClosedLoop(b, b.N*distAcceptedRound, 409, func(i int) (int, error) {
			_, r, err := ceilings[i%len(ceilings)].Purchase(ctx, "x", fmt.Sprintf("a%05d", i%distAcceptedUsers), "", "")
			return r.Status, err
		})
		b.StopTimer()
		distReportLoop(b, rps, lat, scriptRPS)
	})

	// What the broker alone confirms with the same loop: a publisher per
	// instance, each order a persistent message on the quorum queue, no
	// HTTP, no Redis, no consumer. An accepted purchase pays for this and
	// for an HTTP exchange on the same two cores.
	b.Run("broker_confirm", func(b *testing.B) {
		ps := distPublishers(b, distInstances)
		b.ResetTimer()
		rps, lat := distClosedLoop(b, b.N*distAcceptedRound, 202, distPart(bench.PublishPart("a", ps...)))
		b.StopTimer()
		distReportLoop(b, rps, lat, scriptRPS)
	})

	acc := startCluster(b, distInstances, testenv.MySQLDatabase(b), rate)
	b.Run("accepted", func(b *testing.B) {
		id := acc.clients[0].createSale(b, saleJSON([]int{1_000_000}, 1000, false))
		distView(b, acc.clients, id)
		distSignAccepted(acc.clients)
		b.ResetTimer()
		rps, lat := distClosedLoop(b, b.N*distAcceptedRound, 202, func(i int) (int, error) {
			_, r, err := acc.clients[i%len(acc.clients)].Purchase(ctx, id, fmt.Sprintf("a%05d", i%distAcceptedUsers), "", "")
			return r.Status, err
		})
		b.StopTimer()
		distReportLoop(b, rps, lat, scriptRPS)
	})
	// Its backlog must not drain on the CPU the bursts are measured on.
	acc.stop(b)

	bc := startCluster(b, distInstances, testenv.MySQLDatabase(b), rate)
	// Warm both: the first burst dials its connections, later ones reuse them.
	soldOut := bc.clients[0].createSale(b, saleJSON([]int{0}, 1, true))
	distView(b, bc.clients, soldOut)
	for _, cs := range [][]*client{ceilings, bc.clients} {
		distSign(cs, "w", 1)
		bench.Together(distGuests, func(i int) error {
			purchaseAcross(ctx, cs[i%len(cs)], cs[(i+1)%len(cs)], soldOut, distGuest("w", 0, i))
			return nil
		})
	}

	// Each round of a burst is a ceiling burst and a flashsale burst back
	// to back, so a noisy neighbour hits both; the ratio is of the medians
	// of the rounds' p99s, as in BenchmarkBurst.
	b.Run("burst", func(b *testing.B) {
		id := bc.clients[0].createSale(b, saleJSON([]int{distGuests * b.N}, 1, true))
		distView(b, bc.clients, id)
		distSign(bc.clients, "b", b.N)
		distSign(ceilings, "b", b.N)
		var p distPairs
		for round := range b.N {
			p.ceiling(b, ceilings, ceilingPIDs, "b", round)
			p.flashsale(b, bc, func(i int) error {
				return distBuy(ctx, bc.clients, id, distGuest("b", round, i), i)
			})
		}
		p.report(b)
	})

	// burst_500: the flash sale as it happens: 2 000 guests, 500 rooms.
	// 500 are accepted through Redis and RabbitMQ; the rest are told
	// sold_out from the broadcast flag, or by the reserve script.
	b.Run("burst_500", func(b *testing.B) {
		distSign(bc.clients, "s", b.N)
		distSign(ceilings, "s", b.N)
		var p distPairs
		for round := range b.N {
			// No warm-up view: two of the three instances meet the sale
			// for the first time in the burst itself.
			id := bc.clients[0].createSale(b, saleJSON([]int{500}, 1, true))
			p.ceiling(b, ceilings, ceilingPIDs, "s", round)
			p.flashsale(b, bc, func(i int) error {
				// A 503 is retried with the same key, as clients do (CI saw
				// the shared Redis stall and the breaker open mid-burst).
				user := distGuest("s", round, i)
				status, o, err := purchaseKept(ctx, bc.clients[i%len(bc.clients)], bc.clients[(i+1)%len(bc.clients)], id, user, user)
				if err != nil || (status != 202 && o.Error.Code != "sold_out") {
					return fmt.Errorf("guest %d: %d %s %v", i, status, o.Error.Code, err)
				}
				return nil
			})
		}
		p.report(b)
	})

	// The bursts' backlog drains at the cap for a while yet: a fresh cluster
	// and database let write_rate start from an empty queue at once.
	bc.stop(b)
	wc := startCluster(b, distInstances, testenv.MySQLDatabase(b), rate)
	b.Run("write_rate", func(b *testing.B) {
		store, err := app.OpenStore(ctx, app.Config{DatabaseURL: wc.dbURL}, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		total := distGuests * b.N
		id := wc.clients[0].createSale(b, saleJSON([]int{total}, 1, true))
		distView(b, wc.clients, id)
		distSign(wc.clients, "r", b.N)
		b.ResetTimer()

		samples := make(chan []distSample, 1)
		stop := make(chan struct{})
		start := time.Now()
		go func() { samples <- distSampleOrders(store, id, total, start, stop) }()
		for round := range b.N {
			_, errs := bench.Together(distGuests, func(i int) error {
				return distBuy(ctx, wc.clients, id, distGuest("r", round, i), i)
			})
			distErrs(b, errs)
		}
		burstEnd := time.Since(start)
		// Enough for the backlog at half the cap, then give up.
		timeout := time.AfterFunc(time.Duration(2*float64(total)/distDBCap*float64(time.Second))+10*time.Second, func() { close(stop) })
		ss := <-samples
		timeout.Stop()
		b.StopTimer()
		if got := ss[len(ss)-1].n; got != total {
			b.Fatalf("%d of %d orders in the database when sampling stopped", got, total)
		}
		r := distWriteRates(ss, burstEnd)
		b.Logf("orders written per second (cap %.0f/s, bursts until %.1fs): %v", distDBCap, burstEnd.Seconds(), r.series)
		b.ReportMetric(r.during, "burst-orders/s")
		if r.after > 0 {
			b.ReportMetric(r.after, "orders/s")
			b.ReportMetric(r.after/distDBCap, "ratio")
		}
		b.ReportMetric(r.peak, "peak-orders/s")
	})
}

// sharedCeiling is ../shared/bench/ceiling, the trivial handler every HTTP
// figure is quoted against, seen from this package's directory.
const sharedCeiling = "../../../shared/bench/ceiling"

// startCeilingProcesses runs n ceilings, each its own process as each
// flashsale instance is, so that the bursts compare like with like: three
// processes on two cores pay for scheduling and three runtimes, which
// handlers inside the load generator's process would not. It builds
// ../shared/bench/ceiling when that checkout is beside this one and
// otherwise falls back to startCeiling's copy of it, in this process,
// which makes the comparison harsher on flashsale, and says so.
func startCeilingProcesses(tb testing.TB, n int) (bases []string, pids []int) {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(sharedCeiling, "main.go")); err != nil {
		tb.Logf("%s not found: ceilings run inside the load generator", sharedCeiling)
		for range n {
			bases = append(bases, startCeiling(tb))
		}
		return bases, nil
	}
	bin := filepath.Join(tb.TempDir(), "ceiling")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(sharedCeiling, "main.go")).CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", sharedCeiling, err, out)
	}
	for range n {
		addr := testenv.FreeAddr(tb)
		cmd := exec.Command(bin, "-addr", addr)
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		base := "http://" + addr
		waitCeiling(tb, base)
		bases = append(bases, base)
		pids = append(pids, cmd.Process.Pid)
	}
	return bases, pids
}

// cpuTime is the CPU (user + system) the processes have used so far, read
// from /proc; 0 where that cannot be read. Quoted per burst beside the
// latency, it says whether a slower burst did more work or waited more.
func cpuTime(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		cpu, err := procstat.CPU(pid)
		if err != nil {
			return 0
		}
		sum += cpu
	}
	return sum
}

// waitCeiling waits until a ceiling answers (it answers everything 409).
func waitCeiling(tb testing.TB, base string) {
	tb.Helper()
	if !testenv.WaitUntil(tb, 10*time.Second, "ceiling "+base+" to answer", func() bool {
		resp, err := http.Get(base + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		tb.FailNow()
	}
}

// distRedisBenchmark loads a sale with the engine, then has redis-benchmark
// run reserve.lua n times through EVALSHA with the engine's key layout and
// fresh order and user IDs, and returns its rate and latency percentiles.
// redis-benchmark is a C client that does nothing but send the command, so
// its rate is what Redis itself can do with the script: the ceiling.
func distRedisBenchmark(b *testing.B, redisURL string, n int) (rps, p50, p99 float64) {
	b.Helper()
	tool, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark is not installed (Debian: redis-tools)")
	}
	o, err := goredis.ParseURL(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	_, sale, prefix := distEngine(b, redisURL)
	saleID, now := sale.ID, time.Now()
	rc := goredis.NewClient(o)
	defer rc.Close()
	sha, err := rc.ScriptLoad(ctx, redis.ReserveScript()).Result()
	if err != nil {
		b.Fatal(err)
	}

	// The engine's layout (redis/engine.go): <prefix>{<sale>}:<name>.
	base := prefix + "{" + saleID + "}:"
	hold := now.Add(300 * time.Second).UnixNano()
	host, port, _ := strings.Cut(o.Addr, ":")
	args := []string{"-h", host, "-p", port, "--dbnum", strconv.Itoa(o.DB),
		"-q", "--csv", "-n", strconv.Itoa(n), "-c", strconv.Itoa(distScriptClients),
		// Every __rand_int__ is drawn on its own, 12 digits: order IDs of a
		// ULID's 26 characters, users of a JWT subject's usual length.
		"-r", "2147483647",
		"EVALSHA", sha, "6",
		base + "meta", base + "stock", base + "users", base + "keys", base + "res", base + "unconfirmed",
		"01JBENCH000000__rand_int__", "u__rand_int__", "", "0", "1", "1",
		strconv.FormatInt(now.UnixMilli(), 10),
		fmt.Sprintf("|1|0|1|39900|%d|13|u000000000000", hold),
		prefix + "soldout", saleID,
	}
	if o.Password != "" {
		args = append([]string{"-a", o.Password, "--no-auth-warning"}, args...)
	}
	out, err := exec.Command(tool, args...).Output()
	if err != nil {
		b.Fatalf("redis-benchmark: %v", err)
	}
	// A random ID drawn twice (about n²/4e9 times) answers "existing
	// order", a cheaper path; anything more means the layout drifted.
	if got, err := rc.HLen(ctx, base+"res").Result(); err != nil || got < int64(n)*99/100 {
		b.Fatalf("reserve.lua recorded %d of %d reservations (%v): has the engine's key layout changed?", got, n, err)
	}
	return distParseRedisBenchmark(b, out)
}

// distEngine opens a Redis engine on keys of its own (removed when the
// benchmark ends) with bench --parts' sale loaded, which never runs out:
// stock and per-user limit of a billion. It returns the key prefix too.
func distEngine(b *testing.B, redisURL string) (*redis.Engine, *flashsale.Sale, string) {
	b.Helper()
	prefix := testenv.Name("fs-bs-") + ":"
	b.Cleanup(func() { testenv.DeleteKeys(redisURL, prefix) })
	e, sale, err := bench.OpenPartEngine(context.Background(), redisURL, prefix)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e, sale, prefix
}

// distPart is a part as distClosedLoop's send: 202 for a call that succeeded.
func distPart(p bench.Part) func(i int) (int, error) {
	return func(i int) (int, error) {
		if err := p(context.Background(), i); err != nil {
			return 0, err
		}
		return 202, nil
	}
}

// distParseRedisBenchmark reads redis-benchmark's --csv report.
func distParseRedisBenchmark(b *testing.B, out []byte) (rps, p50, p99 float64) {
	b.Helper()
	rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(rows) < 2 {
		b.Fatalf("redis-benchmark output: %v\n%s", err, out)
	}
	col := func(name string) float64 {
		i := slices.Index(rows[0], name)
		if i < 0 || i >= len(rows[1]) {
			b.Fatalf("redis-benchmark output has no %s column:\n%s", name, out)
		}
		v, err := strconv.ParseFloat(rows[1][i], 64)
		if err != nil {
			b.Fatalf("redis-benchmark %s: %v", name, err)
		}
		return v
	}
	return col("rps"), col("p50_latency_ms"), col("p99_latency_ms")
}

// distClosedLoop has distAcceptedWorkers guests send n requests back to
// back, request i by send(i), and returns requests per second and the sorted
// latencies. send answers the status it got; want is the one expected.
func distClosedLoop(b *testing.B, n, want int, send func(i int) (int, error)) (float64, []time.Duration) {
	var (
		mu    sync.Mutex
		codes = map[int]int{}
	)
	elapsed, lat, _ := bench.BackToBack(distAcceptedWorkers, n, func(_, i int) error {
		if status, err := send(i); err != nil || status != want {
			mu.Lock()
			codes[status]++
			mu.Unlock()
		}
		return nil
	})
	if len(codes) > 0 {
		b.Errorf("answers other than %d, by status (0 = transport error): %v", want, codes)
	}
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat
}

// distPairs collects the rounds of a paired burst.
type distPairs struct {
	ceilP99, p99 []float64 // per round, ms
	ceilCPU, cpu time.Duration
}

// ceiling runs one burst of the ceiling's two requests per guest.
func (p *distPairs) ceiling(b *testing.B, cs []*client, pids []int, kind string, round int) {
	ctx := context.Background()
	c0 := cpuTime(pids)
	lat, errs := bench.Together(distGuests, func(i int) error {
		a, z := cs[i%len(cs)], cs[(i+1)%len(cs)]
		user := distGuest(kind, round, i)
		_, r1, err1 := a.Token(ctx, "x", user, "", "")
		_, r2, err2 := z.Purchase(ctx, "x", user, "t", "")
		if err := errors.Join(err1, err2); err != nil || r1.Status != 409 || r2.Status != 409 {
			return fmt.Errorf("ceiling: %d %d %v", r1.Status, r2.Status, err)
		}
		return nil
	})
	p.ceilCPU += cpuTime(pids) - c0
	distErrs(b, errs)
	slices.Sort(lat)
	p.ceilP99 = append(p.ceilP99, distMS(bench.Percentile(lat, 0.99)))
}

// flashsale runs one burst of guests at the cluster.
func (p *distPairs) flashsale(b *testing.B, c *cluster, guest func(i int) error) {
	c0 := cpuTime(c.pids())
	lat, errs := bench.Together(distGuests, guest)
	p.cpu += cpuTime(c.pids()) - c0
	distErrs(b, errs)
	slices.Sort(lat)
	p.p99 = append(p.p99, distMS(bench.Percentile(lat, 0.99)))
}

func (p *distPairs) report(b *testing.B) {
	n := float64(len(p.p99))
	mc, mf := median(p.ceilP99), median(p.p99)
	b.ReportMetric(mc, "ceiling-p99-ms")
	b.ReportMetric(mf, "p99-ms")
	b.ReportMetric(mf/mc, "ratio")
	if p.ceilCPU > 0 {
		b.ReportMetric(distMS(p.ceilCPU)/n, "ceiling-cpu-ms")
		b.ReportMetric(distMS(p.cpu)/n, "cpu-ms")
	}
}

// distPublishers declares a topology of its own on the test broker and
// opens n publishers on it; the queues go when the benchmark ends.
func distPublishers(b *testing.B, n int) []*amqp.Publisher {
	b.Helper()
	cfg := amqp.Config{URL: testenv.URL(b, testenv.AMQP), Name: testenv.Name("fs-bb-")}
	b.Cleanup(func() { deleteTopology(cfg.URL, cfg.Name) })
	var ps []*amqp.Publisher
	for range n {
		p, err := amqp.NewPublisher(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		ps = append(ps, p)
	}
	return ps
}

// deleteTopology removes the queues and exchanges named name.
func deleteTopology(url, name string) {
	conn, err := amqp091.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	ch.QueueDelete(name+".orders", false, false, false)
	ch.QueueDelete(name+".orders.dead", false, false, false)
	ch.ExchangeDelete(name+".orders", false, false)
	ch.ExchangeDelete(name+".orders.dlx", false, false)
}

// distReportLoop reports a closed loop's rate and latency, and its rate as
// a ratio to the script's.
func distReportLoop(b *testing.B, rps float64, sorted []time.Duration, scriptRPS float64) {
	b.ReportMetric(rps, "req/s")
	b.ReportMetric(distMS(bench.Percentile(sorted, 0.50)), "p50-ms")
	b.ReportMetric(distMS(bench.Percentile(sorted, 0.99)), "p99-ms")
	if scriptRPS > 0 {
		b.ReportMetric(rps/scriptRPS, "ratio")
	}
}

// distSignAccepted signs the closed loops' guests before the clock runs.
func distSignAccepted(cs []*client) {
	for _, c := range cs {
		for u := range distAcceptedUsers {
			c.JWT(fmt.Sprintf("a%05d", u))
		}
	}
}

// distView shows the sale page once on every instance, as the guests
// waiting for the countdown do, so each instance has the sale cached when
// the burst comes. A burst on a sale an instance has never seen sends every
// guest's lookup to the database at once (there is no single-flight in the
// funnel's sale cache), which on MariaDB's default max_connections of 151
// turns into 500s: a finding of this benchmark, not what it measures.
func distView(b *testing.B, cs []*client, saleID string) {
	b.Helper()
	for _, c := range cs {
		if r, err := c.View(context.Background(), saleID); err != nil || r.Status != 200 {
			b.Fatalf("view sale %s at %s: %d %v", saleID, c.Base, r.Status, err)
		}
	}
}

// distBuy is guest i of a burst: a token from one instance, the
// purchase at the next, which must be accepted. A 503 is retried with the
// same Idempotency-Key, as a client does: on a loaded machine a purchase
// can outlive its 1 s deadline (CI saw 2 of 2 000), and the retry's time is
// the guest's.
func distBuy(ctx context.Context, cs []*client, saleID, user string, i int) error {
	status, o, err := purchaseKept(ctx, cs[i%len(cs)], cs[(i+1)%len(cs)], saleID, user, user)
	if err != nil || status != 202 {
		return fmt.Errorf("%s: %d %s %v", user, status, o.Error.Code, err)
	}
	return nil
}

func distGuest(kind string, round, i int) string { return fmt.Sprintf("%s%d-%d", kind, round, i) }

// distSign signs every guest's JWT on every client before the clock runs.
func distSign(cs []*client, kind string, rounds int) {
	for _, c := range cs {
		for r := range rounds {
			for i := range distGuests {
				c.JWT(distGuest(kind, r, i))
			}
		}
	}
}

// distErrs fails the benchmark with a count and the first few errors.
func distErrs(b *testing.B, errs []error) {
	b.Helper()
	var bad []error
	for _, err := range errs {
		if err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		b.Errorf("%d of %d guests failed, first: %v", len(bad), len(errs), errors.Join(bad[:min(3, len(bad))]...))
	}
}

// orders is how many orders of a sale the database holds (every order is
// one room of one night, so held + sold of its night).
func distOrders(ctx context.Context, store flashsale.Store, saleID string) (int, error) {
	nights, err := store.NightStocks(ctx, saleID)
	if err != nil || len(nights) == 0 {
		return 0, fmt.Errorf("night stocks of %s: %w", saleID, err)
	}
	return nights[0].Held + nights[0].Sold, nil
}

// distSample is the database's order count at a moment.
type distSample struct {
	at time.Duration // since sampling started
	n  int
}

// distSampleOrders counts the sale's orders every 100 ms until there are total
// or stop is closed.
func distSampleOrders(store flashsale.Store, saleID string, total int, start time.Time, stop <-chan struct{}) []distSample {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	ss := []distSample{{0, 0}}
	for {
		select {
		case <-stop:
			return ss
		case now := <-t.C:
			n, err := distOrders(context.Background(), store, saleID)
			if err != nil {
				continue // a slow or failed query shows up as a gap, not a stop
			}
			ss = append(ss, distSample{now.Sub(start), n})
			if n >= total {
				return ss
			}
		}
	}
}

// distRates is what the database's order count did during write_rate.
type distRates struct {
	series []int   // orders written in each second from the first sample
	during float64 // mean rate while the bursts were being fired
	after  float64 // mean rate from the end of the bursts until the backlog was written; 0 if none was left
	peak   float64 // highest rate over any window of at least a second between samples
}

// distWriteRates reads the samples against burstEnd, when the last burst
// was answered.
func distWriteRates(ss []distSample, burstEnd time.Duration) distRates {
	var r distRates
	at := func(d time.Duration) distSample { // the last sample taken by d
		s := ss[0]
		for _, x := range ss {
			if x.at > d {
				break
			}
			s = x
		}
		return s
	}
	last := ss[len(ss)-1]
	for t := time.Duration(0); t < last.at; t += time.Second {
		r.series = append(r.series, at(min(t+time.Second, last.at)).n-at(t).n)
	}
	mid := at(burstEnd)
	if mid.at > 0 {
		r.during = float64(mid.n) / mid.at.Seconds()
	}
	if last.n > mid.n && last.at > mid.at {
		r.after = float64(last.n-mid.n) / (last.at - mid.at).Seconds()
	}
	i := 0
	for j := range ss {
		for i+1 < j && ss[j].at-ss[i+1].at >= time.Second {
			i++
		}
		if d := ss[j].at - ss[i].at; d >= time.Second {
			r.peak = max(r.peak, float64(ss[j].n-ss[i].n)/d.Seconds())
		}
	}
	return r
}

func distMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
