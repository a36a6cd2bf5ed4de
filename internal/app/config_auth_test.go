package app

import (
	"testing"
	"time"
)

// TestConfigIdentity: the JWKS and user-service settings, their defaults
// and the combinations refused at start.
func TestConfigIdentity(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := ParseConfig(nil, nil, env(map[string]string{
		"FLASHSALE_JWKS_URL": "https://idp.example/.well-known/jwks.json", "FLASHSALE_JWT_ISSUER": "https://idp.example",
		"FLASHSALE_JWT_AUDIENCE": "flashsale", "FLASHSALE_USER_SERVICE_URL": "http://users:8080",
		"FLASHSALE_USER_SERVICE_TIMEOUT": "200ms",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.JWKSURL == "" || c.JWTIssuer != "https://idp.example" || c.JWTAudience != "flashsale" ||
		c.UserServiceURL != "http://users:8080" || c.UserServiceTimeout != 200*time.Millisecond || c.UserServiceStale != time.Hour {
		t.Fatalf("config = %+v", c)
	}
	// An issuer and audience apply to HS256 tokens too, so they need no JWKS.
	if _, err := ParseConfig(nil, nil, env(map[string]string{"FLASHSALE_JWT_ISSUER": "https://idp.example", "FLASHSALE_JWT_AUDIENCE": "flashsale"})); err != nil {
		t.Errorf("issuer and audience without JWKS: %v", err)
	}
	for _, bad := range []map[string]string{
		{"FLASHSALE_JWKS_URL": "idp.example/jwks"},
		{"FLASHSALE_USER_SERVICE_URL": "users:8080"},
		{"FLASHSALE_USER_SERVICE_TIMEOUT": "0s"},
		{"FLASHSALE_USER_SERVICE_STALE": "soon"},
	} {
		if _, err := ParseConfig(nil, nil, env(bad)); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
