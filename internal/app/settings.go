package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agnivade/levenshtein"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/breaker"
	"github.com/flashsale/flashsale/funnel"
	fshttp "github.com/flashsale/flashsale/http"
	"github.com/flashsale/flashsale/redis"
	"github.com/flashsale/flashsale/usersvc"
)

// setting is one thing serve can be told: its variable, its flag (the
// variable's name without FLASHSALE_, lower case, dashes), its default as
// a value of the variable would write it, and what it means. The table
// below is the one list: defaults, the environment, the flags and
// serve --help all come from it, so none can forget one.
type setting struct {
	env  string
	def  string
	help string
	set  func(c *Config, v string) error
	// migrate marks the settings migrate reads too (the database's).
	migrate bool
	// boolean settings are flags without a value (--demo).
	boolean bool
	// secret settings (tokens, keys, URLs with passwords) can be read from
	// a file instead: each has a _FILE twin (withFiles).
	secret bool
	// fileOf is the setting a _FILE twin reads a file for.
	fileOf string
}

// testPrefix names the test suite's own variables (FLASHSALE_TEST_*),
// which a binary a test starts inherits: no setting starts with it.
const testPrefix = "FLASHSALE_TEST_"

// UnknownSettings refuses FLASHSALE_* variables that are no setting,
// naming the nearest setting of each: a misspelled one
// (FLASHSALE_REDISURL) used to be ignored, and serve started the embedded
// shape on one node where the distributed one was meant.
func UnknownSettings(environ []string) error {
	known := make(map[string]bool, len(settings))
	for _, s := range settings {
		known[s.env] = true
	}
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "FLASHSALE_") || strings.HasPrefix(name, testPrefix) || known[name] {
			continue
		}
		msg := "unknown setting " + name
		if near := nearestSetting(name); near != "" {
			msg += "; did you mean " + near + "?"
		}
		errs = append(errs, errors.New(msg))
	}
	if len(errs) > 0 {
		errs = append(errs, errors.New("every setting is listed by flashsale serve --help"))
	}
	return errors.Join(errs...)
}

// nearestSetting is the setting whose variable is closest to name, if a
// few edits away (a third of its length at most), or "".
func nearestSetting(name string) string {
	best, bestD := "", len(name)/3+1
	for _, s := range settings {
		if d := levenshtein.ComputeDistance(name, s.env); d < bestD {
			best, bestD = s.env, d
		}
	}
	return best
}

// flagName is the setting's flag: FLASHSALE_REDIS_URL is --redis-url.
func (s setting) flagName() string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.env, "FLASHSALE_")), "_", "-")
}

func str(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

// The parsers' own errors (strconv.ParseBool: parsing "yes": invalid
// syntax) name Go functions; these say what the setting wants.
var (
	errDuration = errors.New("want a duration such as 500ms, 5s, 2m or 1h")
	errInteger  = errors.New("want a whole number")
	errNumber   = errors.New("want a number")
	errBoolean  = errors.New("want true or false")
)

func dur(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errDuration
		}
		*field(c) = d
		return nil
	}
}

func integer(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		i, err := strconv.Atoi(v)
		if err != nil {
			return errInteger
		}
		*field(c) = i
		return nil
	}
}

func boolean(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errBoolean
		}
		*field(c) = b
		return nil
	}
}

func rate(field func(*Config) *flashsale.Rate) func(*Config, string) error {
	return func(c *Config, v string) error {
		r, err := flashsale.ParseRate(v)
		*field(c) = r
		return err
	}
}

// withFiles gives every secret setting a twin right after it,
// FLASHSALE_JWT_SECRET_FILE (--jwt-secret-file) for FLASHSALE_JWT_SECRET,
// naming a file that holds the value: a mounted Kubernetes or Docker
// secret, so the secret is never on a command line (which ps and
// /proc/PID/cmdline show) nor in the environment.
func withFiles(table []setting) []setting {
	var out []setting
	for _, s := range table {
		out = append(out, s)
		if !s.secret {
			continue
		}
		set := s.set
		out = append(out, setting{
			env: s.env + "_FILE", migrate: s.migrate, fileOf: s.env,
			help: "a file holding " + s.env + "'s value (trailing newline ignored), to keep it off the command line",
			set: func(c *Config, path string) error {
				b, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("read the file: %w", err)
				}
				v := strings.TrimRight(string(b), "\r\n")
				if v == "" {
					return fmt.Errorf("%s is empty", path)
				}
				return set(c, v)
			},
		})
	}
	return out
}

