package app

import (
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
)

// strong is a secret serve accepts: 64 hex digits, as openssl rand -hex 32 makes.
const strong = "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592"

func TestParseConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	t.Run("Defaults", func(t *testing.T) {
		c, err := ParseConfig(nil, nil, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.Addr != ":8080" || c.DataDir != "./data" || c.DatabaseURL != "sqlite://data/flashsale.db" ||
			c.ReapInterval != 100*time.Millisecond || c.RedisPrefix != "flashsale:" || c.QueueName != "flashsale" || c.Distributed() {
			t.Fatalf("defaults = %+v", c)
		}
	})
	t.Run("Limits", func(t *testing.T) {
		c, err := ParseConfig(nil, nil, env(nil))
		if err != nil || c.Limits.PerUser != PurchasePerUserDefault || !c.Limits.PerIP.Off() || !c.Limits.PerSale.Off() || !c.ReadPerIP.Off() {
			t.Fatalf("default limits = %+v, read %+v, %v", c.Limits, c.ReadPerIP, err)
		}
		c, err = ParseConfig(nil, nil, env(map[string]string{
			"FLASHSALE_LIMIT_PURCHASE_USER": "off", "FLASHSALE_LIMIT_PURCHASE_IP": "30/s,60",
			"FLASHSALE_LIMIT_PURCHASE_SALE": "120/m", "FLASHSALE_LIMIT_READ_IP": "5/s",
			"FLASHSALE_TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::/32",
		}))
		if err != nil {
			t.Fatal(err)
		}
		want := funnel.Limits{PerIP: flashsale.PerSecond(30, 60), PerSale: flashsale.Rate{N: 120, Per: time.Minute, Burst: 120}}
		if c.Limits != want || c.ReadPerIP != flashsale.PerSecond(5, 5) || len(c.TrustedProxies) != 2 {
			t.Fatalf("limits = %+v, read %+v, proxies %v", c.Limits, c.ReadPerIP, c.TrustedProxies)
		}
		// Written back as configured, for the start-up log.
		if got := []string{c.Limits.PerUser.String(), c.Limits.PerIP.String(), c.Limits.PerSale.String()}; got[0] != "off" || got[1] != "30/s,60" || got[2] != "120/m,120" {
			t.Fatalf("limits written as %v", got)
		}
	})
	t.Run("EnvThenFlags", func(t *testing.T) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		c, err := ParseConfig(fs, []string{"--addr", ":9000", "--events-amqp=false"}, env(map[string]string{
			"FLASHSALE_ADDR": ":7000", "FLASHSALE_DATA_DIR": "/tmp/x", "FLASHSALE_ORDER_RATE": "250",
			"FLASHSALE_REDIS_URL": "redis://r:6379", "FLASHSALE_AMQP_URL": "amqp://u:p@q:5672/",
			"FLASHSALE_DATABASE_URL": "postgres://u:secret@db/fs", "FLASHSALE_LOG_LEVEL": "debug",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Addr != ":9000" || c.EventsAMQP || c.DataDir != "/tmp/x" || c.OrderRate != 250 || !c.Distributed() {
			t.Fatalf("config = %+v", c)
		}
		if got := MaskURL(c.DatabaseURL); got != "postgres://u:***@db/fs" {
			t.Fatalf("masked = %s", got)
		}
	})
	for name, kv := range map[string]map[string]string{
		"BadDatabase":       {"FLASHSALE_DATABASE_URL": "oracle://x"},
		"BadRedis":          {"FLASHSALE_REDIS_URL": "http://x"},
		"AMQPWithoutRedis":  {"FLASHSALE_AMQP_URL": "amqp://x"},
		"BadRate":           {"FLASHSALE_ORDER_RATE": "fast"},
		"NegativeRate":      {"FLASHSALE_ORDER_RATE": "-1"},
		"BadInterval":       {"FLASHSALE_REAP_INTERVAL": "soon"},
		"ZeroInterval":      {"FLASHSALE_REAP_INTERVAL": "0s"},
		"NegativeRetention": {"FLASHSALE_OUTBOX_RETENTION": "-1h"},
		"BadLevel":          {"FLASHSALE_LOG_LEVEL": "loud"},
		"LimitNoUnit":       {"FLASHSALE_LIMIT_PURCHASE_USER": "20"},
		"LimitBadUnit":      {"FLASHSALE_LIMIT_PURCHASE_USER": "20/d"},
		"LimitZero":         {"FLASHSALE_LIMIT_PURCHASE_IP": "0/s"},
		"LimitBadBurst":     {"FLASHSALE_LIMIT_PURCHASE_SALE": "20/s,x"},
		"LimitZeroBurst":    {"FLASHSALE_LIMIT_READ_IP": "20/s,0"},
		"BadProxy":          {"FLASHSALE_TRUSTED_PROXIES": "10.0.0.1"},
		"InFlightOverAll":   {"FLASHSALE_MAX_INFLIGHT": "10", "FLASHSALE_MAX_INFLIGHT_PER_SALE": "20"},
		// Issue 23, item 5: config that refuses mistakes.
		"DemoDistributed":  {"FLASHSALE_DEMO": "true", "FLASHSALE_REDIS_URL": "redis://r:6379"},
		"ShortAdminToken":  {"FLASHSALE_ADMIN_TOKEN": "x"},
		"ShortJWTSecret":   {"FLASHSALE_JWT_SECRET": "a"},
		"ShortSecondToken": {"FLASHSALE_ADMIN_TOKEN": strong + "," + "short-one"},
		"ShortPayment":     {"FLASHSALE_PAYMENT_TOKEN": "pay"},
		"ShortTokenKey":    {"FLASHSALE_TOKEN_KEYS": "k1:sixteen-chars-ok"},
		"ShortWebhook":     {"FLASHSALE_WEBHOOK_URL": "http://h/", "FLASHSALE_WEBHOOK_SECRET": "sixteen-chars-ok"},
		"Placeholder":      {"FLASHSALE_JWT_SECRET": "change-me-jwt-secret-0123456789abcdef"},
		"DebugAllAddrs":    {"FLASHSALE_DEBUG_ADDR": ":6060"},
		"DebugPublicIP":    {"FLASHSALE_DEBUG_ADDR": "10.1.2.3:6060"},
		"DebugNoPort":      {"FLASHSALE_DEBUG_ADDR": "127.0.0.1"},
		"BothFileAndValue": {"FLASHSALE_JWT_SECRET": strong, "FLASHSALE_JWT_SECRET_FILE": "/etc/hostname"},
		"MissingFile":      {"FLASHSALE_ADMIN_TOKEN_FILE": "/nonexistent/admin_token"},
		"OriginPath":       {"FLASHSALE_FRAME_ORIGINS": "https://www.hotel.example/sales"},
		"OriginScheme":     {"FLASHSALE_FRAME_ORIGINS": "javascript://x"},
		"OriginWildcard":   {"FLASHSALE_FRAME_ORIGINS": "https://*.hotel.example"},
		"OriginNoScheme":   {"FLASHSALE_FRAME_ORIGINS": "www.hotel.example"},
		"OriginInjection":  {"FLASHSALE_FRAME_ORIGINS": "https://a.example; script-src *"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseConfig(nil, nil, env(kv)); err == nil {
				t.Fatalf("%v accepted", kv)
			}
		})
	}
}

// TestConfigAccepts: what the refusals above must not catch.
func TestConfigAccepts(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for name, kv := range map[string]map[string]string{
		"DemoShortSecrets": {"FLASHSALE_DEMO": "true", "FLASHSALE_ADMIN_TOKEN": "x", "FLASHSALE_JWT_SECRET": "a"},
		"StrongSecrets": {"FLASHSALE_ADMIN_TOKEN": strong + "," + strong[1:] + "0", "FLASHSALE_JWT_SECRET": strong,
			"FLASHSALE_PAYMENT_TOKEN": strong, "FLASHSALE_TOKEN_KEYS": "k1:" + strong,
			"FLASHSALE_WEBHOOK_URL": "http://h/", "FLASHSALE_WEBHOOK_SECRET": strong},
		"RedisTLS":           {"FLASHSALE_REDIS_URL": "rediss://user:pass@redis.example:6380/0"},
		"RedisClusterTLS":    {"FLASHSALE_REDIS_URL": "rediss://r1:6380,r2:6380,r3:6380"},
		"FrameOrigins":       {"FLASHSALE_FRAME_ORIGINS": "https://www.hotel.example, http://localhost:3000/"},
		"DebugLoopback4":     {"FLASHSALE_DEBUG_ADDR": "127.0.0.1:6060"},
		"DebugLoopback6":     {"FLASHSALE_DEBUG_ADDR": "[::1]:6060"},
		"DebugLocalhost":     {"FLASHSALE_DEBUG_ADDR": "localhost:0"},
		"DebugRemoteAllowed": {"FLASHSALE_DEBUG_ADDR": ":6060", "FLASHSALE_DEBUG_REMOTE": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseConfig(nil, nil, env(kv)); err != nil {
				t.Fatalf("%v refused: %v", kv, err)
			}
		})
	}
}

