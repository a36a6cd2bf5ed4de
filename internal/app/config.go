package app

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/tracing"
)

// Defaults for Config that are the program's own; the others are those of
// the package each setting configures (funnel.ReapIntervalDefault,
// fshttp.RequestTimeoutDefault, redis.TimeoutDefault, redis.PrefixDefault,
// amqp.NameDefault, ...), named by the settings table.
const (
	AddrDefault      = ":8080"
	DataDirDefault   = "./data"
	OrderRateDefault = 0 // orders/s the queue consumer writes; 0 = no cap
	// OutboxRetentionDefault keeps a week of order events: time for a
	// receiver that was down to catch up, and for an operator to look.
	OutboxRetentionDefault = 7 * 24 * time.Hour
	ShutdownDefault        = 10 * time.Second
	// What an open breaker does (FLASHSALE_BREAKER_MODE).
	BreakerReject = "reject"
	BreakerDB     = "db"
	// StartTimeoutDefault bounds start-up: connecting to the database,
	// Redis and RabbitMQ, migrating and loading the current sales. A
	// dependency that accepts connections and never answers makes serve
	// fail with its name instead of hanging.
	StartTimeoutDefault = 20 * time.Second
)

// Config is everything `flashsale serve` can be told: defaults, then
// FLASHSALE_* environment variables, then flags.
type Config struct {
	Addr        string // FLASHSALE_ADDR
	DataDir     string // FLASHSALE_DATA_DIR
	DatabaseURL string // FLASHSALE_DATABASE_URL: sqlite://, mysql://, postgres://
	RedisURL    string // FLASHSALE_REDIS_URL: selects the Redis stock engine
	AMQPURL     string // FLASHSALE_AMQP_URL: selects the RabbitMQ order path
	// RedisPrefix prefixes every Redis key, so deployments can share a
	// Redis. FLASHSALE_REDIS_PREFIX.
	RedisPrefix string
	// QueueName names the RabbitMQ exchange and queues ("<name>.orders"), so
	// deployments can share a broker. FLASHSALE_QUEUE_NAME.
	QueueName  string
	AdminToken string // FLASHSALE_ADMIN_TOKEN: operators' tokens, comma-separated
	// PaymentToken is the payment service's (comma-separated): it alone
	// confirms payments once set. FLASHSALE_PAYMENT_TOKEN.
	PaymentToken string
	// WebhookURL, when set, receives every order event (POST, signed with
	// WebhookSecret). FLASHSALE_WEBHOOK_URL, FLASHSALE_WEBHOOK_SECRET.
	WebhookURL    string
	WebhookSecret string
	// EventsAMQP publishes the order events to the "<queue name>.events"
	// topic exchange in the distributed shape. FLASHSALE_EVENTS_AMQP.
	EventsAMQP bool
	JWTSecret  string // FLASHSALE_JWT_SECRET
	// TokenKeys sign purchase tokens and challenges, "kid:secret,...": the
	// first signs, all verify (a rotation lists the new key first for one
	// token TTL). Default: key "0" with the JWT secret. FLASHSALE_TOKEN_KEYS.
	TokenKeys []funnel.TokenKey
	// OrderRate caps this instance's queue consumer (orders/s) so the
	// database sees a flat line; N instances write at most N × OrderRate.
	// 0 means no cap. FLASHSALE_ORDER_RATE.
	OrderRate float64
	// ReapInterval bounds how late an expired hold is released. FLASHSALE_REAP_INTERVAL.
	ReapInterval time.Duration
	// LatePayments: how long after a sale's last hold can end a late
	// payment may still retake an expired hold; then the instance forgets
	// the sale's stock and records (the database keeps them).
	// FLASHSALE_LATE_PAYMENTS.
	LatePayments time.Duration
	// QueueIdle: a waiting-room guest who has not read their place for
	// longer is skipped at their turn (0: never). FLASHSALE_QUEUE_IDLE.
	QueueIdle time.Duration
	// RequestTimeout is every HTTP request's deadline. FLASHSALE_REQUEST_TIMEOUT.
	RequestTimeout time.Duration
	// RedisTimeout bounds each Redis command. FLASHSALE_REDIS_TIMEOUT.
	RedisTimeout time.Duration
	// StartTimeout bounds start-up. FLASHSALE_START_TIMEOUT.
	StartTimeout time.Duration
	// OutboxRetention is how long order events (once every transport has
	// them) and their delivery attempts are kept; 0 keeps them for ever.
	// FLASHSALE_OUTBOX_RETENTION.
	OutboxRetention time.Duration
	// AuditInterval is how often the scheduled audit checks and repairs
	// every current sale; negative turns it off. FLASHSALE_AUDIT_INTERVAL.
	AuditInterval time.Duration
	// PhantomInterval is how often every live sale's engine figure is
	// compared with the database's (phantom rooms repaired at once).
	PhantomInterval time.Duration
	// AuditGrace is how long a reservation may wait for its order row
	// before the audit calls it stranded and publishes it again; longer
	// than the queue's worst backlog. FLASHSALE_AUDIT_GRACE.
	AuditGrace time.Duration
	// BreakerFailures consecutive unreachable answers from Redis open the
	// circuit breaker in front of it; 0 turns the breaker off.
	// FLASHSALE_BREAKER_FAILURES.
	BreakerFailures int
	// BreakerOpenFor is how long the breaker stays open before it probes.
	// FLASHSALE_BREAKER_OPEN_FOR.
	BreakerOpenFor time.Duration
	// BreakerMode is what an open breaker does: "reject" (503 with
	// Retry-After) or "db" (every instance sells from the database until
	// Redis answers again; MySQL or PostgreSQL, and the same on every
	// instance). FLASHSALE_BREAKER_MODE.
	BreakerMode string
	// DirectLimit bounds this instance's purchases in the database at
	// once in db mode. FLASHSALE_BREAKER_DB_CONCURRENCY.
	DirectLimit int
	// SellLease is how long an instance's report on the sell-mode board
	// stands (db mode): cut off from the database longer than this, it
	// stops selling from Redis too. FLASHSALE_SELL_LEASE.
	SellLease time.Duration
	// MaxInFlight bounds the purchases this instance works on at once, and
	// MaxInFlightPerSale one sale's share; beyond, a purchase is a 503 at
	// once. FLASHSALE_MAX_INFLIGHT, FLASHSALE_MAX_INFLIGHT_PER_SALE.
	MaxInFlight, MaxInFlightPerSale int
	// The rate limits, each "N/s", "N/m" or "N/h" with an optional
	// ",BURST" (default N), or "off". Shared through Redis in the
	// distributed shape. FLASHSALE_LIMIT_PURCHASE_USER,
	// FLASHSALE_LIMIT_PURCHASE_IP, FLASHSALE_LIMIT_PURCHASE_SALE,
	// FLASHSALE_LIMIT_READ_IP.
	Limits    funnel.Limits
	ReadPerIP flashsale.Rate
	// FrameOrigins may frame the sale page and post it a guest's token
	// (web.Config.FrameOrigins). FLASHSALE_FRAME_ORIGINS.
	FrameOrigins []string
	// StreamsPerClient caps the guests' event streams one client address
	// holds on this instance (0: no cap). FLASHSALE_EVENTS_PER_CLIENT.
	StreamsPerClient int
	// JWKSURL, when set, is the platform identity provider's key set:
	// RS256, ES256 and EdDSA user tokens verify with its keys (HS256 ones
	// with JWTSecret, as before). JWTIssuer and JWTAudience, when set, are
	// required of every user token, HS256 included. FLASHSALE_JWKS_URL, FLASHSALE_JWT_ISSUER,
	// FLASHSALE_JWT_AUDIENCE.
	JWKSURL     string
	JWTIssuer   string
	JWTAudience string
	// UserServiceURL, when set, is where eligibility rules get the user
	// facts a token does not carry: GET {url}/users/{id}, cached (see
	// usersvc). UserServiceTimeout bounds each call; UserServiceStale is
	// how long cached facts are served while the service is down.
	// FLASHSALE_USER_SERVICE_URL, FLASHSALE_USER_SERVICE_TIMEOUT,
	// FLASHSALE_USER_SERVICE_STALE.
	UserServiceURL     string
	UserServiceTimeout time.Duration
	UserServiceStale   time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client, comma-separated CIDRs. FLASHSALE_TRUSTED_PROXIES.
	TrustedProxies []netip.Prefix
	LogLevel       slog.Level // FLASHSALE_LOG_LEVEL: debug, info, warn, error
	LogFormat      string     // FLASHSALE_LOG_FORMAT: text or json, one stream either way
	// AccessLogSample is how many requests that went well share one
	// access-log line (http.AccessLog). FLASHSALE_ACCESS_LOG_SAMPLE.
	AccessLogSample int
	Demo            bool // --demo: seed a sample sale and enable POST /api/demo/login
	// DebugAddr is where net/http/pprof listens, never on the public
	// port; empty is off. FLASHSALE_DEBUG_ADDR, --debug-addr.
	DebugAddr string
	// DebugRemote lets DebugAddr be other than a loopback address.
	// FLASHSALE_DEBUG_REMOTE.
	DebugRemote bool
	// MetricsAddr, when set, serves /metrics on a listener of its own
	// instead of the main one. FLASHSALE_METRICS_ADDR, --metrics-addr.
	MetricsAddr string
	// ShutdownDelay is how long a SIGTERM'd instance answers /readyz 503
	// while still serving, before it stops accepting: a load balancer's
	// probe period times its failure threshold. FLASHSALE_SHUTDOWN_DELAY.
	ShutdownDelay time.Duration
	// Tracing is read from the standard OTEL_* variables (no flags): on
	// when OTEL_EXPORTER_OTLP_ENDPOINT is set.
	Tracing tracing.Config
}

