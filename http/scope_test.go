package http

import (
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestScopedTokens: operators and the payment service each have their own
// tokens, each a list so one can be rotated; the payment token confirms
// payments and reads orders and nothing else; an operator's token cannot
// confirm a payment once the payment service has a token; a user JWT is
// 403 on both; no token is 401.
func TestScopedTokens(t *testing.T) {
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, Now: func() time.Time { return t0 },
		AdminToken: "op-old, op-new", PaymentToken: "pay-1,pay-2"})
	const (
		createSale = "POST /api/admin/sales"
		breaker    = "GET /api/admin/breaker"
		paid       = "POST /api/orders/o1/paid"
		readOrder  = "GET /api/orders/o1"
	)
	bodies := map[string]string{createSale: `{}`, paid: `{"payment_ref":"charge-1"}`}
	tests := []struct {
		route, auth string
		status      int
	}{
		{createSale, "Bearer op-old", http.StatusBadRequest}, // through to the decoder
		{createSale, "Bearer op-new", http.StatusBadRequest},
		{createSale, "Bearer pay-1", http.StatusForbidden},
		{createSale, "alice", http.StatusForbidden},
		{createSale, "", http.StatusUnauthorized},
		{breaker, "Bearer pay-2", http.StatusForbidden},
		{breaker, "Bearer op-new,pay-1", http.StatusUnauthorized},
		{paid, "Bearer pay-1", http.StatusOK},
		{paid, "Bearer pay-2", http.StatusOK},
		{paid, "Bearer op-old", http.StatusForbidden},
		{paid, "alice", http.StatusForbidden},
		{paid, "Bearer pay-", http.StatusUnauthorized},
		{paid, "", http.StatusUnauthorized},
		{readOrder, "Bearer pay-1", http.StatusOK},
		{readOrder, "Bearer op-new", http.StatusOK},
		{readOrder, "alice", http.StatusOK},
		{readOrder, "Bearer nobody", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		method, path := tt.route[:4], tt.route[5:]
		if method[3] == ' ' {
			method, path = tt.route[:3], tt.route[4:]
		}
		w := do(t, s, method, path, tt.auth, bodies[tt.route])
		if w.Code != tt.status {
			t.Errorf("%s with %q: %d, want %d: %s", tt.route, tt.auth, w.Code, tt.status, w.Body)
		}
	}

	// Without a payment token of its own the payment service uses the
	// operators' (one deployment, one secret).
	s = NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, AdminToken: "op", Now: func() time.Time { return t0 }})
	if w := do(t, s, "POST", "/api/orders/o1/paid", "Bearer op", `{"payment_ref":"charge-1"}`); w.Code != http.StatusOK {
		t.Errorf("paid with the admin token and no payment token: %d %s", w.Code, w.Body)
	}
}
