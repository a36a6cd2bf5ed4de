package http

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/golang-jwt/jwt/v5"
)

var (
	testSecret = []byte("test-jwt-secret-0123456789abcdef")
	testAdmin  = "test-admin-token"
	t0         = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
)

// clock is a settable time source so tokens expire on command.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// sign returns a JWT of claims signed with method and key.
func sign(tb testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	tb.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// rawToken assembles a token from a header, claims and signature without
// signing, for algorithms the server must refuse before any key is used.
func rawToken(header, claims map[string]any, sig string) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(header) + "." + enc(claims) + "." + base64.RawURLEncoding.EncodeToString([]byte(sig))
}

func TestAuthenticate(t *testing.T) {
	exp := t0.Add(time.Hour).Unix()
	valid := jwt.MapClaims{"sub": "alice", "tier": "gold", "exp": exp}
	tampered := func() string {
		parts := strings.Split(sign(t, jwt.SigningMethodHS256, testSecret, valid), ".")
		b, _ := json.Marshal(jwt.MapClaims{"sub": "mallory", "tier": "platinum", "exp": exp})
		parts[1] = base64.RawURLEncoding.EncodeToString(b)
		return strings.Join(parts, ".")
	}()
	noneToken := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid)

	tests := []struct {
		name   string
		header string // the whole Authorization header; "-" for none
		want   flashsale.User
		ok     bool
	}{
		{"Valid", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, valid), flashsale.User{ID: "alice", Tier: "gold", Claimed: flashsale.FactTier}, true},
		{"ValidLowercaseScheme", "bearer " + sign(t, jwt.SigningMethodHS256, testSecret, valid), flashsale.User{ID: "alice", Tier: "gold", Claimed: flashsale.FactTier}, true},
		{"ValidFacts", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": exp, "stays_30d": 2, "channel": "ota-x"}),
			flashsale.User{ID: "bob", Stays30d: 2, Channel: "ota-x", Claimed: flashsale.FactStays30d | flashsale.FactChannel}, true},
		{"ValidFactsZero", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": exp, "stays_30d": 0, "channel": ""}),
			flashsale.User{ID: "bob", Claimed: flashsale.FactStays30d | flashsale.FactChannel}, true},
		{"StaysNegative", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": exp, "stays_30d": -1}), flashsale.User{}, false},
		{"StaysHuge", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": exp, "stays_30d": 1001}), flashsale.User{}, false},
		{"StaysString", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": exp, "stays_30d": "2"}), flashsale.User{}, false},
		{"ChannelLong", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "bob", "exp": exp, "channel": strings.Repeat("c", 65)}), flashsale.User{}, false},
		{"ValidNoTier", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "u-1@x.io:2", "exp": exp}), flashsale.User{ID: "u-1@x.io:2"}, true},
		{"ValidSub64", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": strings.Repeat("a", 64), "exp": exp}), flashsale.User{ID: strings.Repeat("a", 64)}, true},
		{"Expired", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(-time.Second).Unix()}), flashsale.User{}, false},
		{"ExpiresNow", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Unix()}), flashsale.User{}, false},
		{"NoExp", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice"}), flashsale.User{}, false},
		{"ExpString", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": "tomorrow"}), flashsale.User{}, false},
		{"NotYetValid", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "nbf": t0.Add(time.Minute).Unix()}), flashsale.User{}, false},
		{"ExpYear3000", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()}), flashsale.User{}, false},
		{"ExpPastMaxLifetime", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(MaxTokenLifetime + time.Second).Unix()}), flashsale.User{}, false},
		{"ExpAtMaxLifetime", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(MaxTokenLifetime).Unix(), "iat": t0.Unix()}), flashsale.User{ID: "alice"}, true},
		{"IssuedInTheFuture", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iat": t0.Add(time.Hour).Unix()}), flashsale.User{}, false},
		{"IssuedWithinSkew", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iat": t0.Add(30 * time.Second).Unix()}), flashsale.User{ID: "alice"}, true},
		{"IssuedLongAgoLivesLong", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": exp, "iat": t0.Add(-30 * 24 * time.Hour).Unix()}), flashsale.User{}, false},
		{"AlgNone", "Bearer " + noneToken, flashsale.User{}, false},
		{"AlgNoneEmptySig", "Bearer " + rawToken(map[string]any{"alg": "none", "typ": "JWT"}, valid, ""), flashsale.User{}, false},
		{"HS384", "Bearer " + sign(t, jwt.SigningMethodHS384, testSecret, valid), flashsale.User{}, false},
		{"HS512", "Bearer " + sign(t, jwt.SigningMethodHS512, testSecret, valid), flashsale.User{}, false},
		{"RS256Header", "Bearer " + rawToken(map[string]any{"alg": "RS256", "typ": "JWT"}, valid, "sig"), flashsale.User{}, false},
		{"ES256Header", "Bearer " + rawToken(map[string]any{"alg": "ES256", "typ": "JWT"}, valid, "sig"), flashsale.User{}, false},
		{"NoAlg", "Bearer " + rawToken(map[string]any{"typ": "JWT"}, valid, "sig"), flashsale.User{}, false},
		{"WrongSecret", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("another-secret"), valid), flashsale.User{}, false},
		{"TamperedPayload", "Bearer " + tampered, flashsale.User{}, false},
		{"SubEmpty", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "", "exp": exp}), flashsale.User{}, false},
		{"SubMissing", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"exp": exp}), flashsale.User{}, false},
		{"Sub65", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": strings.Repeat("a", 65), "exp": exp}), flashsale.User{}, false},
		{"SubBadChar", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice/../bob", "exp": exp}), flashsale.User{}, false},
		{"SubNumber", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": 42, "exp": exp}), flashsale.User{}, false},
		{"TierNumber", "Bearer " + sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "tier": 3, "exp": exp}), flashsale.User{}, false},
		{"MissingHeader", "-", flashsale.User{}, false},
		{"EmptyHeader", "", flashsale.User{}, false},
		{"BearerNoToken", "Bearer", flashsale.User{}, false},
		{"BearerSpaces", "Bearer    ", flashsale.User{}, false},
		{"BasicScheme", "Basic YWxpY2U6c2VjcmV0", flashsale.User{}, false},
		{"Garbage", "Bearer not.a.jwt", flashsale.User{}, false},
		{"TwoSegments", "Bearer abc.def", flashsale.User{}, false},
		{"AdminTokenOnUserRoute", "Bearer " + testAdmin, flashsale.User{}, false},
		{"TooLong", "Bearer " + strings.Repeat("a", maxTokenLen+1), flashsale.User{}, false},
	}
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 }})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/orders/o1", nil)
			if tt.header != "-" {
				r.Header.Set("Authorization", tt.header)
			}
			// Twice: the second call may be answered from the cache and must agree.
			for range 2 {
				u, err := s.authenticate(r)
				if tt.ok {
					if err != nil {
						t.Fatalf("authenticate: %v", err)
					}
					if u != tt.want {
						t.Fatalf("user = %+v, want %+v", u, tt.want)
					}
					continue
				}
				if got, want := flashsale.ErrorCode(err), flashsale.EUnauthenticated; got != want {
					t.Fatalf("code = %q (user %+v), want %q", got, u, want)
				}
			}
		})
	}
}

