package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/metrics/metricstest"
)

// TestLimitsShared runs three instances on one Redis, each allowing its
// share of the limits (flashsale.Shared): a user's purchase allowance is
// one allowance when the load balancer spreads the requests, and the
// refusals are 429 with a Retry-After from the limiter.
func TestLimitsShared(t *testing.T) {
	if testing.Short() {
		t.Skip("distributed test skipped in -short")
	}
	c := startCluster(t, 3, testenv.MySQLDatabase(t), "FLASHSALE_LIMIT_PURCHASE_USER=1/m,3")
	// Each instance counts the others by their heartbeats (a quarter
	// second apart): wait until every one counts three.
	for i, cl := range c.clients {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if n := metricstest.Scrape(t, cl.Base+"/metrics").Value("flashsale_instances"); n == 3 {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("instance %d counts %v instances, want 3", i, n)
			}
		}
	}
	sale := saleJSON([]int{100}, 10, false)
	id := c.clients[0].createSale(t, sale)
	accepted, limited := 0, 0
	for i := range 9 {
		cl := c.clients[i%3]
		status, o, err := cl.purchase(context.Background(), id, "scalper", false, nil, fmt.Sprintf("k-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		switch status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			limited++
			if o.Error.Code != "rate_limited" {
				t.Fatalf("429 with code %q", o.Error.Code)
			}
		default:
			t.Fatalf("purchase %d: %d %+v", i, status, o)
		}
	}
	if accepted != 3 || limited != 6 {
		t.Fatalf("%d accepted and %d limited across three instances, want the one burst of 3 and 6 refused", accepted, limited)
	}
	// Retry-After says how long until the next purchase fits on that
	// instance: at its share of 1 a minute (1 every 3), from a few
	// seconds to 180, never the constant 1.
	r, err := c.clients[1].Do(context.Background(), "POST", "/api/sales/"+id+"/purchase", c.clients[1].jwt("scalper"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.RetryAfter; r.Status != http.StatusTooManyRequests || n < 2*time.Second || n > 180*time.Second {
		t.Fatalf("another purchase: %d, Retry-After %v, want 429 and the seconds until a token (at 1 in 3 minutes, 2 to 180)", r.Status, n)
	}
	// Another user is not touched.
	if status, o, err := c.clients[2].purchase(context.Background(), id, "guest", false, nil, ""); err != nil || status != http.StatusAccepted {
		t.Fatalf("another user: %d %+v %v", status, o, err)
	}
}
