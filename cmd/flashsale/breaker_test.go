package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// readiness is /readyz's body.
type readiness struct {
	Ready    bool   `json:"ready"`
	Engine   string `json:"engine"`
	Database string `json:"database"`
	Breaker  *struct {
		State  string `json:"state"`
		Forced string `json:"forced"`
	} `json:"breaker"`
	Selling    string   `json:"selling"`
	Migrations string   `json:"migrations"`
	Pending    []string `json:"pending_migrations"`
	Sales      string   `json:"sales"`
	NotLoaded  []string `json:"not_loaded"`
	Reasons    []string `json:"reasons"`
}

func (c *client) readyz(t *testing.T) (int, readiness) {
	t.Helper()
	var r readiness
	status, err := c.do(context.Background(), "GET", "/readyz", "", nil, nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	return status, r
}

// TestBreaker runs the binary on its own redis-server and kills it: the
// breaker opens, /readyz says so (503), a purchase is a 503 at once rather
// than after the request deadline; Redis comes back empty, the breaker
// closes on its own, the sale is rebuilt and sells. An operator can pin the
// breaker open and hand it back.
func TestBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	rs := testenv.StartRedis(t)
	c := startCluster(t, 1, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+rs.URL(),
		"FLASHSALE_BREAKER_OPEN_FOR=500ms", "FLASHSALE_REQUEST_TIMEOUT=2s")
	cl := c.clients[0]
	id := cl.createSale(t, saleJSON([]int{10}, 1, false))
	ctx := context.Background()
	buy := func(user string) (int, orderJSON) {
		t.Helper()
		status, o, err := cl.purchase(ctx, id, user, false, nil, "key-"+user)
		if err != nil {
			t.Fatal(err)
		}
		return status, o
	}
	if status, o := buy("before"); status != http.StatusAccepted {
		t.Fatalf("purchase before the fault: %d %+v", status, o)
	}
	if status, r := cl.readyz(t); status != http.StatusOK || r.Breaker == nil || r.Breaker.State != "closed" {
		t.Fatalf("readyz before the fault: %d %+v", status, r)
	}

	rs.Kill()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, o := buy("during")
		if status != http.StatusServiceUnavailable {
			t.Fatalf("purchase with Redis dead: %d %+v, want 503", status, o)
		}
		if _, r := cl.readyz(t); r.Breaker != nil && r.Breaker.State == "open" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not open with Redis dead")
		}
	}
	// Open: refused at once. The request deadline is 2 s; a purchase that
	// went to the dead Redis would wait out the Redis timeout (500 ms).
	start := time.Now()
	for range 20 {
		if status, o := buy("open"); status != http.StatusServiceUnavailable || o.Error.Code != "unavailable" {
			t.Fatalf("purchase with the breaker open: %d %+v", status, o)
		}
	}
	t.Logf("20 purchases refused in %v with the breaker open", time.Since(start))
	if status, r := cl.readyz(t); status != http.StatusServiceUnavailable || r.Ready || r.Engine != "unavailable" {
		t.Fatalf("readyz with the breaker open: %d %+v", status, r)
	}

	rs.Start() // back, and empty: the heal loop rebuilds the sale
	var recovered time.Duration
	back := time.Now()
	for deadline := back.Add(30 * time.Second); ; {
		status, _ := buy("after")
		if status == http.StatusAccepted {
			recovered = time.Since(back)
			break
		}
		if status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("purchase after Redis came back: %d (after %v)", status, time.Since(back))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("Redis back empty: first purchase accepted %v later", recovered.Round(time.Millisecond))
	if status, r := cl.readyz(t); status != http.StatusOK || r.Breaker.State != "closed" {
		t.Fatalf("readyz after recovery: %d %+v", status, r)
	}

	// An operator pins it open: purchases are refused, and readyz says so
	// but stays 200 (a decision, not a fault: the instance keeps serving
	// reads); auto hands it back.
	var st struct{ State, Forced string }
	if status, err := cl.do(ctx, "POST", "/api/admin/breaker", cl.admin, map[string]string{"force": "open"}, nil, &st); err != nil || status != http.StatusOK || st.State != "open" {
		t.Fatalf("force open: %d %v %+v", status, err, st)
	}
	if status, o := buy("forced"); status != http.StatusServiceUnavailable {
		t.Fatalf("purchase with the breaker forced open: %d %+v", status, o)
	}
	if status, r := cl.readyz(t); status != http.StatusOK || r.Breaker.Forced != "open" || len(r.Reasons) != 1 || !strings.HasPrefix(r.Reasons[0], "breaker: forced open") {
		t.Fatalf("readyz forced open: %d %+v", status, r)
	}
	if status, err := cl.do(ctx, "POST", "/api/admin/breaker", cl.admin, map[string]string{"force": "auto"}, nil, &st); err != nil || status != http.StatusOK || st.State != "closed" {
		t.Fatalf("force auto: %d %v %+v", status, err, st)
	}
	if status, o := buy("forced"); status != http.StatusAccepted {
		t.Fatalf("purchase after auto: %d %+v", status, o)
	}
	checkBooksAfterBreaker(t, c, id)
}

// checkBooksAfterBreaker: every 202 has its held order, and the engine
// and the database agree on what is left.
func checkBooksAfterBreaker(t *testing.T, c *cluster, id string) {
	t.Helper()
	var n adminNight
	if !testenv.Poll(20*time.Second, 100*time.Millisecond, func() bool {
		n = c.clients[0].adminSale(t, id).Nights[0]
		return n.Held == 3 && n.Available == 7
	}) {
		t.Fatalf("night after the breaker test: %+v, want 3 held and 7 available", n)
	}
}
