package http_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	fshttp "github.com/flashsale/flashsale/http"
)

// buyHeld buys one room of sale as user and returns the held order's ID.
func (s *Server) buyHeld(tb testing.TB, saleID, user string) string {
	tb.Helper()
	jwt := userJWT(tb, user, flashsale.TierGold)
	var tok flashsale.PurchaseToken
	s.MustDo(tb, http.StatusCreated, "POST", "/api/sales/"+saleID+"/token", jwt, "", &tok)
	var o orderResp
	s.MustDo(tb, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", jwt, fmt.Sprintf(`{"token":%q}`, tok.Token), &o)
	if o.Status != "held" {
		tb.Fatalf("%s's order is %s, want held", user, o.Status)
	}
	return o.OrderID
}

// TestDemoPay: the demo pays the caller's own held order with payment_ref
// demo-<id>, and nothing else: not someone else's order (404, the same
// answer as an order that does not exist), not an order that is no longer
// held, not without a valid user token, not outside demo mode.
func TestDemoPay(t *testing.T) {
	s := MustOpenServer(t)
	saleID := s.CreateSale(t, `"per_user_limit":2,`, 5)
	alice, bob := userJWT(t, "alice", flashsale.TierGold), userJWT(t, "bob", flashsale.TierGold)
	paid := s.buyHeld(t, saleID, "alice")
	cancelled := s.buyHeld(t, saleID, "alice")
	s.MustDo(t, http.StatusOK, "POST", "/api/orders/"+cancelled+"/cancel", alice, "", nil)
	bobs := s.buyHeld(t, saleID, "bob")

	var o struct {
		OrderID    string `json:"order_id"`
		Status     string `json:"status"`
		PaymentRef string `json:"payment_ref"`
	}
	s.MustDo(t, http.StatusOK, "POST", "/api/demo/orders/"+paid+"/pay", alice, `{"payment_ref":"mine"}`, &o)
	if o.OrderID != paid || o.Status != "paid" || o.PaymentRef != "demo-"+paid {
		t.Fatalf("paid = %+v, want %s paid with ref demo-%s", o, paid, paid)
	}
	var sale saleResp
	s.MustDo(t, http.StatusOK, "GET", "/api/admin/sales/"+saleID, adminToken, "", &sale)
	if n := sale.Nights[0]; n.Sold != 1 || n.Held != 1 || n.Available != 3 {
		t.Fatalf("night after one demo payment = %+v, want sold 1, held 1 (bob), available 3", n)
	}

	for _, tt := range []struct {
		name, order, auth string
		status            int
		code              string
	}{
		{"SomeoneElses", bobs, alice, 404, flashsale.ENotFound},
		{"Unknown", "01JZZZZZZZZZZZZZZZZZZZZZZZ", alice, 404, flashsale.ENotFound},
		{"TooLongID", strings.Repeat("x", 129), alice, 404, flashsale.ENotFound},
		{"AlreadyPaid", paid, alice, 409, flashsale.EConflict},
		{"Cancelled", cancelled, alice, 409, flashsale.EConflict},
		{"NoToken", bobs, "", 401, flashsale.EUnauthenticated},
		{"AdminToken", bobs, adminToken, 401, flashsale.EUnauthenticated},
		{"ForgedToken", bobs, bob[:len(bob)-4] + "AAAA", 401, flashsale.EUnauthenticated},
		{"Garbage", bobs, "not.a.jwt", 401, flashsale.EUnauthenticated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.Do(t, "POST", "/api/demo/orders/"+tt.order+"/pay", tt.auth, nil)
			if r.Status != tt.status || r.code() != tt.code {
				t.Fatalf("status %d code %q, want %d %q: %s", r.Status, r.code(), tt.status, tt.code, r.Body)
			}
		})
	}
	r := s.Do(t, "GET", "/api/demo/orders/"+bobs+"/pay", bob, nil)
	if r.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", r.Status)
	}
	var b orderResp
	s.MustDo(t, http.StatusOK, "GET", "/api/orders/"+bobs, bob, "", &b)
	if b.Status != "held" {
		t.Fatalf("bob's order is %s after the refused payments, want held", b.Status)
	}

	t.Run("HoldRanOut", func(t *testing.T) {
		// No reaper runs in this server: the order is still held, past its window.
		short := s.CreateSale(t, `"hold_seconds":1,`, 1)
		id := s.buyHeld(t, short, "carol")
		carol := userJWT(t, "carol", flashsale.TierGold)
		var o struct {
			Status        string    `json:"status"`
			HoldExpiresAt time.Time `json:"hold_expires_at"`
		}
		s.MustDo(t, http.StatusOK, "GET", "/api/orders/"+id, carol, "", &o)
		for deadline := time.Now().Add(5 * time.Second); !time.Now().After(o.HoldExpiresAt); {
			if time.Now().After(deadline) {
				t.Fatal("the hold never ran out")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r := s.Do(t, "POST", "/api/demo/orders/"+id+"/pay", carol, nil); r.Status != 409 || r.code() != flashsale.EConflict {
			t.Fatalf("pay after the hold ran out: %d %s", r.Status, r.Body)
		}
		s.MustDo(t, http.StatusOK, "GET", "/api/orders/"+id, carol, "", &o)
		if o.Status != "held" {
			t.Fatalf("order %s after the refused payment, want still held (for the reaper)", o.Status)
		}
	})

	t.Run("NotRegisteredOutsideDemo", func(t *testing.T) {
		// The same service behind a server without demo mode.
		nd := fshttp.NewServer(s.Svc.Roles(), fshttp.Config{JWTSecret: []byte(jwtSecret), AdminToken: adminToken})
		w := serve(nd.Handler(), "POST", "/api/demo/orders/"+bobs+"/pay", "Bearer "+bob)
		if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"not_found"`) {
			t.Fatalf("outside demo mode: %d %s", w.Code, w.Body)
		}
	})
}

// serve sends one request straight to h.
func serve(h http.Handler, method, path, auth string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// FuzzDemoPay: whatever the path and Authorization header, the demo pay
// answers without a 5xx, and pays only alice's held order when alice asks.
func FuzzDemoPay(f *testing.F) {
	s := MustOpenServer(f)
	saleID := s.CreateSale(f, `"per_user_limit":50,`, 100)
	alice := userJWT(f, "alice", flashsale.TierGold)
	bobs := s.buyHeld(f, saleID, "bob")
	mine := map[string]bool{}
	for range 3 {
		id := s.buyHeld(f, saleID, "alice")
		mine[id] = true
		f.Add(id, "Bearer "+alice)
	}
	f.Add(bobs, "Bearer "+alice)
	f.Add(bobs, "Bearer "+adminToken)
	f.Add("../"+bobs, "Bearer "+alice)
	f.Add("%2e%2e", "Basic YWxpY2U6")
	f.Add(strings.Repeat("0", 200), "Bearer ")
	h := s.Server.Config.Handler
	f.Fuzz(func(t *testing.T, id, auth string) {
		if strings.ContainsAny(auth, "\r\n\x00") {
			return
		}
		r, err := http.NewRequest("POST", "http://x/api/demo/orders/"+id+"/pay", nil)
		if err != nil {
			return
		}
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%q %q: %d %s", id, auth, w.Code, w.Body)
		}
		if w.Code == http.StatusOK && (auth != "Bearer "+alice || !mine[id]) {
			t.Fatalf("%q %q paid: %s", id, auth, w.Body)
		}
	})
}
