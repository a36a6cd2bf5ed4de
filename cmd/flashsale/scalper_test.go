package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestScalpers is the source's last second over real HTTP against the
// built binary (embedded shape, default limits): 200 fair guests arrive
// over two seconds, each loads the sale page, takes a token and buys once,
// while 20 scalper users each fire 500 purchases a second at the same
// sale, reusing their one token and ignoring Retry-After. In every other
// run a flood of purchases by distinct users also hits a second sale, the
// issue's isolation case: the fair guests' sale must not slow down because
// another one is flooded. Every fair guest gets a room or a true sold_out
// (the sale really sold out), each scalper at most its limit of one room,
// nobody a 5xx. The fair guests' p99 with the flood against without it,
// over interleaved rounds, and against a calm sale with neither, is
// logged with the CPU the server and the load generator used, for
// docs/benchmarks.md: a performance figure, not a pass mark (this machine
// runs the load generator on the server's two cores).
func TestScalpers(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	server := startBinary(t, bin, "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+t.TempDir(),
		"FLASHSALE_ADMIN_TOKEN="+testAdminToken, "FLASHSALE_JWT_SECRET="+testJWTSecret, "FLASHSALE_LOG_LEVEL=error")
	waitReady(t, "http://"+addr)
	cl := newClient("http://"+addr, testAdminToken, testJWTSecret)
	const stock = 150

	calm := fairGuests(t, cl, cl.createSale(t, saleJSON([]int{stock}, 1, true)), "calm")
	hot := cl.createSale(t, saleJSON([]int{100_000}, 1, false))
	var without, with []time.Duration
	for round := range 3 {
		for _, flood := range []bool{false, true} {
			run := fmt.Sprintf("r%d-flood-%v", round, flood)
			res := scalperRun(t, cl, server.Process.Pid, cl.createSale(t, saleJSON([]int{stock}, 1, true)), hot, run, flood)
			if flood {
				with = append(with, res.p99)
			} else {
				without = append(without, res.p99)
			}
		}
	}
	slices.Sort(without)
	slices.Sort(with)
	t.Logf("fair guests' p99 under scalpers, by round: without the flood %v, with it %v: median ratio %.2f (issue 8 asks at most 1.5); calm, no scalpers: %s",
		without, with, float64(with[1])/float64(without[1]), calm)
}

// scalperRun is one run of TestScalpers: 20 scalpers on sale, a flood on
// hot when flood is set, and 200 fair guests on sale once the storm is on.
func scalperRun(t *testing.T, cl *client, pid int, sale, hot, run string, flood bool) fairResult {
	t.Helper()
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		scalped  [20]atomic.Int64 // 202s per scalper
		fired    atomic.Int64
		codes    sync.Map // status -> *atomic.Int64
		flooded  atomic.Int64
		floodBad atomic.Int64
		dropped  atomic.Int64 // shots not sent: too many in flight already
	)
	count := func(status int) {
		v, _ := codes.LoadOrStore(status, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	for s := range scalped {
		user := fmt.Sprintf("%s-scalper-%02d", run, s)
		var tok struct {
			Token string `json:"token"`
		}
		if status, err := cl.do(context.Background(), "POST", "/api/sales/"+sale+"/token", cl.jwt(user), nil, nil, &tok); err != nil || status != http.StatusCreated {
			t.Fatalf("scalper token: %d %v", status, err)
		}
		// 500 a second, whatever the answer to the last one was.
		wg.Go(func() {
			openLoop(stop, 2*time.Millisecond, 32, &dropped, func(int) {
				fired.Add(1)
				var o orderJSON
				status, err := cl.do(context.Background(), "POST", "/api/sales/"+sale+"/purchase", cl.jwt(user), map[string]any{"token": tok.Token}, nil, &o)
				if err != nil {
					return
				}
				count(status)
				if status == http.StatusAccepted {
					scalped[s].Add(1)
				}
			})
		})
	}
	if flood {
		// 1 000 purchases a second by distinct users, each a real order.
		wg.Go(func() {
			openLoop(stop, time.Millisecond, 64, &dropped, func(i int) {
				status, _, err := cl.purchase(context.Background(), hot, fmt.Sprintf("%s-flood-%06d", run, i), false, nil, "")
				flooded.Add(1)
				if err == nil && status >= 500 {
					floodBad.Add(1)
				}
			})
		})
	}
	time.Sleep(500 * time.Millisecond) // the storm is on before the guests come
	cpu0, wall0 := cpuTimes(t, pid), time.Now()
	res := fairGuests(t, cl, sale, run)
	cpu1, wall := cpuTimes(t, pid), time.Since(wall0)
	close(stop)
	wg.Wait()

	for s := range scalped {
		if n := scalped[s].Load(); n > 1 {
			t.Errorf("%s: scalper %d got %d rooms, limit 1", run, s, n)
		}
	}
	var byCode []string
	codes.Range(func(k, v any) bool {
		if k.(int) >= 500 {
			t.Errorf("%s: scalpers got %d x %d", run, v.(*atomic.Int64).Load(), k)
		}
		byCode = append(byCode, fmt.Sprintf("%d x %d", v.(*atomic.Int64).Load(), k))
		return true
	})
	if n := floodBad.Load(); n > 0 {
		t.Errorf("%s: the flood on the other sale got %d 5xx", run, n)
	}
	slices.Sort(byCode)
	t.Logf("%s: fair guests %s; scalpers fired %d (%v); flood %d purchases on the other sale; %d shots dropped with too many in flight; in the %v the guests bought, the server used %v of CPU, this test's load generator %v",
		run, res, fired.Load(), byCode, flooded.Load(), dropped.Load(), wall.Round(time.Millisecond),
		(cpu1[0] - cpu0[0]).Round(time.Millisecond), (cpu1[1] - cpu0[1]).Round(time.Millisecond))
	return res
}

// cpuTimes returns the CPU time (user + system) used so far by process pid
// and by this process.
func cpuTimes(t *testing.T, pid int) [2]time.Duration {
	t.Helper()
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields 14 and 15 (utime, stime) in clock ticks, counted after the
	// command name's closing parenthesis.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return [2]time.Duration{
		time.Duration(ut+st) * tick,
		time.Duration(self.Utime.Nano() + self.Stime.Nano()),
	}
}