// TestAuthenticateHTTP checks the same rejection reaches the client as a
// 401 JSON error through the real handler.
func TestAuthenticateHTTP(t *testing.T) {
	svc := &stubService{}
	s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 }})
	for _, auth := range []string{"", "Bearer", "Bearer x.y.z"} {
		r := httptest.NewRequest("GET", "/api/orders/o1", nil)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		wantError(t, w, http.StatusUnauthorized, flashsale.EUnauthenticated)
		if w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%q: no WWW-Authenticate header", auth)
		}
	}
	if got := svc.calls(); got != 0 {
		t.Fatalf("service called %d times for unauthenticated requests", got)
	}
}

func TestAuthenticateNoSecret(t *testing.T) {
	// With no secret configured, even a token signed with the empty key is refused.
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{Now: func() time.Time { return t0 }})
	tok := sign(t, jwt.SigningMethodHS256, []byte{}, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	if _, err := s.verifyUser(tok); !errors.Is(err, errUnauthenticated) {
		t.Fatalf("err = %v, want unauthenticated", err)
	}
}

// TestAuthenticateCacheExpiry checks a cached token stops working at its exp.
func TestAuthenticateCacheExpiry(t *testing.T) {
	c := &clock{t: t0}
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, Now: c.Now})
	tok := sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Minute).Unix()})
	if _, err := s.verifyUser(tok); err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Second)
	if _, err := s.verifyUser(tok); err != nil {
		t.Fatalf("before exp: %v", err)
	}
	c.Advance(time.Second)
	if _, err := s.verifyUser(tok); !errors.Is(err, errUnauthenticated) {
		t.Fatalf("at exp: err = %v, want unauthenticated", err)
	}
}

func TestUserCacheBounded(t *testing.T) {
	c := newUserCache(4, func() time.Time { return t0 })
	for i := range 10 {
		c.put(strings.Repeat("t", i+1), cachedUser{user: flashsale.User{ID: "u"}}, t0.Add(time.Hour))
	}
	if got := c.m.Len(); got > 4 {
		t.Fatalf("cache holds %d entries, bound is 4", got)
	}
}