// errPrintConfig asks the caller to print c instead of running: the
// command was --print-config.
var errPrintConfig = errors.New("print the configuration")

// ParseConfig reads the defaults, the environment, then the flags of a
// subcommand (fset nil: no flags), from the one table in settings.go.
func ParseConfig(fset *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	var c Config
	printCfg := false
	migrate := fset != nil && fset.Name() == "migrate"
	if err := applySettings(&c, fset, getenv, migrate); err != nil {
		return c, err
	}
	c.Tracing = tracing.FromEnv(getenv)
	if fset != nil {
		if !migrate {
			fset.BoolVar(&printCfg, "print-config", false, "print the effective configuration (secrets masked) and exit")
		}
		if fset.Name() == "serve" || fset.Name() == "migrate" {
			fset.Usage = func() { settingsUsage(fset, migrate) }
		}
		if err := ParseFlags(fset, args); err != nil {
			return c, err
		}
		if fset.NArg() > 0 {
			fmt.Fprintf(fset.Output(), "flashsale %s: unexpected argument %q (settings are flags: flashsale %s --help)\n", fset.Name(), fset.Arg(0), fset.Name())
			return c, ErrUsage
		}
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = SQLiteURL(c.DataDir)
	}
	if printCfg {
		return c, errPrintConfig
	}
	return c, c.Validate()
}