// TestSecretFiles: every secret setting has a _FILE twin that reads the
// value from a file (a trailing newline dropped), as flag and variable, so
// a secret need not be on a command line, which ps shows.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	getenv := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := ParseConfig(nil, nil, getenv(map[string]string{
		"FLASHSALE_ADMIN_TOKEN_FILE":  write("admin", strong+"\n"),
		"FLASHSALE_JWT_SECRET_FILE":   write("jwt", strong+"\r\n"),
		"FLASHSALE_TOKEN_KEYS_FILE":   write("keys", "k1:"+strong),
		"FLASHSALE_DATABASE_URL_FILE": write("db", "mysql://u:p@db:3306/fs\n"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != strong || c.JWTSecret != strong || len(c.TokenKeys) != 1 || string(c.TokenKeys[0].Secret) != strong || c.DatabaseURL != "mysql://u:p@db:3306/fs" {
		t.Fatalf("config from files = %+v", c)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	c, err = ParseConfig(fs, []string{"--payment-token-file", write("pay", strong)}, getenv(nil))
	if err != nil || c.PaymentToken != strong {
		t.Fatalf("--payment-token-file: %q, %v", c.PaymentToken, err)
	}
	// Every secret setting has one, and nothing else does.
	twins := map[string]bool{}
	for _, s := range settings {
		if s.fileOf != "" {
			twins[s.fileOf] = true
		}
	}
	for _, s := range settings {
		if s.secret != twins[s.env] {
			t.Errorf("%s: secret %v, has a _FILE twin %v", s.env, s.secret, twins[s.env])
		}
	}
	if len(twins) != 8 {
		t.Errorf("%d secret settings, want 8 (the tokens, keys and URLs with passwords)", len(twins))
	}
	if _, err := ParseConfig(nil, nil, getenv(map[string]string{"FLASHSALE_ADMIN_TOKEN_FILE": write("empty", "\n")})); err == nil {
		t.Error("an empty secret file accepted")
	}
}

// TestShippedExamplesRefused: serve refuses the placeholder secrets of
// deploy/k8s/secret.example.yaml as they are, so an example applied
// unchanged cannot reach production.
func TestShippedExamplesRefused(t *testing.T) {
	b, err := os.ReadFile("../../deploy/k8s/secret.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		StringData map[string]string `yaml:"stringData"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range doc.StringData {
		if !strings.Contains(k, "TOKEN") && !strings.Contains(k, "SECRET") && !strings.Contains(k, "KEYS") {
			continue
		}
		t.Run(k, func(t *testing.T) {
			_, err := ParseConfig(nil, nil, func(name string) string {
				if name == k {
					return v
				}
				return ""
			})
			if err == nil || !strings.Contains(err.Error(), "placeholder") {
				t.Fatalf("%s=%s: %v, want it refused as a placeholder", k, v, err)
			}
		})
	}
}

// TestConfigMessages: a bad value is explained in the product's words,
// never with a Go function's (strconv.ParseBool: parsing "yes": invalid syntax).
func TestConfigMessages(t *testing.T) {
	for env, v := range map[string]string{
		"FLASHSALE_EVENTS_AMQP": "yes", "FLASHSALE_DEMO": "yes", "FLASHSALE_ORDER_RATE": "fast",
		"FLASHSALE_REAP_INTERVAL": "soon", "FLASHSALE_MAX_INFLIGHT": "many",
	} {
		_, err := ParseConfig(nil, nil, func(name string) string {
			if name == env {
				return v
			}
			return ""
		})
		if err == nil || strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "time:") || !strings.Contains(err.Error(), "want ") {
			t.Errorf("%s=%s: %v", env, v, err)
		}
	}
}

