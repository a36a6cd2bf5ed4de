// Command flashsale runs limited-stock flash sales.
//
//	flashsale serve [--demo] [--addr :8080] [--data-dir ./data]
//	flashsale migrate
//	flashsale audit [--sale ID] [--repair]
//	flashsale bench (--self | --target URL) [--shape pulse] [--ceiling] [--json FILE]
//	flashsale version
//
// With no configuration, serve runs the embedded shape: SQLite in the data
// dir, the in-process stock engine and the group-commit order writer. Set
// FLASHSALE_DATABASE_URL, FLASHSALE_REDIS_URL and FLASHSALE_AMQP_URL to run
// the distributed shape. Every setting: docs/configuration.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/breaker"
	"github.com/flashsale/flashsale/funnel"
	fshttp "github.com/flashsale/flashsale/http"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/jwks"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/tracing"
	"github.com/flashsale/flashsale/usersvc"
	"github.com/flashsale/flashsale/web"
	"github.com/flashsale/flashsale/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && slices.Contains([]string{"serve", "migrate", "audit"}, os.Args[1]) {
		if err := unknownSettings(os.Environ()); err != nil {
			fmt.Fprintln(os.Stderr, "flashsale:", strings.ReplaceAll(err.Error(), "\n", "\nflashsale: "))
			os.Exit(2)
		}
	}
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, errUsage) {
			os.Exit(2) // the usage is printed already
		}
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

const usage = `usage: flashsale <command> [flags]

commands:
  serve     run the service (embedded shape unless FLASHSALE_REDIS_URL etc. are set)
  migrate   apply database migrations and exit
  audit     prove each sale's books balance: flashsale audit [--sale ID] [--repair];
            exits non-zero when one does not (embedded shape: the database's own
            invariants only, see flashsale audit --help)
  bench     load-test a server (--target URL) or the embedded one (--self), then
            check the invariants; exits non-zero when one breaks (flashsale bench --help)
  token     print a user JWT signed with this instance's secret, to try the API:
            flashsale token --user alice [--tier gold] [--ttl 1h]
  version   print the version
  help      this; flashsale help COMMAND (or COMMAND --help) lists that command's flags
`

// errUsage is a command line the binary cannot run (no command, an unknown
// one, a flag that does not parse): what was wrong and the usage are
// printed already, once, and the exit status is 2.
var errUsage = errors.New("usage")

// newFlagSet is a command's flag set. Its help, when args ask for it (-h,
// -help, --help), goes to stdout like every other answer asked for; a
// mistake and the usage after it go to stderr.
func newFlagSet(name string, args []string, stdout, stderr io.Writer) *flag.FlagSet {
	fset := flag.NewFlagSet(name, flag.ContinueOnError)
	fset.SetOutput(stderr)
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fset.SetOutput(stdout)
			break
		}
	}
	return fset
}

// printFlags lists fset's flags (those keep reports true for) in the
// --flag style serve --help uses, so every command's help reads the same
// (flag.PrintDefaults writes -flag).
func printFlags(fset *flag.FlagSet, keep func(name string) bool) {
	w := fset.Output()
	fset.VisitAll(func(f *flag.Flag) {
		if keep != nil && !keep(f.Name) {
			return
		}
		kind, usage := flag.UnquoteUsage(f)
		if kind != "" {
			kind = " " + kind
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s%s\n", f.Name, kind, usage, def)
	})
}

// parseFlags parses args into fset: flag.ErrHelp for a help (printed), and
// errUsage for a mistake, which the flag package printed with the usage.
func parseFlags(fset *flag.FlagSet, args []string) error {
	err := fset.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}

// usageErrorf prints a mistake in a command line and the command's usage
// to stderr, and returns errUsage (exit 2, nothing printed again).
func usageErrorf(fset *flag.FlagSet, stderr io.Writer, format string, args ...any) error {
	fset.SetOutput(stderr)
	fmt.Fprintf(stderr, "flashsale %s: %s\n\n", fset.Name(), fmt.Sprintf(format, args...))
	fset.Usage()
	return errUsage
}

// version is the build's version: the one -ldflags set, else the module
// version and the commit `go build` recorded from the checkout (with
// "+dirty" when it had uncommitted changes), else "dev".
func version() string {
	if flashsale.Version != "dev" {
		return flashsale.Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v, rev, dirty, at := bi.Main.Version, "", false, ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		case "vcs.time":
			at = s.Value
		}
	}
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, rev, at)
}