// PurchasePerUserDefault limits one user to 20 purchases a second, 40 at
// once: far above any guest's thumb (a guest retrying a 503 every 50 ms
// stays inside it), far below a script's loop. The per-address limits are
// off by default: behind a load balancer every request has the balancer's
// address until FLASHSALE_TRUSTED_PROXIES says otherwise. The per-sale
// limit depends on the sale.
var PurchasePerUserDefault = flashsale.PerSecond(20, 40)

// Validate checks cross-field rules.
func (c Config) Validate() error {
	db, _ := database(c.DatabaseURL)
	switch {
	case db == "":
		return fmt.Errorf("FLASHSALE_DATABASE_URL must start with sqlite://, mysql:// or postgres://")
	case c.RedisURL != "" && !strings.HasPrefix(c.RedisURL, "redis://") && !strings.HasPrefix(c.RedisURL, "rediss://"):
		return fmt.Errorf("FLASHSALE_REDIS_URL must start with redis:// or rediss:// (TLS)")
	case c.AMQPURL != "" && !strings.HasPrefix(c.AMQPURL, "amqp://") && !strings.HasPrefix(c.AMQPURL, "amqps://"):
		return fmt.Errorf("FLASHSALE_AMQP_URL must start with amqp:// or amqps://")
	case c.OrderRate < 0:
		return fmt.Errorf("FLASHSALE_ORDER_RATE must not be negative")
	case c.MaxInFlight <= 0 || c.MaxInFlightPerSale <= 0 || c.MaxInFlightPerSale > c.MaxInFlight:
		return fmt.Errorf("FLASHSALE_MAX_INFLIGHT and FLASHSALE_MAX_INFLIGHT_PER_SALE must be positive, the second at most the first")
	case c.BreakerFailures < 0 || c.BreakerOpenFor <= 0:
		return fmt.Errorf("FLASHSALE_BREAKER_FAILURES must not be negative and FLASHSALE_BREAKER_OPEN_FOR must be positive")
	case c.BreakerMode != BreakerReject && c.BreakerMode != BreakerDB:
		return fmt.Errorf("FLASHSALE_BREAKER_MODE must be %q or %q", BreakerReject, BreakerDB)
	case c.BreakerMode == BreakerDB && (c.BreakerFailures == 0 || c.AMQPURL == "" || db == dbSQLite):
		return fmt.Errorf("FLASHSALE_BREAKER_MODE=db needs the breaker (FLASHSALE_BREAKER_FAILURES > 0), the queue (FLASHSALE_AMQP_URL) and MySQL or PostgreSQL")
	case c.ShutdownDelay < 0:
		return fmt.Errorf("FLASHSALE_SHUTDOWN_DELAY must not be negative")
	case c.DirectLimit < 1 || c.SellLease < 2*time.Second:
		return fmt.Errorf("FLASHSALE_BREAKER_DB_CONCURRENCY must be positive and FLASHSALE_SELL_LEASE at least 2s")
	case c.JWKSURL != "" && !strings.HasPrefix(c.JWKSURL, "http://") && !strings.HasPrefix(c.JWKSURL, "https://"):
		return fmt.Errorf("FLASHSALE_JWKS_URL must start with http:// or https://")
	case c.UserServiceURL != "" && !strings.HasPrefix(c.UserServiceURL, "http://") && !strings.HasPrefix(c.UserServiceURL, "https://"):
		return fmt.Errorf("FLASHSALE_USER_SERVICE_URL must start with http:// or https://")
	case c.UserServiceTimeout <= 0 || c.UserServiceStale <= 0:
		return fmt.Errorf("FLASHSALE_USER_SERVICE_TIMEOUT and FLASHSALE_USER_SERVICE_STALE must be positive")
	case c.StreamsPerClient < 0:
		return fmt.Errorf("FLASHSALE_EVENTS_PER_CLIENT must be 0 (no cap) or positive")
	case c.LatePayments < 0:
		return fmt.Errorf("FLASHSALE_LATE_PAYMENTS must be 0 (no late payment once the holds are over) or positive")
	case c.QueueIdle < 0:
		return fmt.Errorf("FLASHSALE_QUEUE_IDLE must be 0 (never skip) or positive")
	case c.ReapInterval <= 0:
		return fmt.Errorf("FLASHSALE_REAP_INTERVAL must be positive")
	case c.OutboxRetention < 0:
		return fmt.Errorf("FLASHSALE_OUTBOX_RETENTION must be 0 (keep the events for ever) or positive")
	case c.RequestTimeout <= 0 || c.RedisTimeout <= 0 || c.StartTimeout <= 0 || c.AuditGrace <= 0:
		return fmt.Errorf("FLASHSALE_REQUEST_TIMEOUT, FLASHSALE_REDIS_TIMEOUT, FLASHSALE_START_TIMEOUT and FLASHSALE_AUDIT_GRACE must be positive")
	case c.WebhookURL != "" && !strings.HasPrefix(c.WebhookURL, "http://") && !strings.HasPrefix(c.WebhookURL, "https://"):
		return fmt.Errorf("FLASHSALE_WEBHOOK_URL must start with http:// or https://")
	case c.WebhookURL != "" && len(c.WebhookSecret) < 16:
		return fmt.Errorf("FLASHSALE_WEBHOOK_URL needs FLASHSALE_WEBHOOK_SECRET, at least 16 characters: the receiver checks each event's signature with it")
	case c.AMQPURL != "" && c.RedisURL == "":
		return fmt.Errorf("FLASHSALE_AMQP_URL needs FLASHSALE_REDIS_URL: the queue path relies on the Redis outbox")
	case c.Demo && c.Distributed():
		return fmt.Errorf("FLASHSALE_DEMO is for trying the embedded shape: its POST /api/demo/login hands a token for any user_id, so the distributed shape refuses it")
	}
	if err := c.checkDebugAddr(); err != nil {
		return err
	}
	if c.Demo {
		return nil // demo mode is for one machine; its secrets may be anything
	}
	return c.strongSecrets()
}

