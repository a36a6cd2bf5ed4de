package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// buildBinary compiles the real flashsale binary once per test run.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	built.once.Do(func() {
		built.bin = filepath.Join(binDir, "flashsale")
		built.out, built.err = exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput()
	})
	if built.err != nil {
		tb.Fatalf("build: %v\n%s", built.err, built.out)
	}
	return built.bin
}

// built is the flashsale binary of this source tree, built once per test
// process into binDir (TestMain's): every test that starts one used to
// link its own, about 5 s each, several minutes of CI.
var built struct {
	once sync.Once
	bin  string
	out  []byte
	err  error
}

// startBinary runs `flashsale serve` with env and waits until it is ready.
func startBinary(tb testing.TB, bin string, env ...string) *exec.Cmd {
	tb.Helper()
	return startBinaryTo(tb, bin, os.Stderr, env...)
}

// startBinaryTo is startBinary with the process's output (its log) going to out.
func startBinaryTo(tb testing.TB, bin string, out io.Writer, env ...string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// waitReady waits up to 30 s until the instance at base answers /readyz 200.
func waitReady(tb testing.TB, base string) {
	tb.Helper()
	if !testenv.WaitUntil(tb, 30*time.Second, base+" to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		tb.FailNow()
	}
}

// TestCrash kill -9s the real binary in the middle of a purchase storm,
// restarts it on the same data dir, and proves that every 202 is an order
// and that no night is oversold, then sells on after the restart.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	env := []string{
		"FLASHSALE_ADDR=" + addr, "FLASHSALE_DATA_DIR=" + dir,
		"FLASHSALE_ADMIN_TOKEN=" + testAdminToken, "FLASHSALE_JWT_SECRET=" + testJWTSecret,
		"FLASHSALE_LOG_LEVEL=error",
	}
	base := "http://" + addr
	proc := startBinary(t, bin, env...)
	waitReady(t, base)
	c := newClient(base, testAdminToken, testJWTSecret)
	stock := []int{300, 300, 300}
	id := c.createSale(t, saleJSON(stock, 3, false))

	type accept struct {
		user         string
		first, count int
		rooms        int
	}
	var (
		mu       sync.Mutex
		accepted = map[string]accept{}
		ok       atomic.Int64
	)
	storm := func(ctx context.Context, workers int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				for ctx.Err() == nil {
					user := fmt.Sprintf("g%d", rng.IntN(1500))
					first, nights, rooms := rng.IntN(3), 1+rng.IntN(2), 1+rng.IntN(2)
					if first+nights > 3 {
						nights = 3 - first
					}
					body := map[string]any{"check_in": testenv.Night(first), "nights": nights, "rooms": rooms}
					status, o, err := c.purchase(ctx, id, user, false, body, "")
					if err != nil {
						time.Sleep(5 * time.Millisecond) // the server is down: keep knocking
						continue
					}
					if status == http.StatusAccepted {
						mu.Lock()
						accepted[o.OrderID] = accept{user, first, nights, rooms}
						mu.Unlock()
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { storm(ctx, 64); close(done) }()
	for ok.Load() < 150 {
		time.Sleep(time.Millisecond)
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.Wait()
	t.Logf("killed with %d accepted", ok.Load())
	time.Sleep(100 * time.Millisecond) // a few requests fail against the dead port
	startBinary(t, bin, env...)
	waitReady(t, base)
	time.Sleep(300 * time.Millisecond) // the storm keeps going against the new process
	cancel()
	<-done

	// Every 202 is an order, held, owned by its buyer.
	for oid, a := range accepted {
		var o orderJSON
		status, err := c.do(t.Context(), "GET", "/api/orders/"+oid, c.jwt(a.user), nil, nil, &o)
		if err != nil || status != 200 || o.Status != "held" || o.Rooms != a.rooms || o.Nights != a.count {
			t.Fatalf("202 order %s: %d %v %+v", oid, status, err, o)
		}
	}
	// No night oversold; the engine rebuilt to the database's figures; the
	// accepted orders are all counted (held may also include orders whose 202
	// was lost with the process).
	taken := make([]int, 3)
	for _, a := range accepted {
		for i := a.first; i < a.first+a.count; i++ {
			taken[i] += a.rooms
		}
	}
	for i, n := range c.adminSale(t, id).Nights {
		if n.Held+n.Sold > n.Stock || n.Available != n.Stock-n.Held-n.Sold || n.Held+n.Sold < taken[i] {
			t.Errorf("night %s: %+v, 202s took %d", n.Date, n, taken[i])
		}
	}
	t.Logf("after restart: %d orders accepted in all", len(accepted))
}