// run is the binary. help, -h and --help, alone or after any command,
// print that level's usage and succeed.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := runCommand(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the flag set printed the command's usage
	}
	return err
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		if len(args) > 0 && args[0] != "help" && !strings.HasPrefix(args[0], "-") {
			return runCommand(ctx, []string{args[0], "--help"}, getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	case "version":
		fmt.Fprintln(stdout, "flashsale", version())
		return nil
	case "audit":
		return runAudit(ctx, args, getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, args, getenv, stdout, stderr)
	case "token":
		return runToken(args, getenv, stdout, stderr)
	case "serve", "migrate":
	default:
		fmt.Fprintf(stderr, "flashsale: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
	fset := newFlagSet(cmd, args, stdout, stderr)
	cfg, err := parseConfig(fset, args, getenv)
	if errors.Is(err, errPrintConfig) {
		printConfig(stdout, cfg)
		return nil
	}
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	if cmd == "migrate" {
		ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
		defer cancel()
		store, err := openStore(ctx, cfg, logger)
		if err != nil {
			return err
		}
		defer store.Close()
		// Each migration applied now was logged; this is true either way.
		fmt.Fprintln(stdout, "database schema up to date:", maskURL(cfg.DatabaseURL))
		return nil
	}
	tuneGC(getenv, logger)
	m := NewMain(cfg, logger, stdout)
	if err := m.Open(ctx); err != nil {
		m.Close()
		return err
	}
	<-ctx.Done()
	m.Drain(cfg.ShutdownDelay)
	logger.Info("shutting down")
	return m.Close()
}

// gcPercentDefault is the collector's target when GOGC is not set. The
// service's live heap is a few MB while a flood of sold-out answers
// allocates some 180 MB a second, so at Go's default of 100 the collector
// runs about seventy times a second; at 400 the heap peaks at five times
// the live one (tens of MB) and a sold-out answer costs 15-20% less CPU
// (docs/benchmarks.md). GOGC and GOMEMLIMIT, when set, are the runtime's
// as usual.
const gcPercentDefault = 400

func tuneGC(getenv func(string) string, log *slog.Logger) {
	if getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercentDefault)
	log.Debug("garbage collector target", "gogc", gcPercentDefault)
}

// newLogger is every line's logger: one stream, text or JSON
// (FLASHSALE_LOG_FORMAT), at FLASHSALE_LOG_LEVEL.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Main is the running program: tests open it on port 0 exactly as the
// binary does.
type Main struct {
	Config Config
	log    *slog.Logger
	out    io.Writer

	store  flashsale.Store
	engine flashsale.StockEngine
	writer flashsale.OrderWriter
	// fence and drainer heal a lost Redis, and republish is the path the
	// audit sends stranded reservations down (Redis shapes only).
	fence     funnel.Fence
	drainer   funnel.Drainer
	republish flashsale.OrderWriter
	breaker   flashsale.Breaker // in front of Redis; nil in the embedded shape
	limiter   flashsale.Limiter
	svc       *funnel.Service
	ln        net.Listener
	server    *http.Server
	debugAddr string // where pprof listens, once open; "" when off
	// metrics wraps the store and the engine and observes the rest;
	// metricsAddr is its own listener's address, "" on the main one.
	metrics     *metrics.Metrics
	metricsAddr string
	tracing     *tracing.Tracing // nil when off: nothing is wrapped
	gate        *drainGate

	closers []func() error // in opening order; Close runs them backwards
}

// NewMain returns a program for cfg; out receives the start-up banner.
func NewMain(cfg Config, logger *slog.Logger, out io.Writer) *Main {
	return &Main{Config: cfg, log: logger, out: out}
}

// Addr is the address the HTTP server listens on, once open.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Open wires the parts for the configured shape and starts serving. It
// gives up after StartTimeout, saying what it was waiting for.
func (m *Main) Open(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.Config.StartTimeout)
	defer cancel()
	if err := m.open(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("start: gave up after FLASHSALE_START_TIMEOUT=%s: %w", m.Config.StartTimeout, err)
		}
		return err
	}
	return nil
}

