package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/procstat"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestScalpers is the source's last second over real HTTP against the
// built binary (embedded shape, default limits): 200 fair guests arrive
// over two seconds, each loads the sale page, takes a token and buys once,
// while 20 scalper users each fire 500 purchases a second at the same
// sale, reusing their one token and ignoring Retry-After. In every other
// run a flood of 1 000 purchases a second by distinct users also hits a
// second sale, bucketed at 120 a second: the isolation case: the fair guests' sale must not slow down because
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
	addr := testenv.FreeAddr(t)
	server := startBinary(t, bin, "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+t.TempDir(),
		"FLASHSALE_ADMIN_TOKEN="+testAdminToken, "FLASHSALE_JWT_SECRET="+testJWTSecret, "FLASHSALE_LOG_LEVEL=error")
	waitReady(t, "http://"+addr)
	cl := newClient("http://"+addr, testAdminToken, testJWTSecret)
	const stock = 150

	calm := fairGuests(t, cl, cl.createSale(t, saleJSON([]int{stock}, 1, true)), "calm")
	// The flooded sale is set up as the source says a hot one should be:
	// its purchases bucketed a little above the rate it is expected to
	// sell at (here 100 rooms a second), so most of a 1 000/s flood is
	// turned away at the bucket. Without the bucket every flood purchase
	// is an order, 0.6 ms of the server's CPU each (docs/benchmarks.md):
	// real sales, which no isolation can make free on a shared box.
	hotSale := saleJSON([]int{100_000}, 1, false)
	hotSale["limits"] = map[string]any{"per_sale": "120/s,120"}
	hot := cl.createSale(t, hotSale)
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
// The scalpers and the flood come from a process of their own (scalperLoad):
// in this one, their goroutines and garbage would delay the fair guests'
// own timing, and the flood's share of that would be charged to the server.
func scalperRun(t *testing.T, cl *client, pid int, sale, hot, run string, flood bool) fairResult {
	t.Helper()
	load := startScalperLoad(t, loadSpec{URL: cl.Base, Sale: sale, Hot: hot, Run: run, Flood: flood})
	time.Sleep(500 * time.Millisecond) // the storm is on before the guests come
	cpu0, wall0 := [3]time.Duration{procCPU(t, pid), procCPU(t, load.Process.Pid), selfCPU(t)}, time.Now()
	res := fairGuests(t, cl, sale, run)
	cpu1, wall := [3]time.Duration{procCPU(t, pid), procCPU(t, load.Process.Pid), selfCPU(t)}, time.Since(wall0)
	lr := load.stop(t)

	var rooms int64
	for s, n := range lr.Scalped {
		if n > 1 {
			t.Errorf("%s: scalper %d got %d rooms, limit 1", run, s, n)
		}
		rooms += n
	}
	if lr.Fired < 1000 || rooms != lr.Codes["202"] {
		t.Errorf("%s: the load process fired %d purchases, %d 202s counted per scalper and %d by status: it did not run as meant", run, lr.Fired, rooms, lr.Codes["202"])
	}
	var byCode []string
	for code, n := range lr.Codes {
		if c, _ := strconv.Atoi(code); c >= 500 {
			t.Errorf("%s: scalpers got %d x %s", run, n, code)
		}
		byCode = append(byCode, fmt.Sprintf("%d x %s", n, code))
	}
	if lr.FloodBad > 0 {
		t.Errorf("%s: the flood on the other sale got %d 5xx", run, lr.FloodBad)
	}
	slices.Sort(byCode)
	t.Logf("%s: fair guests %s; scalpers fired %d (%v); flood %d purchases on the other sale (%d accepted); %d shots dropped with too many in flight; in the %v the guests bought, the server used %v of CPU, the scalpers' and flood's process %v, the fair guests' %v",
		run, res, lr.Fired, byCode, lr.Flooded, lr.FloodOK, lr.Dropped, wall.Round(time.Millisecond),
		(cpu1[0] - cpu0[0]).Round(time.Millisecond), (cpu1[1] - cpu0[1]).Round(time.Millisecond), (cpu1[2] - cpu0[2]).Round(time.Millisecond))
	return res
}

// loadSpec is what TestScalperLoad's process is to send, and loadResult
// what it saw.
type loadSpec struct {
	URL, Sale, Hot, Run string
	Flood               bool
}

type loadResult struct {
	Scalped                    [20]int64        // 202s per scalper
	Codes                      map[string]int64 // the scalpers' answers by status
	Fired, Dropped             int64
	Flooded, FloodOK, FloodBad int64 // the flood's purchases, its 202s and its 5xx
}