// openLoop fires shot(i) on the i-th tick of every until stop, each in a
// goroutine of its own, whatever became of the last: an open loop. Up to
// maxInFlight at once; a tick beyond that is dropped and counted (a slow
// server, or -race, drops shots rather than piling up goroutines). It
// returns once the shots in flight ended.
func openLoop(stop <-chan struct{}, every time.Duration, maxInFlight int, dropped *atomic.Int64, shot func(i int)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var shots sync.WaitGroup
	defer shots.Wait()
	inFlight := make(chan struct{}, maxInFlight)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		select {
		case inFlight <- struct{}{}:
		default:
			dropped.Add(1)
			continue
		}
		shots.Go(func() {
			defer func() { <-inFlight }()
			shot(i)
		})
	}
}

// fairResult is what 200 fair guests saw.
type fairResult struct {
	rooms, soldOut int
	p50, p99       time.Duration
}

func (r fairResult) String() string {
	return fmt.Sprintf("%d rooms, %d sold out, purchase p50 %v p99 %v", r.rooms, r.soldOut, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
}

// fairGuests sends 200 guests at a sale, one every 10 ms: each views the
// sale, takes a token and buys once. Each must get a room or, only once
// the sale is truly sold out, sold_out.
func fairGuests(t *testing.T, cl *client, saleID, run string) fairResult {
	t.Helper()
	var (
		mu   sync.Mutex
		res  fairResult
		lat  []time.Duration
		wg   sync.WaitGroup
		tick = time.NewTicker(10 * time.Millisecond)
	)
	defer tick.Stop()
	for i := range 200 {
		<-tick.C
		wg.Go(func() {
			ctx := context.Background()
			user := fmt.Sprintf("%s-%03d", run, i)
			if status, err := cl.do(ctx, "GET", "/api/sales/"+saleID, "", nil, nil, nil); err != nil || status != http.StatusOK {
				t.Errorf("%s: sale page %d %v", user, status, err)
				return
			}
			var tok struct {
				Token string `json:"token"`
			}
			if status, err := cl.do(ctx, "POST", "/api/sales/"+saleID+"/token", cl.jwt(user), nil, nil, &tok); err != nil || status != http.StatusCreated {
				t.Errorf("%s: token %d %v", user, status, err)
				return
			}
			start := time.Now()
			var o orderJSON
			status, err := cl.do(ctx, "POST", "/api/sales/"+saleID+"/purchase", cl.jwt(user), map[string]any{"token": tok.Token}, nil, &o)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, took)
			switch {
			case err != nil:
				t.Errorf("%s: purchase: %v", user, err)
			case status == http.StatusAccepted:
				res.rooms++
			case status == http.StatusConflict && o.Error.Code == "sold_out":
				res.soldOut++
			default:
				t.Errorf("%s: purchase %d %s, want a room or sold_out", user, status, o.Error.Code)
			}
		})
	}
	wg.Wait()
	if res.soldOut > 0 {
		if avail := cl.adminSale(t, saleID).Nights[0].Available; avail != 0 {
			t.Errorf("%s: %d guests told sold_out with %d rooms left", run, res.soldOut, avail)
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return res
}
