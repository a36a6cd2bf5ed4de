package bench_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Share() // its runs are loads a timed test waits out (testenv.Alone)
	goleak.VerifyTestMain(m)
}

const (
	adminToken = "bench-admin-token-0123456789abcdef"
	jwtSecret  = "bench-jwt-secret-0123456789abcdefg"
)

// MustServe builds the flashsale binary and runs `flashsale serve` (the
// embedded shape) in a process of its own on a fresh data dir, stopped
// when the test ends; it returns a client of it.
func MustServe(tb testing.TB) *bench.Client {
	tb.Helper()
	dir := tb.TempDir()
	bin := filepath.Join(dir, "flashsale")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/flashsale/flashsale/cmd/flashsale").CombinedOutput(); err != nil {
		tb.Fatalf("build: %v\n%s", err, out)
	}
	addr := testenv.FreeAddr(tb)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "FLASHSALE_ADDR="+addr, "FLASHSALE_DATA_DIR="+dir,
		"FLASHSALE_DATABASE_URL=sqlite://"+filepath.Join(dir, "flashsale.db"),
		"FLASHSALE_ADMIN_TOKEN="+adminToken, "FLASHSALE_JWT_SECRET="+jwtSecret, "FLASHSALE_LOG_LEVEL=error")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := bench.NewClient("http://"+addr, adminToken, jwtSecret, 256)
	tb.Cleanup(c.CloseIdle)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := c.Do(context.Background(), "GET", "/readyz", "", nil, nil); err == nil && r.Status == 200 {
			return c
		}
		if time.Now().After(deadline) {
			tb.Fatal("flashsale serve not ready after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunEmbedded runs a burst of the default mix against the real binary
// and checks its books, then checks that the same check catches a 202
// the client says it got and the server never made.
func TestRunEmbedded(t *testing.T) {
	ctx := t.Context()
	c := MustServe(t)
	sale := bench.NewSale(30, 2)
	id, err := c.CreateSale(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.Run(ctx, bench.Config{Client: c, SaleID: id, Shape: bench.Burst(300), Mix: bench.DefaultMix,
		Users: "e2e-", Think: 50 * time.Millisecond, Pay: bench.PayDefault})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, o := range res.Outcomes {
		codes[o.Endpoint+" "+o.Code] += o.Count
	}
	t.Logf("%d requests, outcomes %v, funnel %+v", res.Requests, codes, res.Funnel)
	if res.Sessions != 300 || len(res.Accepted) < 30 || codes["purchase sold_out"] == 0 || codes["broken dropped"] == 0 ||
		codes["broken invalid_request"] == 0 || codes["broken unauthenticated"] == 0 || res.Funnel.Paid == 0 {
		t.Errorf("sessions %d, 202s %d, outcomes %v, funnel %+v: want 300 sessions selling out 30 rooms, every kind of broken client, some paid",
			res.Sessions, len(res.Accepted), codes, res.Funnel)
	}
	ck, err := bench.Verify(ctx, c, id, sale.PerUserLimit, res, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !ck.OK() || ck.Held+ck.Sold > 30 || ck.Orders["paid"] != ck.Sold {
		t.Fatalf("check %+v", ck)
	}

	// The same books against a record with a 202 the server never gave,
	// and one order claimed by two guests.
	forged := *res
	forged.Accepted = append(append(forged.Accepted[:len(forged.Accepted):len(forged.Accepted)],
		bench.Accepted{OrderID: "01FORGED0000000000000000000", User: "e2e-g0"}),
		bench.Accepted{OrderID: res.Accepted[0].OrderID, User: "someone-else"})
	ck, err = bench.Verify(ctx, c, id, sale.PerUserLimit, &forged, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ck.Broken(), ","); got != bench.InvLost+","+bench.InvDuplicate {
		t.Fatalf("forged record: broken %q, want lost_202 and duplicates: %+v", got, ck.Invariants)
	}
}