func (m *Main) open(ctx context.Context) error {
	cfg := m.Config
	m.log.Info("starting flashsale", "version", flashsale.Version, "config", cfg)
	adminToken, genAdmin, err := secret(cfg.AdminToken, cfg.DataDir, "admin_token")
	if err != nil {
		return err
	}
	jwtSecret, genJWT, err := secret(cfg.JWTSecret, cfg.DataDir, "jwt_secret")
	if err != nil {
		return err
	}

	if m.tracing, err = tracing.Open(ctx, cfg.Tracing, m.log); err != nil {
		return err
	}
	m.closers = append(m.closers, m.tracing.Close) // last: after everything that makes spans
	var board boards
	if m.store, board, err = openStoreBoard(ctx, cfg, m.log); err != nil {
		return err
	}
	if cfg.BreakerMode != BreakerDB {
		board.mode = nil
	}
	m.closers = append(m.closers, m.store.Close)
	m.metrics = metrics.New(metrics.Config{})
	m.store = m.tracing.Store(m.metrics.Store(m.store), dbSystem(cfg.DatabaseURL))
	if err := m.openStock(ctx); err != nil {
		return err
	}

	var facts flashsale.UserFacts
	if cfg.UserServiceURL != "" {
		us, err := usersvc.New(usersvc.Config{URL: cfg.UserServiceURL, Timeout: cfg.UserServiceTimeout,
			StaleFor: cfg.UserServiceStale, Logger: m.log})
		if err != nil {
			return err
		}
		m.closers = append(m.closers, us.Close)
		facts = us
	}
	sinks, err := m.openSinks(cfg)
	if err != nil {
		return err
	}
	m.svc = funnel.New(funnel.Config{
		Store: m.store, Engine: m.engine, Writer: m.writer, Sinks: sinks, OutboxRetention: cfg.OutboxRetention,
		Secret: []byte(jwtSecret), TokenKeys: cfg.TokenKeys, ReapInterval: cfg.ReapInterval, Logger: m.log,
		Fence: m.fence, Drainer: m.drainer, Republish: m.republish, AuditInterval: cfg.AuditInterval, PhantomInterval: cfg.PhantomInterval,
		AuditGrace: cfg.AuditGrace, Breaker: m.breaker, Forces: board.forces,
		Board: board.mode, SellLease: cfg.SellLease, DirectLimit: cfg.DirectLimit,
		MaxInFlight: cfg.MaxInFlight, MaxInFlightPerSale: cfg.MaxInFlightPerSale,
		Limiter: m.limiter, Limits: cfg.Limits, Facts: facts,
		Queued: cfg.AMQPURL != "", Observer: m.metrics.Funnel(),
	})
	m.metrics.WatchStock(m.svc)
	if board.mode != nil {
		m.metrics.WatchSelling(m.svc.SellMode)
	}
	if err := m.svc.Start(ctx); err != nil {
		return err
	}
	m.closers = append(m.closers, m.svc.Close)
	if cfg.Demo {
		if err := seedDemo(ctx, m.svc, m.store, time.Now()); err != nil {
			return err
		}
	}

	var keys fshttp.KeySet
	if cfg.JWKSURL != "" {
		k, err := jwks.New(jwks.Config{URL: cfg.JWKSURL, Logger: m.log})
		if err != nil {
			return err
		}
		m.closers = append(m.closers, k.Close)
		keys = k
	}
	metricsHandler, err := m.openMetrics()
	if err != nil {
		return err
	}
	access := fshttp.NewAccessLog(m.log, cfg.AccessLogSample)
	m.closers = append(m.closers, access.Close)
	h := fshttp.NewServer(m.svc, fshttp.Config{
		JWTSecret: []byte(jwtSecret), AdminToken: adminToken, PaymentToken: cfg.PaymentToken, Demo: cfg.Demo, Logger: m.log,
		JWKS: keys, JWTIssuer: cfg.JWTIssuer, JWTAudience: cfg.JWTAudience,
		RequestTimeout: cfg.RequestTimeout,
		Limiter:        m.limiter, ReadPerIP: cfg.ReadPerIP, TrustedProxies: cfg.TrustedProxies, StreamsPerClient: cfg.StreamsPerClient,
		Route: m.metrics.Route, Metrics: metricsHandler, Gather: m.metrics.Registry().Gather, AccessLog: access,
	})
	// The pages (/, /sales/{id}, /console) sit in front of the API, whose
	// routes keep priority.
	pages, err := web.Handler(h.Handler(), web.Config{Demo: cfg.Demo, FrameOrigins: cfg.FrameOrigins})
	if err != nil {
		return err
	}
	m.gate = &drainGate{next: m.tracing.Handler(pages)}
	if err := m.openDebug(); err != nil {
		return err
	}
	if m.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	m.server = &http.Server{
		Handler:           fshttp.BoundWrites(m.gate, fshttp.WriteTimeoutDefault),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// No WriteTimeout: fshttp.BoundWrites sets the deadline on the
		// answers that can be large, not on every request.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 16 << 10,
	}
	go func() {
		if err := m.server.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server", "err", err)
		}
	}()
	m.banner(genAdmin, genJWT)
	return nil
}