// settings is every setting, in the order serve --help lists them.
var settings = withFiles([]setting{
	{env: "FLASHSALE_ADDR", def: AddrDefault, help: "HTTP listen address", set: str(func(c *Config) *string { return &c.Addr })},
	{env: "FLASHSALE_DATA_DIR", def: DataDirDefault, migrate: true, help: "data directory: the SQLite database and the generated secrets", set: str(func(c *Config) *string { return &c.DataDir })},
	{env: "FLASHSALE_DATABASE_URL", secret: true, migrate: true, help: "sqlite://PATH, mysql://USER@HOST:PORT/DB or postgres://USER@HOST:PORT/DB (default: SQLite in the data dir)", set: str(func(c *Config) *string { return &c.DatabaseURL })},
	{env: "FLASHSALE_REDIS_URL", secret: true, help: "redis://HOST:PORT (rediss:// for TLS), or a Cluster's seed list redis://HOST:PORT,HOST:PORT,...: selects the Redis stock engine (distributed shape)", set: str(func(c *Config) *string { return &c.RedisURL })},
	{env: "FLASHSALE_AMQP_URL", secret: true, help: "amqp://USER:PASS@HOST:PORT/VHOST: selects the RabbitMQ order path (needs Redis)", set: str(func(c *Config) *string { return &c.AMQPURL })},
	{env: "FLASHSALE_REDIS_PREFIX", def: redis.PrefixDefault, help: "prefix of every Redis key, so deployments can share a Redis", set: str(func(c *Config) *string { return &c.RedisPrefix })},
	{env: "FLASHSALE_QUEUE_NAME", def: amqp.NameDefault, help: "names the exchange and the queues (<name>.orders), so deployments can share a broker", set: str(func(c *Config) *string { return &c.QueueName })},
	{env: "FLASHSALE_ADMIN_TOKEN", secret: true, help: "the operators' bearer token(s), comma-separated (default: generated into the data dir)", set: str(func(c *Config) *string { return &c.AdminToken })},
	{env: "FLASHSALE_PAYMENT_TOKEN", secret: true, help: "the payment service's bearer token(s), comma-separated: only confirms payments and reads orders", set: str(func(c *Config) *string { return &c.PaymentToken })},
	{env: "FLASHSALE_WEBHOOK_URL", help: "receives every order event (order.held, order.paid, ..., sale.sold_out) as a signed POST, at least once, in order", set: str(func(c *Config) *string { return &c.WebhookURL })},
	{env: "FLASHSALE_WEBHOOK_SECRET", secret: true, help: "HMAC-SHA256 key of the webhook's Flashsale-Signature header (at least 32 characters)", set: str(func(c *Config) *string { return &c.WebhookSecret })},
	{env: "FLASHSALE_EVENTS_AMQP", def: "true", help: "distributed shape: publish the order events to the <queue name>.events topic exchange, routing key = type", set: boolean(func(c *Config) *bool { return &c.EventsAMQP })},
	{env: "FLASHSALE_OUTBOX_RETENTION", def: OutboxRetentionDefault.String(), help: "how long order events (once every transport has them) and their delivery attempts are kept; 0: for ever", set: dur(func(c *Config) *time.Duration { return &c.OutboxRetention })},
	{env: "FLASHSALE_JWT_SECRET", secret: true, help: "HS256 secret of user JWTs, shared by every instance (default: generated into the data dir)", set: str(func(c *Config) *string { return &c.JWTSecret })},
	{env: "FLASHSALE_TOKEN_KEYS", secret: true, help: "purchase-token keys kid:secret,...: the first signs, all verify (default: the JWT secret as key 0)", set: func(c *Config, v string) error {
		keys, err := funnel.ParseTokenKeys(v)
		c.TokenKeys = keys
		return err
	}},
	{env: "FLASHSALE_JWKS_URL", help: "the identity provider's JWKS: RS256, ES256 and EdDSA user tokens verify with its keys", set: str(func(c *Config) *string { return &c.JWKSURL })},
	{env: "FLASHSALE_JWT_ISSUER", help: "iss required of every user token (HS256 and the provider's)", set: str(func(c *Config) *string { return &c.JWTIssuer })},
	{env: "FLASHSALE_JWT_AUDIENCE", help: "aud required of every user token (HS256 and the provider's)", set: str(func(c *Config) *string { return &c.JWTAudience })},
	{env: "FLASHSALE_USER_SERVICE_URL", help: "where eligibility rules get the user facts a token does not carry: GET {url}/users/{id}", set: str(func(c *Config) *string { return &c.UserServiceURL })},
	{env: "FLASHSALE_USER_SERVICE_TIMEOUT", def: usersvc.TimeoutDefault.String(), help: "deadline of each user-service call", set: dur(func(c *Config) *time.Duration { return &c.UserServiceTimeout })},
	{env: "FLASHSALE_USER_SERVICE_STALE", def: usersvc.StaleForDefault.String(), help: "how long cached user facts are served while the user service is down", set: dur(func(c *Config) *time.Duration { return &c.UserServiceStale })},
	{env: "FLASHSALE_ORDER_RATE", def: strconv.Itoa(OrderRateDefault), help: "orders/s this instance's queue consumer writes, so the database sees a flat line; 0: no cap", set: func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return errNumber
		}
		c.OrderRate = f
		return nil
	}},
	{env: "FLASHSALE_LATE_PAYMENTS", def: funnel.LatePaymentsDefault.String(), help: "how long after a sale's last hold can end a late payment may still take an expired hold's room back; then the instance forgets the sale's stock and order records, so its memory follows the live sales (the database keeps every order); 0: no late payment once the holds are over", set: dur(func(c *Config) *time.Duration { return &c.LatePayments })},
	{env: "FLASHSALE_QUEUE_IDLE", def: funnel.QueueIdleDefault.String(), help: "a waiting-room guest who has not read their place (stream or poll) for longer is skipped at their turn and may join again at the back; 0: never skip", set: dur(func(c *Config) *time.Duration { return &c.QueueIdle })},
	{env: "FLASHSALE_REAP_INTERVAL", def: funnel.ReapIntervalDefault.String(), help: "how often expired holds are released: the bound on how late one is", set: dur(func(c *Config) *time.Duration { return &c.ReapInterval })},
	{env: "FLASHSALE_REQUEST_TIMEOUT", def: fshttp.RequestTimeoutDefault.String(), help: "every HTTP request's deadline", set: dur(func(c *Config) *time.Duration { return &c.RequestTimeout })},
	{env: "FLASHSALE_REDIS_TIMEOUT", def: redis.TimeoutDefault.String(), help: "deadline of each Redis command", set: dur(func(c *Config) *time.Duration { return &c.RedisTimeout })},
	{env: "FLASHSALE_START_TIMEOUT", def: StartTimeoutDefault.String(), migrate: true, help: "bound on start-up; a dependency that never answers is named", set: dur(func(c *Config) *time.Duration { return &c.StartTimeout })},
	{env: "FLASHSALE_AUDIT_INTERVAL", def: funnel.AuditIntervalDefault.String(), help: "how often the scheduled audit checks and repairs every current sale; negative: never", set: dur(func(c *Config) *time.Duration { return &c.AuditInterval })},
	{env: "FLASHSALE_PHANTOM_INTERVAL", def: funnel.PhantomIntervalDefault.String(), help: "how often every live sale's stock engine figure is checked against the database's; phantom rooms (more in the engine) are repaired at once; negative: never", set: dur(func(c *Config) *time.Duration { return &c.PhantomInterval })},
	{env: "FLASHSALE_AUDIT_GRACE", def: funnel.AuditGraceDefault.String(), help: "how long a reservation may wait for its order row before the audit calls it stranded", set: dur(func(c *Config) *time.Duration { return &c.AuditGrace })},
	{env: "FLASHSALE_BREAKER_FAILURES", def: strconv.Itoa(breaker.FailuresDefault), help: "consecutive unanswered Redis calls that open the circuit breaker; 0: no breaker", set: integer(func(c *Config) *int { return &c.BreakerFailures })},
	{env: "FLASHSALE_BREAKER_OPEN_FOR", def: breaker.OpenForDefault.String(), help: "how long the breaker stays open before one probe", set: dur(func(c *Config) *time.Duration { return &c.BreakerOpenFor })},
	{env: "FLASHSALE_BREAKER_MODE", def: BreakerReject, help: "what an open breaker does: reject (503) or db (every instance sells from the database)", set: str(func(c *Config) *string { return &c.BreakerMode })},
	{env: "FLASHSALE_BREAKER_DB_CONCURRENCY", def: strconv.Itoa(funnel.DirectLimitDefault), help: "db mode: purchases one instance sends to the database at once", set: integer(func(c *Config) *int { return &c.DirectLimit })},
	{env: "FLASHSALE_SELL_LEASE", def: funnel.SellLeaseDefault.String(), help: "db mode: how long an instance's report to the others stands", set: dur(func(c *Config) *time.Duration { return &c.SellLease })},
	{env: "FLASHSALE_MAX_INFLIGHT", def: strconv.Itoa(funnel.MaxInFlightDefault), help: "purchases this instance works on at once; beyond, 503 at once", set: integer(func(c *Config) *int { return &c.MaxInFlight })},
	{env: "FLASHSALE_MAX_INFLIGHT_PER_SALE", def: strconv.Itoa(funnel.MaxInFlightPerSaleDefault), help: "one sale's share of them", set: integer(func(c *Config) *int { return &c.MaxInFlightPerSale })},
	{env: "FLASHSALE_LIMIT_PURCHASE_USER", def: PurchasePerUserDefault.String(), help: "purchases per user: N/s, N/m or N/h, optionally ,BURST, or off", set: rate(func(c *Config) *flashsale.Rate { return &c.Limits.PerUser })},
	{env: "FLASHSALE_LIMIT_PURCHASE_IP", def: "off", help: "purchases per client address", set: rate(func(c *Config) *flashsale.Rate { return &c.Limits.PerIP })},
	{env: "FLASHSALE_LIMIT_PURCHASE_SALE", def: "off", help: "purchases per sale, all guests together", set: rate(func(c *Config) *flashsale.Rate { return &c.Limits.PerSale })},
	{env: "FLASHSALE_LIMIT_READ_IP", def: "off", help: "sale views and order reads per client address", set: rate(func(c *Config) *flashsale.Rate { return &c.ReadPerIP })},
	{env: "FLASHSALE_EVENTS_PER_CLIENT", def: "64", help: "guests' event streams one client address may hold open on an instance; beyond, a 429 and the page polls; 0: no cap", set: integer(func(c *Config) *int { return &c.StreamsPerClient })},
	{env: "FLASHSALE_FRAME_ORIGINS", help: "origins whose pages may frame the sale page and hand it a guest's token, comma-separated, e.g. https://www.hotel.example (none: only this service's own)", set: func(c *Config, v string) error {
		origins, err := parseOrigins(v)
		c.FrameOrigins = origins
		return err
	}},
	{env: "FLASHSALE_TRUSTED_PROXIES", help: "CIDRs of the proxies whose X-Forwarded-For names the client, comma-separated", set: func(c *Config, v string) error {
		c.TrustedProxies = nil
		for p := range strings.SplitSeq(v, ",") {
			prefix, err := netip.ParsePrefix(strings.TrimSpace(p))
			if err != nil {
				return err
			}
			c.TrustedProxies = append(c.TrustedProxies, prefix)
		}
		return nil
	}},
	{env: "FLASHSALE_LOG_LEVEL", def: "info", migrate: true, help: "debug, info, warn or error", set: func(c *Config, v string) error {
		return c.LogLevel.UnmarshalText([]byte(v))
	}},
	{env: "FLASHSALE_LOG_FORMAT", def: "text", migrate: true, help: "text or json: the format of every log line, all on stderr", set: func(c *Config, v string) error {
		if v != "text" && v != "json" {
			return errors.New("want text or json")
		}
		c.LogFormat = v
		return nil
	}},
	{env: "FLASHSALE_ACCESS_LOG_SAMPLE", def: "1000", help: "one access-log line for each N requests that went well (0: none); every 5xx, other 4xx and slow one gets its own, and each route a summary line a second", set: func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errors.New("want a whole number of requests, 0 or more")
		}
		c.AccessLogSample = n
		return nil
	}},
	{env: "FLASHSALE_DEBUG_ADDR", help: "a listener of its own for net/http/pprof, on a loopback address such as 127.0.0.1:6060; off when empty", set: str(func(c *Config) *string { return &c.DebugAddr })},
	{env: "FLASHSALE_DEBUG_REMOTE", def: "false", boolean: true, help: "let FLASHSALE_DEBUG_ADDR be other than a loopback address (pprof shows the process's memory)", set: boolean(func(c *Config) *bool { return &c.DebugRemote })},
	{env: "FLASHSALE_METRICS_ADDR", help: "serve /metrics on this address instead of the main listener", set: str(func(c *Config) *string { return &c.MetricsAddr })},
	{env: "FLASHSALE_SHUTDOWN_DELAY", def: "0s", help: "on SIGTERM, how long /readyz says 503 while requests are still served", set: dur(func(c *Config) *time.Duration { return &c.ShutdownDelay })},
	{env: "FLASHSALE_DEMO", def: "false", boolean: true, help: "seed a sample hotel sale and enable POST /api/demo/login (embedded shape only; never in production)", set: boolean(func(c *Config) *bool { return &c.Demo })},
})