// MinSecretLength is the shortest secret serve accepts outside demo mode:
// 128 bits written in hex (openssl rand -hex 16). An HS256 JWT signed with
// a short secret gives it up to an offline brute force in seconds.
const MinSecretLength = 32

// strongSecrets refuses secrets shorter than MinSecretLength and the
// placeholders of the shipped examples (deploy/k8s/secret.example.yaml's
// change-me-...). Generated secrets (an unset admin token or JWT secret)
// are 64 hex digits.
func (c Config) strongSecrets() error {
	type named struct{ env, value string }
	var all []named
	for _, t := range strings.Split(c.AdminToken, ",") {
		all = append(all, named{"FLASHSALE_ADMIN_TOKEN", t})
	}
	for _, t := range strings.Split(c.PaymentToken, ",") {
		all = append(all, named{"FLASHSALE_PAYMENT_TOKEN", t})
	}
	all = append(all, named{"FLASHSALE_JWT_SECRET", c.JWTSecret}, named{"FLASHSALE_WEBHOOK_SECRET", c.WebhookSecret})
	for _, k := range c.TokenKeys {
		all = append(all, named{"FLASHSALE_TOKEN_KEYS (key " + k.ID + ")", string(k.Secret)})
	}
	for _, s := range all {
		v := strings.TrimSpace(s.value)
		switch {
		case v == "":
		case strings.Contains(strings.ToLower(strings.ReplaceAll(v, "-", "")), "changeme"):
			return fmt.Errorf("%s is an example's placeholder (change-me): make one with openssl rand -hex 32", s.env)
		case len(v) < MinSecretLength:
			return fmt.Errorf("%s is %d characters; a secret needs at least %d (128 bits in hex): make one with openssl rand -hex 32", s.env, len(v), MinSecretLength)
		}
	}
	return nil
}