// openStock picks the stock engine (in-process, or Redis) and the order
// path (group commit into the database, or RabbitMQ with a consumer and the
// outbox relay in every instance).
// openSinks returns the transports of the order events: the webhook when
// configured, the RabbitMQ exchange in the distributed shape.
func (m *Main) openSinks(cfg Config) ([]flashsale.NoticeSink, error) {
	var sinks []flashsale.NoticeSink
	if cfg.WebhookURL != "" {
		w, err := webhook.New(cfg.WebhookURL, []byte(cfg.WebhookSecret), nil)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, w)
	}
	if cfg.AMQPURL != "" && cfg.EventsAMQP {
		a, err := amqp.NewNoticeSink(queueConfig(cfg))
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, a.Close)
		sinks = append(sinks, a)
	}
	return sinks, nil
}

func (m *Main) openStock(ctx context.Context) error {
	cfg := m.Config
	local := inmem.NewLimiter()
	m.closers = append(m.closers, local.Close)
	m.limiter = local
	if cfg.RedisURL == "" {
		m.engine = inmem.NewEngine()
	} else {
		e, err := openRedis(ctx, cfg, m.log, m.tracing)
		if err != nil {
			return err // it says "open redis"
		}
		m.closers = append(m.closers, e.Close)
		m.engine, m.fence = e, e
		var brk *breaker.Engine
		if cfg.BreakerFailures > 0 {
			// The fence stays outside the breaker: the heal loop asks it
			// every tick, and a rebuild must try even while the breaker
			// refuses purchases.
			brk = breaker.New(e, breaker.Config{Failures: uint32(cfg.BreakerFailures), OpenFor: cfg.BreakerOpenFor, Logger: m.log})
			m.engine, m.breaker = brk, brk
			m.metrics.WatchBreaker(brk)
		}
		// Limits every instance shares, counted locally while Redis is out.
		shared := e.Limiter(local)
		if brk != nil {
			shared.Down = func() bool { return !brk.Closed() }
		}
		m.limiter = shared
	}
	m.engine = m.metrics.Engine(m.engine)
	m.engine = m.tracing.Engine(m.engine, engineSystem(cfg))
	if cfg.AMQPURL == "" {
		w := inmem.NewWriter(m.store, inmem.WriterConfig{Committed: m.metrics.Commit}, m.log)
		m.closers = append(m.closers, w.Close)
		m.writer = m.tracing.Writer(w)
		if m.fence != nil {
			m.republish = w // Redis without a queue: a stranded reservation is written directly
		}
		return nil
	}
	outbox := m.engine.Outbox()
	if outbox == nil {
		return fmt.Errorf("FLASHSALE_AMQP_URL needs FLASHSALE_REDIS_URL: the queue path relies on the Redis outbox")
	}
	released := &funnel.ReleasingStore{Store: m.store, Engine: m.engine, Logger: m.log}
	// A database outage spends no delivery attempts (the consumer holds its
	// batch until the database answers), so MaxAttempts counts only
	// transactions that failed while the database answered: a poison
	// message is given up on (recorded as failed, units returned) in
	// seconds, not after minutes.
	qcfg := queueConfig(cfg)
	qcfg.RatePerSec, qcfg.OnDead = cfg.OrderRate, released.Dead
	qcfg.TracerProvider, qcfg.Propagator = m.tracing.Provider(), m.tracing.Propagator()
	pub, err := amqp.NewPublisher(ctx, qcfg, m.log)
	if err != nil {
		return fmt.Errorf("open amqp publisher: %w", err)
	}
	m.closers = append(m.closers, pub.Close)
	m.writer = &funnel.ConfirmingWriter{W: pub, Outbox: outbox, Logger: m.log}
	m.republish = pub

	consumer, err := amqp.NewConsumer(ctx, qcfg, released, m.log)
	if err != nil {
		return fmt.Errorf("open amqp consumer: %w", err)
	}
	m.drainer = consumer
	m.metrics.WatchQueue(queueSource(pub, consumer))
	relay := &funnel.Relay{Outbox: outbox, W: pub, Logger: m.log}
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := consumer.Run(bg); err != nil && bg.Err() == nil {
			m.log.Error("order consumer stopped", "err", err)
		}
	})
	wg.Go(func() { relay.Run(bg) })
	m.closers = append(m.closers, func() error {
		err := consumer.Close() // finishes the batch in hand, acks after commit
		stop()
		wg.Wait()
		return err
	})
	return nil
}

