package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/golang-jwt/jwt/v5"
)

// TestTokenCommand: flashsale token signs a user JWT the server accepts,
// with the secret from the environment or the one serve generated, and
// refuses bad flags (changing nothing, printing no token).
func TestTokenCommand(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"token", "--user", "alice", "--tier", "gold", "--stays-30d", "2", "--channel", "ota-x"},
		env("FLASHSALE_JWT_SECRET", testJWTSecret), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(strings.TrimSpace(out.String()), claims, func(*jwt.Token) (any, error) { return []byte(testJWTSecret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()); err != nil {
		t.Fatalf("the token does not verify: %v", err)
	}
	if claims["sub"] != "alice" || claims["tier"] != "gold" || claims["stays_30d"] != float64(2) || claims["channel"] != "ota-x" {
		t.Fatalf("claims = %v", claims)
	}

	// The server accepts it: a running instance reads its own orders with it.
	_, cl := MustRunMain(t, nil)
	out.Reset()
	if err := run(t.Context(), []string{"token", "--user", "bob"}, env("FLASHSALE_JWT_SECRET", testJWTSecret), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if status, _ := cl.do(t.Context(), "GET", "/api/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV", strings.TrimSpace(out.String()), nil, nil, nil); status != 404 {
		t.Fatalf("the server answered the printed token %d, want 404 (authenticated, no such order)", status)
	}

	// A server that requires iss and aud (issue 23: HS256 tokens skipped
	// them) refuses the plain token, and takes one that token made with
	// FLASHSALE_JWT_ISSUER and FLASHSALE_JWT_AUDIENCE, the settings serve reads.
	_, strict := MustRunMain(t, func(c *app.Config) { c.JWTIssuer, c.JWTAudience = "https://login.example", "flashsale" })
	plain := strings.TrimSpace(out.String())
	if status, _ := strict.do(t.Context(), "GET", "/api/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV", plain, nil, nil, nil); status != 401 {
		t.Fatalf("a token without iss and aud: %d, want 401", status)
	}
	out.Reset()
	if err := run(t.Context(), []string{"token", "--user", "bob"}, env("FLASHSALE_JWT_SECRET", testJWTSecret,
		"FLASHSALE_JWT_ISSUER", "https://login.example", "FLASHSALE_JWT_AUDIENCE", "flashsale"), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if status, _ := strict.do(t.Context(), "GET", "/api/orders/01ARZ3NDEKTSV4RRFFQ69G5FAV", strings.TrimSpace(out.String()), nil, nil, nil); status != 404 {
		t.Fatalf("a token with the required iss and aud: %d, want 404 (authenticated, no such order)", status)
	}

	// The secret serve generated in the data dir.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jwt_secret"), []byte("from-disk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"token", "--user", "carol", "--data-dir", dir}, env(), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := jwt.Parse(strings.TrimSpace(out.String()), func(*jwt.Token) (any, error) { return []byte("from-disk"), nil }); err != nil {
		t.Fatalf("signed with the data dir's secret: %v", err)
	}

	for _, bad := range [][]string{
		{"token"},
		{"token", "--user", ""},
		{"token", "--user", "a b"},
		{"token", "--user", strings.Repeat("a", 65)},
		{"token", "--user", "alice", "--tier", "diamond"},
		{"token", "--user", "alice", "--ttl", "-1h"},
		{"token", "--user", "alice", "--data-dir", t.TempDir()}, // no secret anywhere
		{"token", "--user", "alice", "--nope"},
	} {
		out.Reset()
		if err := run(t.Context(), bad, env(), &out, io.Discard); err == nil || out.Len() > 0 {
			t.Errorf("%v: err %v, printed %q; want an error and no token", bad, err, out.String())
		}
	}
}