// checkDebugAddr keeps pprof on the machine itself unless
// FLASHSALE_DEBUG_REMOTE says otherwise: profiles show the heap, where
// secrets live, and a CPU profile costs the service while it runs.
func (c Config) checkDebugAddr() error {
	if c.DebugAddr == "" || c.DebugRemote {
		return nil
	}
	host, _, err := net.SplitHostPort(c.DebugAddr)
	if err != nil {
		return fmt.Errorf("FLASHSALE_DEBUG_ADDR must be HOST:PORT, such as 127.0.0.1:6060")
	}
	if ip, err := netip.ParseAddr(host); host == "localhost" || (err == nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("FLASHSALE_DEBUG_ADDR %q is not a loopback address: pprof shows the process's memory; use 127.0.0.1:PORT, or set FLASHSALE_DEBUG_REMOTE=true to serve it beyond this machine", c.DebugAddr)
}

// Distributed reports whether stock lives outside the process.
func (c Config) Distributed() bool { return c.RedisURL != "" }

// LogValue masks secrets so the config can be logged once at start.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.String("debug_addr", c.DebugAddr),
		slog.Bool("debug_remote", c.DebugRemote),
		slog.String("metrics_addr", c.MetricsAddr),
		slog.Duration("shutdown_delay", c.ShutdownDelay),
		slog.String("data_dir", c.DataDir),
		slog.String("database_url", MaskURL(c.DatabaseURL)),
		slog.String("redis_url", MaskURL(c.RedisURL)),
		slog.String("amqp_url", MaskURL(c.AMQPURL)),
		slog.String("redis_prefix", c.RedisPrefix),
		slog.String("queue_name", c.QueueName),
		slog.Group("events", slog.String("webhook_url", MaskURL(c.WebhookURL)), slog.Bool("amqp", c.EventsAMQP),
			slog.Duration("retention", c.OutboxRetention)),
		slog.Float64("order_rate", c.OrderRate),
		slog.Duration("reap_interval", c.ReapInterval),
		slog.Duration("queue_idle", c.QueueIdle),
		slog.Duration("late_payments", c.LatePayments),
		slog.Duration("request_timeout", c.RequestTimeout),
		slog.Duration("redis_timeout", c.RedisTimeout),
		slog.Duration("start_timeout", c.StartTimeout),
		slog.Duration("audit_interval", c.AuditInterval),
		slog.Duration("phantom_interval", c.PhantomInterval),
		slog.Duration("audit_grace", c.AuditGrace),
		slog.Int("breaker_failures", c.BreakerFailures),
		slog.Duration("breaker_open_for", c.BreakerOpenFor),
		slog.String("breaker_mode", c.BreakerMode),
		slog.Int("max_inflight", c.MaxInFlight),
		slog.Int("max_inflight_per_sale", c.MaxInFlightPerSale),
		slog.Group("limits", slog.Any("purchase_user", c.Limits.PerUser), slog.Any("purchase_ip", c.Limits.PerIP),
			slog.Any("purchase_sale", c.Limits.PerSale), slog.Any("read_ip", c.ReadPerIP), slog.Int("events_per_client", c.StreamsPerClient)),
		slog.Any("trusted_proxies", c.TrustedProxies),
		slog.Any("frame_origins", c.FrameOrigins),
		slog.Group("jwks", slog.String("url", MaskURL(c.JWKSURL)), slog.String("issuer", c.JWTIssuer),
			slog.String("audience", c.JWTAudience)),
		slog.Group("user_service", slog.String("url", MaskURL(c.UserServiceURL)),
			slog.Duration("timeout", c.UserServiceTimeout), slog.Duration("stale", c.UserServiceStale)),
		slog.Any("token_keys", tokenKeyIDs(c.TokenKeys)),
		slog.Bool("demo", c.Demo),
		slog.Any("tracing", c.Tracing.LogValue()),
	)
}

