package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestDrainEmbedded sends SIGTERM to the embedded binary mid-storm: for
// the shutdown delay /readyz says 503 draining while purchases are still
// answered; then it stops accepting, finishes what is in flight and exits
// 0. Restarted on the same data, every 202 it gave is a held order.
func TestDrainEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	bin, env, base := drainSetup(t, "1s")
	proc := startBinary(t, bin, env...)
	waitReady(t, base)
	cl := newClient(base, testAdminToken, testJWTSecret)
	id := cl.createSale(t, saleJSON([]int{5000}, 1, false))

	var (
		mu       sync.Mutex
		accepted = map[string]string{}
		next     atomic.Int64
		during   atomic.Int64 // 202s while /readyz said draining
		draining atomic.Bool
		wg       sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				user := fmt.Sprintf("g-%05d", next.Add(1))
				status, o, err := cl.purchase(ctx, id, user, false, nil, "")
				if err != nil || status != http.StatusAccepted {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				accepted[o.OrderID] = user
				mu.Unlock()
				if draining.Load() {
					during.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(time.Second, 20*time.Millisecond, func() bool {
		var r map[string]any
		status, _ := cl.do(ctx, "GET", "/readyz", "", nil, nil, &r)
		return status == http.StatusServiceUnavailable && r["draining"] == true
	}) {
		t.Error("/readyz did not say draining after SIGTERM")
	}
	draining.Store(true)
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit 15 s after SIGTERM")
	}
	stop()
	wg.Wait()
	if during.Load() == 0 {
		t.Error("no purchase was answered while draining: the delay must keep serving")
	}

	proc = startBinary(t, bin, env...)
	waitReady(t, base)
	for oid, user := range accepted {
		var o orderJSON
		status, err := cl.do(context.Background(), "GET", "/api/orders/"+oid, cl.jwt(user), nil, nil, &o)
		if err != nil || status != http.StatusOK || o.Status != "held" {
			t.Errorf("202 %s of %s after the restart: %d %v %q, want held", oid, user, status, err, o.Status)
		}
	}
	t.Logf("%d 202s, %d of them while draining; all held after the restart", len(accepted), during.Load())
}

// TestDrainDistributed sends SIGTERM to one of two instances mid-storm;
// its guests go on at the other. Every 202 either gave ends a held order
// and the books balance.
func TestDrainDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_SHUTDOWN_DELAY=1s")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	res := faultStorm(t, c, id, "drain", faultGuests, 100, func() {
		if err := c.procs[0].Process.Signal(syscall.SIGTERM); err != nil {
			t.Error(err)
			return
		}
		if err := c.procs[0].Wait(); err != nil {
			t.Errorf("instance 0 after SIGTERM: %v, want exit 0", err)
		}
		t.Logf("instance 0 drained and exited")
	})
	c.clients = c.clients[1:] // the rest goes to the instance still up
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
}

// TestDrainSecondSignal: an operator who sends a second SIGTERM (or a
// second Ctrl-C) while an instance drains gets it shut down now, still
// gracefully (exit 0, the data dir's database closed cleanly: it starts
// again and serves), instead of the signal being swallowed until the whole
// FLASHSALE_SHUTDOWN_DELAY has passed.
func TestDrainSecondSignal(t *testing.T) {
	bin, env, base := drainSetup(t, "60s")
	proc := startBinary(t, bin, env...)
	waitReady(t, base)
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !testenv.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}) {
		t.Fatal("/readyz did not say draining after the first SIGTERM")
	}
	sent := time.Now()
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after the second SIGTERM: %v, want 0 (a graceful close)", err)
		}
		t.Logf("exited %v after the second SIGTERM (the drain delay was 60 s)", time.Since(sent).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("still draining 20 s after a second SIGTERM: the signal was swallowed")
	}
	startBinary(t, bin, env...)
	waitReady(t, base)
}

// drainSetup is an embedded instance's binary, environment (its own data
// dir and port, the given FLASHSALE_SHUTDOWN_DELAY) and base URL.
func drainSetup(t *testing.T, delay string) (bin string, env []string, base string) {
	t.Helper()
	dir, addr := t.TempDir(), testenv.FreeAddr(t)
	return buildBinary(t), []string{
		"FLASHSALE_ADDR=" + addr, "FLASHSALE_DATA_DIR=" + dir, "FLASHSALE_SHUTDOWN_DELAY=" + delay,
		"FLASHSALE_ADMIN_TOKEN=" + testAdminToken, "FLASHSALE_JWT_SECRET=" + testJWTSecret, "FLASHSALE_LOG_LEVEL=error",
	}, "http://" + addr
}
