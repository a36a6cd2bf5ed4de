package http

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestNoStoreForBearers: an answer to a bearer (an order, an admin view,
// an error) is Cache-Control: no-store, so no cache on the way keeps it for
// someone else; a public read keeps its own caching.
func TestNoStoreForBearers(t *testing.T) {
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 }})
	for _, tt := range []struct {
		method, path, auth string
		noStore            bool
	}{
		{"GET", "/api/orders/01JORDER", "alice", true},
		{"GET", "/api/admin/sales", "admin", true},
		{"GET", "/api/admin/sales", "alice", true}, // a 403 is the bearer's too
		{"POST", "/api/sales/01JSALE/purchase", "alice", true},
		{"GET", "/api/sales", "", false},
		{"GET", "/api/sales/01JSALE", "", false},
	} {
		w := do(t, s, tt.method, tt.path, tt.auth, "")
		if got := w.Header().Get("Cache-Control") == "no-store"; got != tt.noStore {
			t.Errorf("%s %s as %q: %d, Cache-Control %q", tt.method, tt.path, tt.auth, w.Code, w.Header().Get("Cache-Control"))
		}
	}
}