func (m *Main) banner(genAdmin, genJWT bool) {
	addr := m.Addr()
	if tcp, ok := m.ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		addr = fmt.Sprintf("localhost:%d", tcp.Port)
	}
	fmt.Fprintf(m.out, "flashsale %s listening on http://%s\n", flashsale.Version, addr)
	if genAdmin {
		// The path, not the token: this goes to journald and container logs.
		path := filepath.Join(m.Config.DataDir, "admin_token")
		fmt.Fprintf(m.out, "generated an admin token into %s (mode 0600); use it as:\n  curl -H \"Authorization: Bearer $(cat %s)\" http://%s/api/admin/sales/<id>\n",
			path, path, addr)
	}
	if genJWT {
		fmt.Fprintf(m.out, "generated a JWT secret (kept in %s/jwt_secret, mode 0600); sign user tokens with HS256 and claims sub, exp, tier\n", m.Config.DataDir)
	}
	if m.Config.Demo {
		fmt.Fprintf(m.out, "demo mode: get a user token with\n  curl -s -X POST http://%s/api/demo/login -d '{\"user_id\":\"alice\",\"tier\":\"gold\"}'\n", addr)
	}
}

// Close stops serving and closes everything in reverse order of opening:
// HTTP first (in-flight purchases finish), then the reaper, the writer or
// consumers, the engine and the database.
func (m *Main) Close() error {
	var errs []error
	if m.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownDefault)
		errs = append(errs, m.server.Shutdown(ctx))
		cancel()
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}
