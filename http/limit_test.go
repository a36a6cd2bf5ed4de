package http

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/golang-jwt/jwt/v5"
)

func newLimitedServer(t *testing.T, svc *stubService, readPerIP flashsale.Rate, trusted ...string) *Server {
	t.Helper()
	l := inmem.NewLimiter()
	t.Cleanup(func() { l.Close() })
	var prefixes []netip.Prefix
	for _, p := range trusted {
		prefixes = append(prefixes, netip.MustParsePrefix(p))
	}
	return NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 },
		Limiter: l, ReadPerIP: readPerIP, TrustedProxies: prefixes})
}

// wantLimited checks a 429 rate_limited with a Retry-After of whole
// seconds, at least 1.
func wantLimited(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	wantError(t, w, http.StatusTooManyRequests, flashsale.ERateLimited)
	if n, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || n < 1 {
		t.Fatalf("Retry-After %q, want whole seconds ≥ 1", w.Header().Get("Retry-After"))
	}
}

// TestReadLimit: the reads share one allowance per client address, refuse
// past it with 429 and a Retry-After from the limiter, and leave the
// purchase path (limited in the funnel) alone.
func TestReadLimit(t *testing.T) {
	svc := &stubService{}
	s := newLimitedServer(t, svc, flashsale.Rate{N: 2, Per: time.Minute, Burst: 3})
	for _, p := range []string{"/api/sales", "/api/sales/s1", "/api/orders/o1"} {
		auth := ""
		if strings.HasPrefix(p, "/api/orders") {
			auth = "alice"
		}
		if w := do(t, s, "GET", p, auth, ""); w.Code != http.StatusOK {
			t.Fatalf("%s within the burst: %d", p, w.Code)
		}
	}
	before := svc.n
	w := do(t, s, "GET", "/api/sales/s1", "", "")
	wantLimited(t, w)
	if got := w.Header().Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After %q at 2 a minute, want 30 (from the limiter, not a constant)", got)
	}
	if svc.n != before {
		t.Fatal("a refused read reached the service")
	}
	if w := do(t, s, "POST", "/api/sales/s1/purchase", "alice", ""); w.Code != http.StatusAccepted {
		t.Fatalf("purchase refused for the read rate: %d", w.Code)
	}
}

// TestClientIP: behind a trusted proxy the client is the address the proxy
// appended; a client that is not behind one cannot pick its address.
func TestClientIP(t *testing.T) {
	svc := &stubService{}
	s := newLimitedServer(t, svc, flashsale.Rate{}, "10.0.0.0/8", "2001:db8:1::/48")
	for _, tc := range []struct{ peer, xff, want string }{
		{"10.0.0.1:5555", "203.0.113.7", "203.0.113.7"},
		{"10.0.0.1:5555", "198.51.100.1, 203.0.113.7", "203.0.113.7"},  // the left is the client's to write
		{"10.0.0.1:5555", "203.0.113.7, 10.0.0.9", "203.0.113.7"},      // two trusted hops
		{"10.0.0.1:5555", "", "10.0.0.1"},                              // the proxy itself
		{"10.0.0.1:5555", "garbage, 203.0.113.7", "203.0.113.7"},       // unreadable beyond the client's hop
		{"10.0.0.1:5555", "203.0.113.7, garbage", "10.0.0.1"},          // a hop we cannot read: believe nothing
		{"192.0.2.9:80", "198.51.100.2", "192.0.2.9"},                  // not a trusted peer: header ignored
		{"[2001:db8:1::5]:443", "2001:db8:2::7", "2001:db8:2::7"},      // IPv6
		{"[::ffff:10.0.0.1]:443", "::ffff:203.0.113.7", "203.0.113.7"}, // mapped addresses
	} {
		r := httptest.NewRequest("POST", "/api/sales/s1/purchase", nil)
		r.RemoteAddr = tc.peer
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		r.Header.Set("Authorization", "Bearer "+sign(t, jwt.SigningMethodHS256, testSecret,
			jwt.MapClaims{"sub": "alice", "tier": "gold", "exp": t0.Add(time.Hour).Unix()}))
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusAccepted {
			t.Fatalf("%+v: %d %s", tc, w.Code, w.Body)
		}
		if got := svc.purchase.ClientIP; got != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %q, want %q", tc.peer, tc.xff, got, tc.want)
		}
	}
	// With no trusted proxy the header is never believed, from any peer.
	s = newLimitedServer(t, svc, flashsale.Rate{})
	for _, tc := range []struct{ peer, want string }{
		{"10.0.0.1:5555", "10.0.0.1"},
		{"[2001:db8:1::5]:443", "2001:db8:1::5"},
		{"not-an-address", "not-an-address"},
	} {
		r := httptest.NewRequest("POST", "/api/sales/s1/purchase", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", "203.0.113.7")
		if got := s.clientIP(r); got != tc.want {
			t.Errorf("no trusted proxies, peer %s: client %q, want %q", tc.peer, got, tc.want)
		}
	}
}

func FuzzClientIP(f *testing.F) {
	for _, s := range []string{"", "203.0.113.7", "198.51.100.1, 203.0.113.7", "10.0.0.3, 203.0.113.7, 10.0.0.2",
		"garbage", ",,,", "::ffff:203.0.113.7", "[::1]", "2001:db8::1, 10.0.0.1", strings.Repeat("1.2.3.4,", 100)} {
		f.Add("10.0.0.1:5555", s)
		f.Add("192.0.2.1:80", s)
	}
	s := &Server{trustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Forwarded-For", xff)
		ip := s.clientIP(r)
		host, _, err := net.SplitHostPort(peer)
		if err != nil {
			host = peer
		}
		if ip == host {
			return
		}
		a, err := netip.ParseAddr(ip)
		if err != nil {
			t.Fatalf("clientIP(%q, %q) = %q: neither the peer nor an address", peer, xff, ip)
		}
		if s.trusted(a) {
			t.Fatalf("clientIP(%q, %q) = %q, a trusted proxy", peer, xff, ip)
		}
	})
}

// waitErr is an unavailable answer that knows when to retry.
type waitErr struct{}

func (waitErr) Error() string             { return flashsale.ErrUnavailable.Error() }
func (waitErr) Unwrap() error             { return flashsale.ErrUnavailable }
func (waitErr) RetryAfter() time.Duration { return 6500 * time.Millisecond }

// TestRetryAfterComputed: a 503 whose cause knows the wait (an open
// breaker) says it, rounded up; one that does not says 1.
func TestRetryAfterComputed(t *testing.T) {
	w := do(t, newStubServer(&stubService{err: waitErr{}}), "POST", "/api/sales/s1/purchase", "alice", "")
	wantError(t, w, http.StatusServiceUnavailable, flashsale.EUnavailable)
	if got := w.Header().Get("Retry-After"); got != "7" {
		t.Fatalf("Retry-After %q, want 7 (6.5 s rounded up)", got)
	}
	w = do(t, newStubServer(&stubService{err: flashsale.ErrUnavailable}), "POST", "/api/sales/s1/purchase", "alice", "")
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q without a known wait, want 1", got)
	}
}