// TestUserCacheFor: a token that lives a day is verified again after
// userCacheFor, so a guest gone home leaves the cache (issue 26).
func TestUserCacheFor(t *testing.T) {
	c := &clock{t: t0}
	uc := newUserCache(4, c.Now)
	uc.put("tok", cachedUser{user: flashsale.User{ID: "u"}}, t0.Add(24*time.Hour))
	c.Advance(userCacheFor - time.Second)
	if _, ok := uc.get("tok", 0); !ok {
		t.Fatal("a token cached a moment ago is not found")
	}
	c.Advance(time.Second)
	if _, ok := uc.get("tok", 0); ok {
		t.Fatalf("a token is still cached %v after it was verified, want at most %v", userCacheFor, userCacheFor)
	}
}

func TestRequireAdmin(t *testing.T) {
	userJWT := sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	tests := []struct {
		name   string
		auth   string
		status int
		code   string
	}{
		{"Admin", "Bearer " + testAdmin, http.StatusOK, ""},
		{"UserJWT", "Bearer " + userJWT, http.StatusForbidden, flashsale.EForbidden},
		{"Missing", "", http.StatusUnauthorized, flashsale.EUnauthenticated},
		{"BearerOnly", "Bearer", http.StatusUnauthorized, flashsale.EUnauthenticated},
		{"WrongToken", "Bearer " + testAdmin + "x", http.StatusUnauthorized, flashsale.EUnauthenticated},
		{"Prefix", "Bearer " + testAdmin[:len(testAdmin)-1], http.StatusUnauthorized, flashsale.EUnauthenticated},
		{"Garbage", "Bearer a.b.c", http.StatusUnauthorized, flashsale.EUnauthenticated},
		{"Basic", "Basic " + testAdmin, http.StatusUnauthorized, flashsale.EUnauthenticated},
	}
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 }})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/admin/sales/s1", nil)
			r.Header.Set("Authorization", tt.auth)
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if tt.code == "" {
				if w.Code != tt.status {
					t.Fatalf("status = %d, want %d: %s", w.Code, tt.status, w.Body)
				}
				return
			}
			wantError(t, w, tt.status, tt.code)
		})
	}

	t.Run("NoAdminTokenConfigured", func(t *testing.T) {
		s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret})
		r := httptest.NewRequest("GET", "/api/admin/sales/s1", nil)
		r.Header.Set("Authorization", "Bearer ")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		wantError(t, w, http.StatusUnauthorized, flashsale.EUnauthenticated)
	})
}

func TestDemoLogin(t *testing.T) {
	c := &clock{t: t0}
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, Demo: true, Now: c.Now})
	w := do(t, s, "POST", "/api/demo/login", "", `{"user_id":"guest-1","tier":"silver"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d: %s", w.Code, w.Body)
	}
	var got flashsale.PurchaseToken
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(24 * time.Hour); !got.ExpiresAt.Equal(want) {
		t.Errorf("expires_at = %v, want %v", got.ExpiresAt, want)
	}
	u, err := s.verifyUser(got.Token)
	if err != nil {
		t.Fatalf("the issued token does not verify: %v", err)
	}
	if want := (flashsale.User{ID: "guest-1", Tier: flashsale.TierSilver, Claimed: flashsale.FactTier}); u != want {
		t.Fatalf("user = %+v, want %+v", u, want)
	}

	for _, body := range []string{
		``, `{}`, `{"user_id":""}`, `{"user_id":"a b"}`, `{"user_id":"` + strings.Repeat("x", 65) + `"}`,
		`{"user_id":"bob","tier":"diamond"}`, `{"user_id":"bob","admin":true}`, `{"user_id":1}`,
	} {
		w := do(t, s, "POST", "/api/demo/login", "", body)
		wantError(t, w, http.StatusBadRequest, flashsale.EInvalid)
	}

	// With an issuer and audience required, the demo login's tokens carry
	// them and verify.
	t.Run("IssuerAudience", func(t *testing.T) {
		s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, Demo: true, Now: c.Now, JWTIssuer: "https://login.example", JWTAudience: "flashsale"})
		w := do(t, s, "POST", "/api/demo/login", "", `{"user_id":"guest-1"}`)
		var got flashsale.PurchaseToken
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK {
			t.Fatalf("login: %d %s %v", w.Code, w.Body, err)
		}
		if _, err := s.verifyUser(got.Token); err != nil {
			t.Fatalf("the demo login's token does not verify: %v", err)
		}
	})

	t.Run("NotRegisteredOutsideDemo", func(t *testing.T) {
		s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret})
		w := do(t, s, "POST", "/api/demo/login", "", `{"user_id":"guest-1"}`)
		wantError(t, w, http.StatusNotFound, flashsale.ENotFound)
	})
}

// BenchmarkAuthenticate measures the verified-token cache against a full
// parse and HMAC on every request.
func BenchmarkAuthenticate(b *testing.B) {
	tok := sign(b, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "tier": "gold", "exp": t0.Add(time.Hour).Unix()})
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, Now: func() time.Time { return t0 }})
	b.Run("Cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.verifyUser(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Uncached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c userClaims
			if _, err := s.parser.ParseWithClaims(tok, &c, s.key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CachedParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.verifyUser(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
