package http

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/jwks"
	"github.com/golang-jwt/jwt/v5"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// idp is a fake identity provider: it serves a JWKS that the test edits
// and counts the fetches.
type idp struct {
	mu      sync.Mutex
	keys    map[string]jwk.Key // kid -> public JWK
	fetches atomic.Int64
	*httptest.Server
}

func newIDP(t *testing.T) *idp {
	p := &idp{keys: map[string]jwk.Key{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		set := jwk.NewSet()
		for _, k := range p.keys {
			set.AddKey(k)
		}
		p.mu.Unlock()
		json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(p.Close)
	return p
}

// publish puts pub in the set under kid, with alg when it is not "".
func (p *idp) publish(t *testing.T, kid, alg string, pub crypto.PublicKey) {
	t.Helper()
	k, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	k.Set(jwk.KeyIDKey, kid)
	if alg != "" {
		k.Set(jwk.AlgorithmKey, alg)
	}
	p.mu.Lock()
	p.keys[kid] = k
	p.mu.Unlock()
}

func (p *idp) remove(kid string) { p.mu.Lock(); delete(p.keys, kid); p.mu.Unlock() }

// platformToken signs claims with key under kid ("" for none), valid for
// an hour from t0, from the issuer and for the audience the server wants.
func platformToken(t *testing.T, m jwt.SigningMethod, kid string, key any, mod func(jwt.MapClaims)) string {
	t.Helper()
	c := jwt.MapClaims{"sub": "pat", "exp": t0.Add(time.Hour).Unix(), "iss": "https://idp.example", "aud": "flashsale", "tier": "gold"}
	if mod != nil {
		mod(c)
	}
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlatformJWT: RS256, ES256 and EdDSA tokens of the provider verify
// with its JWKS; the confusion attack, alg none, a key of the wrong type,
// a forged signature, wrong iss or aud and expiry are 401; a new kid is
// accepted after one refresh, a removed one refused after one, and a flood
// of unknown kids costs at most one fetch per 10 s.
func TestPlatformJWT(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	p := newIDP(t)
	p.publish(t, "rsa-1", "RS256", &rsaKey.PublicKey)
	p.publish(t, "ec-1", "", &ecKey.PublicKey) // no alg: the key's type decides
	p.publish(t, "ed-1", "EdDSA", edKey.Public())
	clock := &clock{t: time.Now()}
	keys, err := jwks.New(jwks.Config{URL: p.URL, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, JWKS: keys,
		JWTIssuer: "https://idp.example", JWTAudience: "flashsale", Now: func() time.Time { return t0 }})
	fetches := func() int64 { return p.fetches.Load() }
	if n := fetches(); n != 1 {
		t.Fatalf("%d fetches at start, want 1", n)
	}
	accept := func(t *testing.T, tok string) {
		t.Helper()
		u, err := s.verifyUser(tok)
		if err != nil || u.ID != "pat" || u.Tier != flashsale.TierGold {
			t.Fatalf("verifyUser = %+v, %v; want pat", u, err)
		}
	}
	refuse := func(t *testing.T, tok string) {
		t.Helper()
		if u, err := s.verifyUser(tok); !errors.Is(err, errUnauthenticated) {
			t.Fatalf("verifyUser = %+v, %v; want unauthenticated", u, err)
		}
	}

	rsaTok := platformToken(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, nil)
	t.Run("Accepted", func(t *testing.T) {
		accept(t, rsaTok)
		accept(t, platformToken(t, jwt.SigningMethodES256, "ec-1", ecKey, nil))
		accept(t, platformToken(t, jwt.SigningMethodEdDSA, "ed-1", edKey, nil))
		accept(t, platformToken(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, func(c jwt.MapClaims) { c["aud"] = []string{"other", "flashsale"} }))
		// The shared-secret path must say the same iss and aud (issue 23:
		// it skipped them).
		accept(t, sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "pat", "tier": "gold", "exp": t0.Add(time.Hour).Unix(),
			"iss": "https://idp.example", "aud": "flashsale"}))
		w := do(t, s, "POST", "/api/sales/s1/purchase", "Bearer "+platformToken(t, jwt.SigningMethodES256, "ec-1", ecKey, nil), "{}")
		if w.Code != http.StatusAccepted {
			t.Fatalf("purchase with a platform token: %d %s", w.Code, w.Body)
		}
	})

	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	refused := []struct {
		name string
		tok  string
	}{
		// Algorithm confusion: HS256 "signed" with the public key, in
		// every encoding a verifier might take it as the HMAC secret.
		{"ConfusionPEM", platformToken(t, jwt.SigningMethodHS256, "rsa-1", pubPEM, nil)},
		{"ConfusionDER", platformToken(t, jwt.SigningMethodHS256, "rsa-1", pubDER, nil)},
		{"ConfusionModulus", platformToken(t, jwt.SigningMethodHS256, "rsa-1", rsaKey.N.Bytes(), nil)},
		{"AlgNone", rawToken(map[string]any{"alg": "none", "kid": "rsa-1"}, jwt.MapClaims{"sub": "pat", "exp": t0.Add(time.Hour).Unix()}, "")},
		{"HS512", platformToken(t, jwt.SigningMethodHS512, "", testSecret, nil)},
		{"RS384", platformToken(t, jwt.SigningMethodRS384, "rsa-1", rsaKey, nil)},
		{"RSAKidES256", platformToken(t, jwt.SigningMethodES256, "rsa-1", ecKey, nil)},
		{"ECKidRS256", platformToken(t, jwt.SigningMethodRS256, "ec-1", rsaKey, nil)},
		{"EdKidES256", platformToken(t, jwt.SigningMethodES256, "ed-1", ecKey, nil)},
		{"Forged", platformToken(t, jwt.SigningMethodES256, "ec-1", attacker, nil)},
		{"NoKid", platformToken(t, jwt.SigningMethodRS256, "", rsaKey, nil)},
		{"WrongIssuer", platformToken(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })},
		{"NoIssuer", platformToken(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, func(c jwt.MapClaims) { delete(c, "iss") })},
		{"WrongAudience", platformToken(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, func(c jwt.MapClaims) { c["aud"] = "another-app" })},
		{"NoAudience", platformToken(t, jwt.SigningMethodRS256, "rsa-1", rsaKey, func(c jwt.MapClaims) { delete(c, "aud") })},
		{"Expired", platformToken(t, jwt.SigningMethodEdDSA, "ed-1", edKey, func(c jwt.MapClaims) { c["exp"] = t0.Add(-time.Second).Unix() })},
		{"NoExp", platformToken(t, jwt.SigningMethodEdDSA, "ed-1", edKey, func(c jwt.MapClaims) { delete(c, "exp") })},
		{"HS256NoIssuer", sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "pat", "exp": t0.Add(time.Hour).Unix(), "aud": "flashsale"})},
		{"HS256WrongAudience", sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "pat", "exp": t0.Add(time.Hour).Unix(), "iss": "https://idp.example", "aud": "another-app"})},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			before := fetches()
			refuse(t, tt.tok)
			if n := fetches() - before; n != 0 {
				t.Errorf("%d fetches for a token of a known kid", n)
			}
		})
	}
	t.Run("RefusedOverHTTP", func(t *testing.T) {
		wantError(t, do(t, s, "POST", "/api/sales/s1/purchase", "Bearer "+refused[0].tok, "{}"), http.StatusUnauthorized, flashsale.EUnauthenticated)
	})

	t.Run("Rotation", func(t *testing.T) {
		rsa2, _ := rsa.GenerateKey(rand.Reader, 2048)
		p.publish(t, "rsa-2", "RS256", &rsa2.PublicKey)
		tok2 := platformToken(t, jwt.SigningMethodRS256, "rsa-2", rsa2, nil)
		// Within 10 s of the last fetch, an unknown kid costs nothing.
		before := fetches()
		refuse(t, tok2)
		if n := fetches() - before; n != 0 {
			t.Fatalf("%d fetches within 10 s of the last", n)
		}
		clock.Advance(11 * time.Second)
		accept(t, tok2)
		if n := fetches() - before; n != 1 {
			t.Fatalf("new kid: %d fetches, want 1", n)
		}
		accept(t, rsaTok) // the old key still verifies during the rotation

		// The provider drops rsa-1: a token verified with it before (and
		// cached) is refused once a refresh has seen the removal.
		p.remove("rsa-1")
		clock.Advance(11 * time.Second)
		refuse(t, platformToken(t, jwt.SigningMethodES256, "unknown-kid", attacker, nil)) // the refresh
		refuse(t, rsaTok)
		if n := fetches() - before; n != 2 {
			t.Fatalf("%d fetches, want 2", n)
		}
	})

	t.Run("UnknownKidFlood", func(t *testing.T) {
		flood := func() {
			var wg sync.WaitGroup
			for i := range 500 {
				wg.Go(func() {
					if _, err := s.verifyUser(platformToken(t, jwt.SigningMethodES256, fmt.Sprintf("forged-%d", i), attacker, nil)); err == nil {
						t.Error("a token of an unknown kid verified")
					}
				})
			}
			wg.Wait()
		}
		before := fetches()
		flood()
		if n := fetches() - before; n != 0 {
			t.Fatalf("500 unknown kids within 10 s of a fetch: %d fetches, want 0", n)
		}
		clock.Advance(11 * time.Second)
		flood()
		if n := fetches() - before; n != 1 {
			t.Fatalf("500 unknown kids: %d fetches, want 1", n)
		}
	})
}

// TestPlatformJWTUnavailable: with the provider's keys never fetched, a
// platform token is a 503 to retry (nobody can tell it valid or forged),
// and the shared-secret tokens still verify.
func TestPlatformJWTUnavailable(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	keys, err := jwks.New(jwks.Config{URL: down.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{JWTSecret: testSecret, JWKS: keys, Now: func() time.Time { return t0 }})
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	w := do(t, s, "POST", "/api/sales/s1/purchase", "Bearer "+platformToken(t, jwt.SigningMethodES256, "ec-1", ecKey, nil), "{}")
	wantError(t, w, http.StatusServiceUnavailable, flashsale.EUnavailable)
	if w := do(t, s, "POST", "/api/sales/s1/purchase", "alice", "{}"); w.Code != http.StatusAccepted {
		t.Fatalf("HS256 token with the provider down: %d %s", w.Code, w.Body)
	}
}

func TestJWKSBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "::"} {
		if k, err := jwks.New(jwks.Config{URL: u}); err == nil {
			k.Close()
			t.Errorf("jwks.New(%q) succeeded", u)
		}
	}
}
