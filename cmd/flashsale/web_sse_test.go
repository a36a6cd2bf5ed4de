package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestSSEFanout holds many event streams open on one instance (the built
// binary in its own process, so its memory is its own) and changes the
// stock under them: every stream must get every change, and the streams'
// goroutines must be gone once they close. FLASHSALE_TEST_SSE_CLIENTS sets how
// many (200 by default, a smoke test); docs/benchmarks.md's figures are
//
//	ulimit -n 65536; FLASHSALE_TEST_SSE_CLIENTS=10000 go test -run TestSSEFanout -v ./cmd/flashsale/
//
// which logs the server's memory per stream and the cost of one stock
// change fanned out to all of them.
func TestSSEFanout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	n, changes, settle := 200, 2, time.Duration(0) // the smoke test's
	if v := os.Getenv("FLASHSALE_TEST_SSE_CLIENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("FLASHSALE_TEST_SSE_CLIENTS=%q", v)
		}
		changes, settle = 5, 2*time.Second
	}
	bin := buildBinary(t)
	addr := testenv.FreeAddr(t)
	// Every stream comes from this one address: no per-client cap.
	startBinary(t, bin, "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+t.TempDir(), "FLASHSALE_EVENTS_PER_CLIENT=0",
		"FLASHSALE_ADMIN_TOKEN="+testAdminToken, "FLASHSALE_JWT_SECRET="+testJWTSecret, "FLASHSALE_LOG_LEVEL=error")
	base := "http://" + addr
	waitReady(t, base)
	c := newClient(base, testAdminToken, testJWTSecret)
	const stock = 1000
	id := c.createSale(t, saleJSON([]int{stock}, 1, false))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	idle := serverStats(t, base)
	t.Logf("sse: idle server: rss %.1f MiB, heap in use %.1f MiB, %d goroutines", mib(idle.rss), mib(idle.heap), int(idle.goroutines))

	// arrivals[k][i] is when stream i saw change k (Unix ns), 0 until then.
	arrivals := make([][]atomic.Int64, changes+1)
	for k := range arrivals {
		arrivals[k] = make([]atomic.Int64, n)
	}
	var conns sync.WaitGroup
	dialed := make(chan net.Conn, n)
	sem := make(chan struct{}, 64) // dial in waves: the listen backlog is finite
	var dialErr atomic.Value
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			<-sem
			t.Fatalf("stream %d: %v", i, err)
		}
		dialed <- conn
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer conn.Close()
			fmt.Fprintf(conn, "GET /api/sales/%s/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n", id)
			r := bufio.NewReaderSize(conn, 1024)
			status, err := r.ReadString('\n')
			<-sem
			if err != nil || !strings.Contains(status, " 200 ") {
				dialErr.Store(fmt.Sprintf("stream %d: %q %v", i, status, err))
				return
			}
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				at := bytes.Index(line, []byte(`"available":`))
				if at < 0 {
					continue
				}
				rest := line[at+len(`"available":`):]
				end := bytes.IndexAny(rest, ",}")
				left, _ := strconv.Atoi(string(rest[:max(end, 0)]))
				if k := stock - left; k >= 0 && k <= changes {
					arrivals[k][i].CompareAndSwap(0, time.Now().UnixNano())
				}
			}
		}()
	}
	t.Cleanup(func() {
		close(dialed)
		for conn := range dialed {
			conn.Close()
		}
	})
	if !testenv.WaitUntil(t, 60*time.Second, "every stream to get the first event", func() bool { return count(arrivals[0]) == n || dialErr.Load() != nil }) {
		t.FailNow()
	}
	if e := dialErr.Load(); e != nil {
		t.Fatal(e)
	}
	t.Logf("sse: %d streams open and each has its first event after %s", n, time.Since(start).Round(time.Millisecond))
	time.Sleep(settle) // let the dial burst's garbage be collected before the reading
	held := serverStats(t, base)
	t.Logf("sse: with %d streams: rss %.1f MiB, heap in use %.1f MiB, %d goroutines; per stream: %.1f KiB rss, %.1f KiB heap, %.2f goroutines",
		n, mib(held.rss), mib(held.heap), int(held.goroutines),
		(held.rss-idle.rss)/1024/float64(n), (held.heap-idle.heap)/1024/float64(n), (held.goroutines-idle.goroutines)/float64(n))

	// Quiet: what n open streams cost with nothing changing, for as long
	// as the changes below take.
	window := time.Duration(changes) * time.Second
	cpu0 := serverStats(t, base).cpu
	time.Sleep(window)
	quiet := serverStats(t, base).cpu - cpu0

	// Changes: one purchase a second, each fanned out to every stream.
	var lat []time.Duration
	cpu1 := serverStats(t, base).cpu
	for k := 1; k <= changes; k++ {
		sent := time.Now()
		if st, o, err := c.purchase(ctx, id, "buyer-"+strconv.Itoa(k), false, nil, ""); err != nil || st != http.StatusAccepted {
			t.Fatalf("purchase %d: %d %v %+v", k, st, err, o.Error)
		}
		if !testenv.WaitUntil(t, 30*time.Second, fmt.Sprintf("every stream to get event %d", k), func() bool { return count(arrivals[k]) == n }) {
			t.FailNow()
		}
		for i := range n {
			lat = append(lat, time.Duration(arrivals[k][i].Load()-sent.UnixNano()))
		}
		if rest := time.Until(sent.Add(time.Second)); rest > 0 {
			time.Sleep(rest)
		}
	}
	busy := serverStats(t, base).cpu - cpu1
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(time.Millisecond)
	}
	t.Logf("sse: %d stock changes to %d streams: purchase-to-every-stream p50 %s, p99 %s, max %s (polled every 500 ms, so up to 500 ms of it is the poll)",
		changes, n, pct(0.5), pct(0.99), lat[len(lat)-1].Round(time.Millisecond))
	t.Logf("sse: server CPU over %s: %.2f s quiet, %.2f s with the changes: %.1f ms of CPU per change fanned out (%.1f µs per stream)",
		window, quiet, busy, (busy-quiet)/float64(changes)*1000, (busy-quiet)/float64(changes)/float64(n)*1e6)

	// Gone when they close: no stream's goroutine stays behind.
	cancel()
	for _, conn := range drain(dialed) {
		conn.Close()
	}
	conns.Wait()
	testenv.WaitUntil(t, 30*time.Second, "the server's goroutines back to idle", func() bool { return serverStats(t, base).goroutines <= idle.goroutines+5 })
}

func count(xs []atomic.Int64) int {
	n := 0
	for i := range xs {
		if xs[i].Load() != 0 {
			n++
		}
	}
	return n
}

// drain returns what is buffered in ch now, without waiting for more.
func drain(ch chan net.Conn) []net.Conn {
	var out []net.Conn
	for {
		select {
		case c := <-ch:
			out = append(out, c)
		default:
			return out
		}
	}
}

func mib(b float64) float64 { return b / (1 << 20) }

// procStats are the server's own figures, from its /metrics.
type procStats struct{ rss, heap, goroutines, cpu float64 }

func serverStats(t *testing.T, base string) procStats {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s procStats
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			s.rss = f
		case "go_memstats_heap_inuse_bytes":
			s.heap = f
		case "go_goroutines":
			s.goroutines = f
		case "process_cpu_seconds_total":
			s.cpu = f
		}
	}
	return s
}