// TestSecret: a generated secret is kept with mode 0600 and reused after a
// restart; a configured one wins and is not written.
func TestSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s1, gen, err := secret("", dir, "admin_token")
	if err != nil || !gen || len(s1) != 64 {
		t.Fatalf("first: %q %v %v", s1, gen, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "admin_token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stat: %v %v", fi.Mode(), err)
	}
	s2, gen, err := secret("", dir, "admin_token")
	if err != nil || gen || s2 != s1 {
		t.Fatalf("restart: %q %v %v, want %q reused", s2, gen, err, s1)
	}
	s3, gen, err := secret("given", dir, "jwt_secret")
	if err != nil || gen || s3 != "given" {
		t.Fatalf("configured: %q %v %v", s3, gen, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jwt_secret")); !os.IsNotExist(err) {
		t.Fatalf("a configured secret was written: %v", err)
	}
}

// TestFirstStartBanner (issue 23, item 5): the first start generates the
// admin token into the data dir and prints where, never the token itself
// (stdout goes to journald and container logs).
func TestFirstStartBanner(t *testing.T) {
	cfg, err := ParseConfig(nil, nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	cfg.DatabaseURL = "sqlite://" + filepath.Join(cfg.DataDir, "flashsale.db")
	var out strings.Builder
	m := NewMain(cfg, slog.New(slog.DiscardHandler), &out)
	if err := m.Open(t.Context()); err != nil {
		m.Close()
		t.Fatal(err)
	}
	defer m.Close()
	path := filepath.Join(cfg.DataDir, "admin_token")
	tok, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(tok))) != 64 {
		t.Fatalf("generated token: %q %v", tok, err)
	}
	if s := out.String(); strings.Contains(s, strings.TrimSpace(string(tok))) || !strings.Contains(s, "$(cat "+path+")") {
		t.Fatalf("first start printed:\n%s\nwant the token's path, never the token", s)
	}
}

// TestTracingSettings: the standard variables turn tracing on, the
// standard off switches win, and the start-up line names the endpoint.
func TestTracingSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // the endpoint; "" is off
	}{
		{map[string]string{}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318/"}, "https://collector:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, "http://c:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
		{map[string]string{"OTEL_SERVICE_NAME": "fs-eu"}, ""},
	} {
		cfg, err := ParseConfig(nil, nil, func(k string) string { return tc.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Tracing.Endpoint != tc.want || cfg.Tracing.Enabled() != (tc.want != "") {
			t.Errorf("%v: endpoint %q enabled %v, want %q", tc.env, cfg.Tracing.Endpoint, cfg.Tracing.Enabled(), tc.want)
		}
	}
	cfg, _ := ParseConfig(nil, nil, func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3cret"}[k]
	})
	var out strings.Builder
	printConfig(&out, cfg)
	if !strings.Contains(out.String(), "tracing.endpoint=http://collector:4318/v1/traces") || strings.Contains(out.String(), "s3cret") {
		t.Errorf("--print-config shows:\n%s\nwant tracing.endpoint and no header value", out.String())
	}
}
