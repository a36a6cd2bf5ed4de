package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestLimitsShared runs three instances on one Redis: a user's purchase
// allowance is one allowance however the load balancer spreads the
// requests, and the refusals are 429 with a Retry-After from the limiter.
func TestLimitsShared(t *testing.T) {
	if testing.Short() {
		t.Skip("distributed test skipped in -short")
	}
	c := startCluster(t, 3, testenv.MySQLDatabase(t), "FLASHSALE_LIMIT_PURCHASE_USER=1/m,3")
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
	// Retry-After says how long until the next purchase fits: at 1 a
	// minute, from a few seconds to 60, never the constant 1.
	r, err := c.clients[1].Do(context.Background(), "POST", "/api/sales/"+id+"/purchase", c.clients[1].jwt("scalper"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := r.RetryAfter; r.Status != http.StatusTooManyRequests || n < 2*time.Second || n > 60*time.Second {
		t.Fatalf("another purchase: %d, Retry-After %v, want 429 and the seconds until a token (at 1 a minute, 2 to 60)", r.Status, n)
	}
	// Another user is not touched.
	if status, o, err := c.clients[2].purchase(context.Background(), id, "guest", false, nil, ""); err != nil || status != http.StatusAccepted {
		t.Fatalf("another user: %d %+v %v", status, o, err)
	}
}
