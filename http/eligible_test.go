package http_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/usersvc"
	"github.com/golang-jwt/jwt/v5"
)

// TestServer_Eligibility: over real HTTP, each rule a guest fails is a 403
// not_eligible naming the rule; facts in the token decide without the user
// service, the rest come from it, and a sale without rules never asks it;
// the user service down with nothing cached is a 503, and nothing of the
// stock moves for any refusal.
func TestServer_Eligibility(t *testing.T) {
	var calls atomic.Int64
	var down atomic.Bool
	users := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if down.Load() {
			http.Error(w, "upgrading", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/users/dave":
			w.Write([]byte(`{"tier":"basic","stays_30d":1,"channel":""}`))
		case "/users/erin":
			w.Write([]byte(`{"tier":"platinum","stays_30d":4,"channel":"ota-x"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(users.Close)
	facts, err := usersvc.New(usersvc.Config{URL: users.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { facts.Close() })
	s := MustOpenServer(t, func(cfg *funnel.Config) { cfg.Facts = facts })

	open := s.CreateSale(t, ``, 5)
	gold := s.CreateSale(t, `"eligibility":{"min_tier":"gold"},`, 5)
	stays := s.CreateSale(t, `"eligibility":{"min_stays_30d":2},`, 5)
	ota := s.CreateSale(t, `"eligibility":{"channels":["ota-x"]},`, 5)

	jwtFor := func(claims jwt.MapClaims) string {
		claims["exp"] = time.Now().Add(time.Hour).Unix()
		return signJWT(t, jwt.SigningMethodHS256, []byte(jwtSecret), claims)
	}
	tests := []struct {
		name   string
		saleID string
		token  string
		status int
		rule   string // in the 403's message
		calls  int64
	}{
		{"NoRulesNoCall", open, jwtFor(jwt.MapClaims{"sub": "dave"}), 201, "", 0},
		{"TierFromToken", gold, jwtFor(jwt.MapClaims{"sub": "dave", "tier": "silver"}), 403, "min_tier", 0},
		{"TierFromService", gold, jwtFor(jwt.MapClaims{"sub": "dave"}), 403, "min_tier", 1},
		{"TierFromServiceOK", gold, jwtFor(jwt.MapClaims{"sub": "erin"}), 201, "", 1},
		{"StaysFromCache", stays, jwtFor(jwt.MapClaims{"sub": "dave"}), 403, "min_stays_30d", 0},
		{"StaysFromToken", stays, jwtFor(jwt.MapClaims{"sub": "dave", "stays_30d": 2}), 201, "", 0},
		{"ChannelFromToken", ota, jwtFor(jwt.MapClaims{"sub": "frank", "channel": "ota-y"}), 403, "channels", 0},
		{"ChannelUnknownUser", ota, jwtFor(jwt.MapClaims{"sub": "frank"}), 403, "channels", 1},
		{"ChannelFromCache", ota, jwtFor(jwt.MapClaims{"sub": "erin"}), 201, "", 0},
	}
	before := map[string]state{}
	for _, id := range []string{open, gold, stays, ota} {
		before[id] = s.State(t, id)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := calls.Load()
			r := s.Do(t, "POST", "/api/sales/"+tt.saleID+"/token", tt.token, strings.NewReader(`{}`))
			if r.Status != tt.status {
				t.Fatalf("token: status %d, want %d: %s", r.Status, tt.status, r.Body)
			}
			if got := calls.Load() - n; got != tt.calls {
				t.Errorf("user-service calls = %d, want %d", got, tt.calls)
			}
			if tt.status != http.StatusForbidden {
				return
			}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			json.Unmarshal(r.Body, &e)
			if e.Error.Code != flashsale.ENotEligible || !strings.HasPrefix(e.Error.Message, tt.rule+":") {
				t.Fatalf("403 body %s, want not_eligible naming %s", r.Body, tt.rule)
			}
			// The purchase is refused the same way, before its token is looked at.
			if r := s.Do(t, "POST", "/api/sales/"+tt.saleID+"/purchase", tt.token, strings.NewReader(`{}`)); r.Status != 403 || !strings.Contains(string(r.Body), tt.rule) {
				t.Fatalf("purchase: %d %s, want 403 naming %s", r.Status, r.Body, tt.rule)
			}
		})
	}
	t.Run("UserServiceDown", func(t *testing.T) {
		down.Store(true)
		defer down.Store(false)
		r := s.Do(t, "POST", "/api/sales/"+stays+"/token", jwtFor(jwt.MapClaims{"sub": "grace"}), strings.NewReader(`{}`))
		if r.Status != http.StatusServiceUnavailable || r.code() != flashsale.EUnavailable || r.Header.Get("Retry-After") == "" {
			t.Fatalf("nothing cached, user service down: %d %s, want 503 unavailable with Retry-After", r.Status, r.Body)
		}
		// Facts already cached still answer.
		if r := s.Do(t, "POST", "/api/sales/"+ota+"/token", jwtFor(jwt.MapClaims{"sub": "erin"}), strings.NewReader(`{}`)); r.Status != http.StatusCreated {
			t.Fatalf("cached user, service down: %d %s", r.Status, r.Body)
		}
	})
	for id, st := range before {
		if got := s.State(t, id); got.Nights[0] != st.Nights[0] || len(got.Orders) != len(st.Orders) {
			t.Errorf("sale %s changed: %+v, was %+v", id, got, st)
		}
	}
}