// applySettings sets every setting's default, then the environment's
// value, then registers the flags (for the settings of this command).
func applySettings(c *Config, fset *flag.FlagSet, getenv func(string) string, forMigrate bool) error {
	var errs []string
	for _, s := range settings {
		if s.def != "" {
			if err := s.set(c, s.def); err != nil {
				panic(fmt.Sprintf("default of %s: %v", s.env, err)) // the table is ours
			}
		}
		if v := getenv(s.env); v != "" {
			if s.fileOf != "" && getenv(s.fileOf) != "" {
				errs = append(errs, fmt.Sprintf("%s and %s are both set: set one", s.fileOf, s.env))
				continue
			}
			if err := s.set(c, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", s.env, v, err))
			}
		}
		if fset == nil || (forMigrate && !s.migrate) {
			continue
		}
		usage := s.help + " (" + s.env + ")"
		if s.boolean {
			fset.BoolFunc(s.flagName(), usage, func(v string) error { return s.set(c, v) })
			continue
		}
		fset.Func(s.flagName(), usage, func(v string) error { return s.set(c, v) })
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// settingsUsage is a command's --help: every setting it reads, with its
// flag, its variable, its default and its meaning, then the command's own
// flags.
func settingsUsage(fset *flag.FlagSet, forMigrate bool) {
	w := fset.Output()
	fmt.Fprintf(w, "usage: flashsale %s [flags]\n\n", fset.Name())
	fmt.Fprintf(w, "Every setting is a flag and a variable; a flag wins over the variable, the variable over the default.\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "flag\tvariable\tdefault\tmeaning")
	known := map[string]bool{}
	for _, s := range settings {
		if forMigrate && !s.migrate {
			continue
		}
		known[s.flagName()] = true
		def := s.def
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "--%s\t%s\t%s\t%s\n", s.flagName(), s.env, def, s.help)
	}
	tw.Flush()
	if !forMigrate {
		fmt.Fprintf(w, "\nTracing (OpenTelemetry, off by default) takes the standard OTEL_* variables, no flags:\n"+
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 turns it on; see docs/configuration.md.\n")
	}
	first := true
	fset.VisitAll(func(f *flag.Flag) {
		if known[f.Name] {
			return
		}
		if first {
			fmt.Fprintf(w, "\n%s's own flags:\n", fset.Name())
			first = false
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  --%s\t%s%s\n", f.Name, f.Usage, def)
	})
}

// printConfig writes the effective configuration, one key=value a line,
// secrets masked (Config.LogValue decides what is shown).
func printConfig(w io.Writer, c Config) {
	for _, a := range c.LogValue().Group() {
		printAttr(w, "", a)
	}
}

func printAttr(w io.Writer, prefix string, a slog.Attr) {
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			printAttr(w, prefix+a.Key+".", g)
		}
		return
	}
	fmt.Fprintf(w, "%s%s=%s\n", prefix, a.Key, a.Value)
}
