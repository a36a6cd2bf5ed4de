package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
)

func TestParseConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	t.Run("Defaults", func(t *testing.T) {
		c, err := parseConfig(nil, nil, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.Addr != ":8080" || c.DataDir != "./data" || c.DatabaseURL != "sqlite://data/flashsale.db" ||
			c.ReapInterval != 100*time.Millisecond || c.RedisPrefix != "flashsale:" || c.QueueName != "flashsale" || c.Distributed() {
			t.Fatalf("defaults = %+v", c)
		}
	})
	t.Run("Limits", func(t *testing.T) {
		c, err := parseConfig(nil, nil, env(nil))
		if err != nil || c.Limits.PerUser != PurchasePerUserDefault || !c.Limits.PerIP.Off() || !c.Limits.PerSale.Off() || !c.ReadPerIP.Off() {
			t.Fatalf("default limits = %+v, read %+v, %v", c.Limits, c.ReadPerIP, err)
		}
		c, err = parseConfig(nil, nil, env(map[string]string{
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
		c, err := parseConfig(fs, []string{"--addr", ":9000", "--demo"}, env(map[string]string{
			"FLASHSALE_ADDR": ":7000", "FLASHSALE_DATA_DIR": "/tmp/x", "FLASHSALE_ORDER_RATE": "250",
			"FLASHSALE_REDIS_URL": "redis://r:6379", "FLASHSALE_AMQP_URL": "amqp://u:p@q:5672/",
			"FLASHSALE_DATABASE_URL": "postgres://u:secret@db/fs", "FLASHSALE_LOG_LEVEL": "debug",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if c.Addr != ":9000" || !c.Demo || c.DataDir != "/tmp/x" || c.OrderRate != 250 || !c.Distributed() {
			t.Fatalf("config = %+v", c)
		}
		if got := maskURL(c.DatabaseURL); got != "postgres://u:***@db/fs" {
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
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseConfig(nil, nil, env(kv)); err == nil {
				t.Fatalf("%v accepted", kv)
			}
		})
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

func TestRunCommands(t *testing.T) {
	if err := run(t.Context(), []string{"version"}, func(string) string { return "" }, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"nope"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown command accepted")
	}
	dir := t.TempDir()
	getenv := func(k string) string {
		if k == "FLASHSALE_DATA_DIR" {
			return dir
		}
		return ""
	}
	if err := run(t.Context(), []string{"migrate"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "flashsale.db"))
	if err != nil {
		t.Fatalf("migrate made no database: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("database mode %v, want 0600: it holds every guest's orders", fi.Mode().Perm())
	}
}