// scalperLoad is TestScalperLoad's process, running until stop.
type scalperLoad struct {
	*exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
}

// loadEnv carries the loadSpec to TestScalperLoad's process.
const loadEnv = "FLASHSALE_TEST_SCALPER_LOAD"

// startScalperLoad starts this test binary again, running only
// TestScalperLoad with spec; the load goes on until stop.
func startScalperLoad(t *testing.T, spec loadSpec) *scalperLoad {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	l := &scalperLoad{Cmd: exec.Command(os.Args[0], "-test.run=^TestScalperLoad$", "-test.count=1")}
	l.Env = append(os.Environ(), loadEnv+"="+string(b))
	l.Stdout, l.Stderr = &l.out, &l.out
	if l.stdin, err = l.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Process.Kill(); l.Wait() })
	return l
}

// stop ends the load (its stdin closes) and returns what it saw.
func (l *scalperLoad) stop(t *testing.T) loadResult {
	t.Helper()
	l.stdin.Close()
	if err := l.Wait(); err != nil {
		t.Fatalf("scalper load: %v\n%s", err, l.out.String())
	}
	for line := range strings.Lines(l.out.String()) {
		if rest, ok := strings.CutPrefix(line, "LOAD "); ok {
			var r loadResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("scalper load said nothing:\n%s", l.out.String())
	return loadResult{}
}

// TestScalperLoad is not a test of its own: it is TestScalpers' scalpers
// and flood, in a process of their own (startScalperLoad), and skips when
// run otherwise. Each scalper takes one token, then fires 500 purchases a
// second with it, whatever the answer to the last one was; the flood is
// 1 000 purchases a second by distinct users. It stops when its stdin
// closes and prints what it saw as one "LOAD {json}" line.
func TestScalperLoad(t *testing.T) {
	raw := os.Getenv(loadEnv)
	if raw == "" {
		t.Skip("the load process of TestScalpers")
	}
	var spec loadSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	cl := newClient(spec.URL, testAdminToken, testJWTSecret)
	defer cl.CloseIdle() // the server outlives this process's test: its connections end with the client's use
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	var (
		wg                         sync.WaitGroup
		scalped                    [20]atomic.Int64
		fired, dropped             atomic.Int64
		flooded, floodOK, floodBad atomic.Int64
		mu                         sync.Mutex
		codes                      = map[string]int64{}
	)
	for s := range scalped {
		user := fmt.Sprintf("%s-scalper-%02d", spec.Run, s)
		var tok struct {
			Token string `json:"token"`
		}
		if status, err := cl.do(context.Background(), "POST", "/api/sales/"+spec.Sale+"/token", cl.jwt(user), nil, nil, &tok); err != nil || status != http.StatusCreated {
			t.Fatalf("scalper token: %d %v", status, err)
		}
		wg.Go(func() {
			openLoop(stop, 2*time.Millisecond, 32, &dropped, func(int) {
				fired.Add(1)
				var o orderJSON
				status, err := cl.do(context.Background(), "POST", "/api/sales/"+spec.Sale+"/purchase", cl.jwt(user), map[string]any{"token": tok.Token}, nil, &o)
				if err != nil {
					return
				}
				mu.Lock()
				codes[strconv.Itoa(status)]++
				mu.Unlock()
				if status == http.StatusAccepted {
					scalped[s].Add(1)
				}
			})
		})
	}
	if spec.Flood {
		wg.Go(func() {
			openLoop(stop, time.Millisecond, 64, &dropped, func(i int) {
				status, _, err := cl.purchase(context.Background(), spec.Hot, fmt.Sprintf("%s-flood-%06d", spec.Run, i), false, nil, "")
				flooded.Add(1)
				switch {
				case err == nil && status >= 500:
					floodBad.Add(1)
				case err == nil && status == http.StatusAccepted:
					floodOK.Add(1)
				}
			})
		})
	}
	wg.Wait()
	r := loadResult{Codes: codes, Fired: fired.Load(), Dropped: dropped.Load(),
		Flooded: flooded.Load(), FloodOK: floodOK.Load(), FloodBad: floodBad.Load()}
	for s := range scalped {
		r.Scalped[s] = scalped[s].Load()
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LOAD %s\n", b)
}

// procCPU returns the CPU time (user + system) process pid used so far.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	cpu, err := procstat.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return cpu
}

// selfCPU returns the CPU time (user + system) this process used so far.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		t.Fatal(err)
	}
	return time.Duration(self.Utime.Nano() + self.Stime.Nano())
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