// parseOrigins reads a comma-separated list of web origins, each
// scheme://host[:port] with http or https and nothing after: a CSP source
// with a path or a typo would let the wrong pages frame the sale page, or
// none.
func parseOrigins(v string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(v, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Host, "*;' ") {
			return nil, fmt.Errorf("%q is not an origin such as https://www.hotel.example", o)
		}
		out = append(out, u.Scheme+"://"+strings.ToLower(u.Host))
	}
	return out, nil
}

// tokenKeyIDs names the token keys without their secrets.
func tokenKeyIDs(keys []funnel.TokenKey) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

// MaskURL hides a password in a URL, for logs and reports.
func MaskURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			return scheme + "://" + user + ":***" + rest[at:]
		}
	}
	return u
}

// secret returns value if set, else the secret stored in the data dir under
// name, generating and storing (mode 0600) a new one the first time, so a
// restart keeps issued tokens valid. generated reports whether it was made now.
func secret(value, dataDir, name string) (s string, generated bool, err error) {
	if value != "" {
		return value, false, nil
	}
	path := filepath.Join(dataDir, name)
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	buf := make([]byte, 32)
	rand.Read(buf)
	s = hex.EncodeToString(buf)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", false, fmt.Errorf("create data dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("write %s: %w", path, err)
	}
	return s, true, nil
}
