// Package app is the flashsale program: its configuration and settings
// table, the commands serve, migrate, audit, token and bench reading them,
// and Main, which wires the parts for the configured shape and runs the
// HTTP server's lifecycle. cmd/flashsale holds only main and the table of
// commands.
//
// With no configuration, serve runs the embedded shape: SQLite in the data
// dir, the in-process stock engine and the group-commit order writer. Set
// FLASHSALE_DATABASE_URL, FLASHSALE_REDIS_URL and FLASHSALE_AMQP_URL to run
// the distributed shape. Every setting: docs/configuration.md.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
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
	limiter   flashsale.Limiter
	// queue keeps the waiting rooms: in process in the embedded shape,
	// nil in the distributed one (its Redis queue is not built).
	queue     flashsale.Queue
	svc       *funnel.Service
	http      *server // nil until open
	debugAddr string  // where pprof listens, once open; "" when off
	// metrics wraps the store and the engine and observes the rest;
	// metricsAddr is its own listener's address, "" on the main one.
	metrics     *metrics.Metrics
	metricsAddr string
	tracing     *tracing.Tracing // nil when off: nothing is wrapped

	closers []func() error // in opening order; Close runs them backwards
}

// NewMain returns a program for cfg; out receives the start-up banner.
func NewMain(cfg Config, logger *slog.Logger, out io.Writer) *Main {
	return &Main{Config: cfg, log: logger, out: out}
}

// Addr is the address the HTTP server listens on, once open.
func (m *Main) Addr() string { return m.http.ln.Addr().String() }

// The parts as the program wired them, wrappers included, for the
// end-to-end tests that check the wiring: the store and the engine, the
// tracing (nil when off), the routes behind the drain gate, the public
// server's whole handler, and the debug and metrics listeners' addresses
// ("" when off).
func (m *Main) Store() flashsale.Store        { return m.store }
func (m *Main) Engine() flashsale.StockEngine { return m.engine }
func (m *Main) Tracing() *tracing.Tracing     { return m.tracing }
func (m *Main) Routes() http.Handler          { return m.http.gate.next }
func (m *Main) Handler() http.Handler         { return m.http.srv.Handler }
func (m *Main) DebugAddr() string             { return m.debugAddr }
func (m *Main) MetricsAddr() string           { return m.metricsAddr }

// Drain marks the instance not ready and waits delay before Close, so the
// load balancer has seen it go before it stops accepting; ctx ending cuts
// the wait short.
func (m *Main) Drain(ctx context.Context, delay time.Duration) {
	if m.http != nil {
		m.http.drain(ctx, delay)
	}
}

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
	if m.store, err = OpenStore(ctx, cfg, m.log); err != nil {
		return err
	}
	if cfg.BreakerMode != BreakerDB {
		m.store.Modes = nil // the breaker's db mode is off
	}
	m.closers = append(m.closers, m.store.Close)
	m.metrics = metrics.New(metrics.Config{})
	system, _ := database(cfg.DatabaseURL)
	m.store = m.tracing.Store(m.metrics.Store(m.store), system)
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
	var viewAge time.Duration // the in-process engine's read is a map lookup
	if m.fence != nil {
		viewAge = funnel.ViewMaxAgeShared // Redis: one read a sale every 100 ms, not one a view
	}
	m.svc = funnel.New(funnel.Config{
		Store: m.store, Engine: m.engine, Writer: m.writer, Sinks: sinks, OutboxRetention: cfg.OutboxRetention,
		Secret: []byte(jwtSecret), TokenKeys: cfg.TokenKeys, ReapInterval: cfg.ReapInterval, QueueIdle: cmp.Or(cfg.QueueIdle, -1), Logger: m.log,
		Fence: m.fence, Drainer: m.drainer, Republish: m.republish, AuditInterval: cfg.AuditInterval, PhantomInterval: cfg.PhantomInterval,
		AuditGrace: cfg.AuditGrace, ViewMaxAge: viewAge, LatePayments: cmp.Or(cfg.LatePayments, -1),
		SellLease: cfg.SellLease, DirectLimit: cfg.DirectLimit,
		MaxInFlight: cfg.MaxInFlight, MaxInFlightPerSale: cfg.MaxInFlightPerSale,
		Limiter: m.limiter, Limits: cfg.Limits, Facts: facts,
		Queued: cfg.AMQPURL != "", Observer: m.metrics.Funnel(), Queue: m.queue,
	})
	m.metrics.WatchStock(m.svc)
	if m.store.Modes != nil {
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
	h := fshttp.NewServer(m.svc.Roles(), fshttp.Config{
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
	if err := m.openDebug(); err != nil {
		return err
	}
	if m.http, err = listen(cfg.Addr, m.tracing.Handler(pages), m.log); err != nil {
		return err
	}
	m.banner(genAdmin, genJWT)
	return nil
}

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

// openStock picks the stock engine (in-process, or Redis) and the order
// path (group commit into the database, or RabbitMQ with a consumer and the
// outbox relay in every instance).
func (m *Main) openStock(ctx context.Context) error {
	cfg := m.Config
	local := inmem.NewLimiter()
	m.closers = append(m.closers, local.Close)
	m.limiter = local
	if cfg.RedisURL == "" {
		m.engine = inmem.NewEngine().Roles()
		m.queue = inmem.NewQueue()
	} else {
		e, err := openRedis(ctx, cfg, m.log, m.tracing)
		if err != nil {
			return err // it says "open redis"
		}
		m.closers = append(m.closers, e.Close)
		m.engine, m.fence = e.Roles(), e
		m.queue = e.Queue() // the waiting rooms, one order for every instance
		var brk *breaker.Engine
		if cfg.BreakerFailures > 0 {
			// The fence stays outside the breaker: the heal loop asks it
			// every tick, and a rebuild must try even while the breaker
			// refuses purchases.
			brk = breaker.New(e.Roles(), breaker.Config{Failures: uint32(cfg.BreakerFailures), OpenFor: cfg.BreakerOpenFor, Logger: m.log})
			m.engine = brk.Roles()
			m.metrics.WatchBreaker(brk)
		}
		// Each instance counts its share of every limit, in process: no
		// Redis round trip before a reserve, no key every purchase of a
		// hot sale touches.
		m.limiter = flashsale.Shared(local, e.Instances)
		m.metrics.WatchInstances(e.Instances)
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
	outbox := m.engine.Outbox
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
	if tcp, ok := m.http.ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
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
	if m.http != nil {
		errs = append(errs, m.http.shutdown())
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}
