// Package funnel is the use-case layer: it walks a purchase through the
// funnel (sale window, eligibility, idempotency, purchase token, one atomic
// reserve in the stock engine, the durable order path) and runs the holds
// that expire and give stock back. It implements flashsale.Service over the
// root interfaces, so the same code drives the embedded shape (in-process
// engine, group-commit writer, SQLite) and the distributed one (Redis,
// RabbitMQ, MySQL or PostgreSQL).
package funnel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/oklog/ulid/v2"
)

// Defaults for Config.
const (
	ReapIntervalDefault = 100 * time.Millisecond
	ReapBatchDefault    = 256
	// MaxRooms bounds one purchase; larger is a malformed request, not a limit question.
	MaxRooms = 1000
)

// Config wires a Service to its parts. Store, Engine and Writer are
// required; what they can do beyond their roles (the store's boards, the
// engine's outbox and breaker) is in their optional capabilities.
type Config struct {
	Store  flashsale.Store
	Engine flashsale.StockEngine
	Writer flashsale.OrderWriter
	// Secret signs purchase tokens when TokenKeys is empty (as key "0");
	// share it across instances.
	Secret []byte
	// TokenKeys sign purchase tokens and challenges: the first signs, all
	// verify, so a rotation lists the new key before the old one for one
	// TokenTTL. See ParseTokenKeys.
	TokenKeys []TokenKey
	// TokenTTL is how long a purchase token is valid (default 120 s).
	TokenTTL time.Duration
	// ReapInterval is how often expired holds are looked for (default 100 ms):
	// the bound on how late a hold is released.
	ReapInterval time.Duration
	// SaleRefresh is how often the current sales are reread to pick up
	// other instances' changes (default SaleRefreshDefault).
	SaleRefresh time.Duration
	// LatePayments is how long after a sale's last hold can end a late
	// payment may still retake an expired hold; then the engine forgets
	// the sale (forget.go). Default LatePaymentsDefault; negative: none.
	LatePayments time.Duration
	// ViewMaxAge is how old the rooms left shown by the public view and
	// the sale list may be (views.go): 0 reads the engine for every view;
	// ViewMaxAgeShared for an engine the instances share.
	ViewMaxAge time.Duration
	// Sinks deliver the outbox of order events, one dispatcher each
	// (notices.go); NoticePoll is how often an idle one looks for more
	// (default NoticePollDefault).
	Sinks      []flashsale.NoticeSink
	NoticePoll time.Duration
	// OutboxRetention is how long notices (once every transport in use
	// has them) and delivery attempts are kept; zero keeps them for ever.
	OutboxRetention time.Duration
	// Fence and Drainer let the engine heal itself when it loses a sale's
	// state (see heal.go): both set in the distributed shape, both nil in
	// the embedded one, whose engine lives and dies with the process.
	Fence   Fence
	Drainer Drainer
	// Instance names this process in the fence (default: a fresh ULID).
	Instance string
	// Queued says the order path is a queue that takes orders while the
	// database is down, so the instance stays ready through an outage.
	Queued bool
	// HealGrace is how long a rebuild waits for publishes that began
	// before the loss (default HealGraceDefault: the publisher's confirm
	// timeout).
	HealGrace time.Duration
	// AuditInterval is how often every current sale is audited and what
	// can safely be repaired is (default AuditIntervalDefault; negative:
	// never). See audit.go.
	AuditInterval time.Duration
	// PhantomInterval is how often every live sale's engine figure is
	// compared with the database's, so phantom rooms are repaired within
	// two of them (default PhantomIntervalDefault; negative: never; off
	// with the scheduled audit). See audit.go, "phantom rooms".
	PhantomInterval time.Duration
	// AuditGrace is how long a reservation may wait for its order row
	// before the audit calls it stranded (default AuditGraceDefault).
	AuditGrace time.Duration
	// Republish is the order path a repair sends stranded reservations down
	// again (the queue publisher); nil in the embedded shape, where a 202
	// is already a database row.
	Republish flashsale.OrderWriter
	// MaxInFlight bounds the purchases this instance works on at once, and
	// MaxInFlightPerSale one sale's share of them (defaults
	// MaxInFlightDefault and half of MaxInFlight); beyond, a purchase is
	// ErrOverloaded at once. See admit.go.
	MaxInFlight, MaxInFlightPerSale int
	// Limiter counts Limits (nil: no limits). See admit.go.
	Limiter flashsale.Limiter
	Limits  Limits
	// Facts looks up the user facts eligibility rules need that a token
	// does not carry (nil: none beyond the token's). See eligible.go.
	Facts flashsale.UserFacts
	// Store.Forces, when set with Engine.Breaker, is the deployment's breaker
	// override (force.go), reread every ForcePoll (default
	// ForcePollDefault).
	ForcePoll time.Duration
	// Store.Modes, when set, is the breaker's db mode (see mode.go): while
	// the breaker is open the deployment sells from the database. Every
	// instance of a deployment must have it or none. SellLease and
	// DirectLimit default to SellLeaseDefault and DirectLimitDefault.
	SellLease   time.Duration
	DirectLimit int
	// Queue keeps the sales' waiting rooms (waitroom.go); nil: a sale
	// with one is refused. AdmitTick is how often guests are admitted
	// (default AdmitTickDefault).
	Queue     flashsale.Queue
	AdmitTick time.Duration
	// QueueIdle: a guest who has not read their place for longer is
	// skipped at their turn (default QueueIdleDefault; negative: never).
	QueueIdle time.Duration
	// Observer is told what the funnel does (metrics); nil: nothing.
	Observer Observer
	Logger   *slog.Logger
	Now      func() time.Time
}

// Service implements flashsale.Service.
type Service struct {
	parts
	signer *signer
	sales  *catalog   // every sale this instance has seen (catalog.go)
	left   *leftCache // the rooms left the public views show (views.go)
	// latePayments is Config.LatePayments (forget.go).
	latePayments time.Duration
	admit        *admission
	gate         engineGate  // reserves in flight per sale (gate.go)
	events       *dispatcher // the order events' delivery (notices.go)
	reaper       *reaper     // releases expired holds (reap.go)
	audit        *auditor    // the audit and its repairs (audit.go)
	wait         *waiter     // the waiting rooms (waitroom.go)
	soldOut      soldOutLog

	// lifeMu serialises this instance's operator changes of sales
	// (lifecycle.go), so a pause does not keep losing its conditional
	// update to a run of stock changes. Lock order: locks.txt.
	lifeMu sync.Mutex
	// engineWork is entered by every purchase from its reserve to its
	// answer, a payment's retake and a stock change; the in-process
	// rebuild holds it (heal.go).
	engineWork inflight
	modes      *modeSwitch  // the breaker's db mode (mode.go); nil without a board
	healing    *healer      // rebuilds what the engine lost (heal.go)
	force      *forceSwitch // the deployment's breaker override (force.go); nil: this instance's own
	loops      loops        // every component's run, between Start and Close
}

// loops runs components' run methods from Start until Close: each returns
// once its context ends, and Close waits for all of them.
type loops struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (l *loops) start(runs ...func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, run := range runs {
		l.wg.Go(func() { run(ctx) })
	}
}

// stop ends every run and waits for them; it does nothing before start.
func (l *loops) stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}

// parts are what every component of the Service works with: the seams,
// the logger, the clock and the observer. breaker is the circuit breaker
// engine sits behind, or nil.
type parts struct {
	store  flashsale.Store
	engine flashsale.StockEngine // its Breaker is nil where there is none
	writer flashsale.OrderWriter
	log    *slog.Logger
	now    func() time.Time
	obs    Observer
	// instance names this process in the fence and the boards.
	instance string
	// queued says the order path is a queue that takes orders while the
	// database is down (Config.Queued).
	queued bool
	// restoreQueue brings a sale's waiting room up to its records when
	// its stock is loaded (waiter.restore); nil in a rig without one.
	restoreQueue func(context.Context, *flashsale.Sale) error
	// lastSchema is readiness's last read of the pending migrations that
	// succeeded (parts.schema).
	lastSchema atomic.Pointer[schemaReading]
}

// schemaReading is a read of the database's pending migrations, and when.
type schemaReading struct {
	pending []string
	at      time.Time
}

// schemaStale is how long readiness trusts its last read of the pending
// migrations when a read fails while the database answers its ping.
const schemaStale = 30 * time.Second

// schema is the database's pending migrations for readiness. A read that
// fails while the last one is under schemaStale old gives that one: the
// schema changes only when flashsale migrate runs, and a read slower than
// the probe's deadline on a busy database is not a reason to leave the
// load balancer (a rebuild's drain made one instance do so in CI). A
// database that does not answer at all fails its ping, which decides.
func (p *parts) schema(ctx context.Context) ([]string, error) {
	pending, err := p.store.PendingMigrations(ctx)
	now := p.now()
	if err == nil {
		p.lastSchema.Store(&schemaReading{pending: pending, at: now})
		return pending, nil
	}
	if last := p.lastSchema.Load(); last != nil && now.Sub(last.at) < schemaStale {
		return last.pending, nil
	}
	return nil, err
}

// Roles is the service as the HTTP API takes it: every role is this one.
func (s *Service) Roles() flashsale.Service { return flashsale.ServiceOf(s) }

// New returns a Service. Call Start before serving and Close after.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	obs := cmp.Or[Observer](cfg.Observer, nopObserver{})
	instance := cmp.Or(cfg.Instance, ulid.Make().String())
	sales := newCatalog(cfg.Store, obs, log, cfg.Now, cmp.Or(cfg.SaleRefresh, SaleRefreshDefault))
	sg := newSigner(cfg.TokenKeys, cfg.Secret)
	sg.ttl = cmp.Or(cfg.TokenTTL, TokenTTLDefault)
	s := &Service{
		parts: parts{store: cfg.Store, engine: cfg.Engine, writer: cfg.Writer,
			log: log, now: cfg.Now, obs: obs, instance: instance, queued: cfg.Queued},
		signer:       sg,
		sales:        sales,
		left:         newLeftCache(cfg.Engine.Available, cfg.ViewMaxAge),
		latePayments: max(cmp.Or(cfg.LatePayments, LatePaymentsDefault), 0), // negative: none
		events: &dispatcher{store: cfg.Store, sales: sales, log: log, now: cfg.Now, instance: instance,
			sinks: cfg.Sinks, poll: cmp.Or(cfg.NoticePoll, NoticePollDefault), retention: cfg.OutboxRetention},
		admit: newAdmission(cfg.MaxInFlight, cfg.MaxInFlightPerSale, cfg.Limiter, cfg.Limits, cfg.Facts),
		force: newForceSwitch(cfg.Store.Forces, cfg.Engine.Breaker, cfg.ForcePoll, log),
	}
	s.reaper = &reaper{parts: &s.parts, interval: cmp.Or(cfg.ReapInterval, ReapIntervalDefault)}
	s.wait = newWaiter(&s.parts, cfg.Queue, sales, drawSecret(cfg), cfg.AdmitTick)
	s.wait.idle = max(cmp.Or(cfg.QueueIdle, QueueIdleDefault), 0)
	s.parts.restoreQueue = s.wait.restore
	sell := newSeller(cfg)
	s.healing = &healer{parts: &s.parts, sales: sales, work: &s.engineWork, engineMode: sell.engineMode,
		fence:   cfg.Fence,
		drainer: cmp.Or[Drainer](cfg.Drainer, nopDrainer{}),
		grace:   cmp.Or(cfg.HealGrace, HealGraceDefault),
		wake:    make(chan struct{}, 1),
	}
	s.audit = newAuditor(cfg, &s.parts, sales, s.healing, sell.engineMode)
	if sell != nil {
		s.modes = &modeSwitch{parts: &s.parts, sell: sell, healing: s.healing, sales: sales, engineWork: &s.engineWork}
	}
	return s
}

// Start loads every current sale into the stock engine (the rebuild after a
// restart: available stock, per-user counts, idempotency keys all come from
// the database) and starts the hold reaper, the scheduled audit and, with a
// fence, the heal loop.
//
// With a fence (an engine shared by instances), a sale that has started is
// never loaded here: its orders may be in the queue or in another
// instance's hands, which the database alone does not show. If the engine
// has it, it keeps it; if not (Redis lost, or stale and unloaded by its
// first read), the heal loop rebuilds it behind the fence like any lost
// sale. Before, an instance restarted while Redis was back empty loaded
// the database's view with 262 orders still queued, and each became a
// failed 202 (issue 21).
func (s *Service) Start(ctx context.Context) error {
	sales, err := s.store.Sales(ctx, s.now())
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	for _, sale := range sales {
		if s.healing.fence == nil || s.now().Before(sale.StartsAt) {
			if err := s.load(ctx, sale, false); err != nil {
				return fmt.Errorf("start: %w", err)
			}
		}
		s.sales.put(sale)
	}
	runs := []func(context.Context){s.reaper.run, s.sales.run, s.events.run, s.audit.run, s.wait.run, s.forgetLoop}
	if s.force != nil {
		s.force.follow(ctx) // an instance starting while the switch is on follows it from the start
		runs = append(runs, s.force.run)
	}
	if s.modes != nil {
		s.modes.step(ctx) // sell from where the others do from the start
		runs = append(runs, s.modes.run)
	}
	if s.healing.fence != nil {
		runs = append(runs, s.healing.run)
	}
	s.loops.start(runs...)
	return nil
}

// Close stops every component's loop (the reaper, the catalog's refresh,
// the event dispatch, the audit, the force and mode switches, the heal
// loop) and waits for them. The caller closes the writer, engine and store.
func (s *Service) Close() error {
	s.loops.stop()
	s.sales.close()
	s.left.close()
	return nil
}

// load installs a sale's stock from the database. force=false is a start or
// rebuild, where an engine that already has a started sale (Redis shared by
// other instances) keeps it.
func (s *Service) load(ctx context.Context, sale *flashsale.Sale, force bool) error {
	err := s.loadAt(ctx, sale, s.now())
	if errors.Is(err, flashsale.ErrAlreadyStarted) && !force {
		return nil
	}
	return err
}

// loadAt loads a sale's snapshot into the engine as of at; the zero time
// replaces a started sale (the fenced rebuild).
func (p *parts) loadAt(ctx context.Context, sale *flashsale.Sale, at time.Time) error {
	snap, err := p.store.Snapshot(ctx, sale.ID)
	if err != nil {
		return fmt.Errorf("load sale=%s: %w", sale.ID, err)
	}
	// The stock comes from the database (a start, a rebuild after a lost
	// or stale Redis): the waiting room's places do too, first, so no
	// join lands in a lost queue (joins wait for the stock to be loaded).
	if p.restoreQueue != nil {
		if err := p.restoreQueue(ctx, sale); err != nil {
			return err
		}
	}
	if err := p.engine.Load(ctx, snap, at); err != nil {
		return fmt.Errorf("load sale=%s: %w", sale.ID, err)
	}
	return nil
}

// CreateSale validates, stores and preheats a sale.
func (s *Service) CreateSale(ctx context.Context, sale *flashsale.Sale) (*flashsale.Sale, error) {
	if err := sale.Validate(); err != nil {
		return nil, err
	}
	if sale.WaitingRoom != nil && s.wait.queue == nil {
		return nil, errNoQueue
	}
	if err := sale.CheckNights(s.now()); err != nil {
		return nil, err
	}
	sale.ID = ulid.Make().String()
	sale.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	sale.StartsAt = sale.StartsAt.UTC().Truncate(time.Millisecond)
	sale.EndsAt = sale.EndsAt.UTC().Truncate(time.Millisecond)
	if err := s.store.CreateSale(ctx, sale); err != nil {
		return nil, fmt.Errorf("create sale: %w", err)
	}
	if err := s.load(ctx, sale, true); err != nil {
		return nil, err
	}
	s.sales.put(sale)
	s.sales.changed()
	s.log.Info("sale created", "sale_id", sale.ID, "hotel", sale.Hotel, "room_type", sale.RoomType,
		"nights", len(sale.Nights), "starts_at", sale.StartsAt)
	return sale, nil
}

// Preheat reloads a sale's stock into the engine from the database. Before
// the start it is idempotent; after it, refused, so stock is never reset mid-sale.
func (s *Service) Preheat(ctx context.Context, id string) error {
	sale, err := s.sales.get(ctx, id)
	if err != nil {
		return err
	}
	if !s.now().Before(sale.StartsAt) {
		return flashsale.ErrAlreadyStarted
	}
	return s.load(ctx, sale, true)
}

// AdminSale shows the database's counters beside the engine's available figure.
func (s *Service) AdminSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	sale, err := s.sales.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.adminView(ctx, sale)
}

func (s *Service) adminView(ctx context.Context, sale *flashsale.Sale) (*flashsale.SaleView, error) {
	return s.nightsView(ctx, sale, false)
}

// savedTimeout bounds savedView's read-back, which no longer runs under
// the request's deadline.
const savedTimeout = 10 * time.Second

// savedView is the admin view of a change already committed. Its answer
// must say the change was made: a 503 now would have the operator (or
// their script) make it again, adding the rooms twice. So the read-back
// runs under a deadline of its own, and an engine that does not answer
// costs only its figure: the nights show the database's.
func (s *Service) savedView(ctx context.Context, sale *flashsale.Sale) (*flashsale.SaleView, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), savedTimeout)
	defer cancel()
	v, err := s.nightsView(ctx, sale, true)
	if err != nil {
		return nil, fmt.Errorf("the change is saved, but reading the sale back failed (reload it; do not repeat the change): %w", err)
	}
	return v, nil
}

// nightsView is a sale with the database's counters and, unless the
// engine fails and engineOptional says to go on without it, the engine's
// available figures.
func (s *Service) nightsView(ctx context.Context, sale *flashsale.Sale, engineOptional bool) (*flashsale.SaleView, error) {
	nights, err := s.store.NightStocks(ctx, sale.ID)
	if err != nil {
		return nil, fmt.Errorf("admin sale=%s: %w", sale.ID, err)
	}
	avail, err := s.engine.Available(ctx, sale.ID)
	switch {
	case err == nil, errors.Is(err, flashsale.ErrNotLoaded):
	case engineOptional:
		s.log.Warn("the stock engine did not answer for a saved change's view; showing the database's figures", "sale_id", sale.ID, "err", err)
		avail = nil
	default:
		return nil, fmt.Errorf("admin sale=%s: %w", sale.ID, err)
	}
	for i := range nights {
		if i < len(avail) {
			nights[i].Available = avail[i]
		}
	}
	now := s.now()
	return &flashsale.SaleView{Sale: sale, Status: sale.Status(now, availableOf(nights)), ServerTime: now, Nights: nights}, nil
}

// PublicSale answers from memory and the engine only: it is the page every
// guest refreshes before the start.
func (s *Service) PublicSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	sale, err := s.sales.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.publicView(ctx, sale)
}

func (s *Service) publicView(ctx context.Context, sale *flashsale.Sale) (*flashsale.SaleView, error) {
	avail, err := s.left.get(ctx, sale.ID)
	if errors.Is(err, flashsale.ErrNotLoaded) {
		avail, err = make([]int, len(sale.Nights)), nil
		if s.now().Before(sale.EndsAt) {
			// A live sale the engine lost (it is being rebuilt): show the
			// database's figures, which can only be higher than the truth
			// by what is still in the queue, rather than "sold out".
			s.healing.wakeHeal()
			nights, nerr := s.store.NightStocks(ctx, sale.ID)
			if nerr != nil {
				return nil, fmt.Errorf("public sale=%s: %w", sale.ID, nerr)
			}
			avail = availableOf(nights)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("public sale=%s: %w", sale.ID, err)
	}
	// Nights that have passed are not offered: the page's check-in menu
	// is this list, and a sale that runs for days sells on its later
	// nights.
	now := s.now()
	nights := make([]flashsale.NightStock, 0, len(sale.Nights))
	slots := sale.Timed()
	for i, n := range sale.Nights {
		if slots {
			if start, err := sale.SlotStart(i); err != nil || !now.Before(start) {
				continue // a slot that has started is not offered
			}
		} else if sale.NightPassed(n.Date, now) {
			continue
		}
		ns := flashsale.NightStock{Date: n.Date, Time: n.Time, Stock: n.Stock}
		if i < len(avail) {
			ns.Available = avail[i]
		}
		nights = append(nights, ns)
	}
	return &flashsale.SaleView{Sale: sale, Status: sale.Status(now, availableOf(nights)), ServerTime: now, Nights: nights}, nil
}

func availableOf(nights []flashsale.NightStock) []int {
	a := make([]int, len(nights))
	for i, n := range nights {
		a[i] = n.Available
	}
	return a
}

// Sales lists upcoming and active (including sold-out) sales.
func (s *Service) Sales(ctx context.Context) ([]*flashsale.SaleView, error) {
	sales, err := s.sales.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	views := make([]*flashsale.SaleView, 0, len(sales))
	for _, sale := range sales {
		v, err := s.publicView(ctx, sale)
		if err != nil {
			return nil, err
		}
		if v.Status != flashsale.SaleEnded && !sale.Test { // a load test's sale is for its test only
			views = append(views, v)
		}
	}
	return views, nil
}

// Ready reports whether the instance can sell: the stock engine answers
// (its breaker, if open, refuses every purchase) and so does the database,
// or the order path is a queue that holds orders until it is back; the
// database's schema is at this binary's last migration; and the engine
// holds every current sale (ready.go). The checks run at once: a dead
// engine must not eat the database's share of the deadline, or /readyz
// would blame both.
func (s *Service) Ready(ctx context.Context) *flashsale.Readiness {
	r := &flashsale.Readiness{Ready: true, Engine: "ok", Database: "ok", Selling: s.sells()}
	if s.engine.Breaker != nil {
		r.Breaker = s.breakerStatus()
	}
	if sl := s.seller(); sl != nil {
		m := sl.mode.Load().(flashsale.SellMode)
		r.SellMode = &m
	}
	var (
		wg                           sync.WaitGroup
		engineErr, storeErr, migrErr error
		pending, lost                []string
	)
	wg.Go(func() { engineErr = s.engine.Ping(ctx) })
	wg.Go(func() { storeErr = s.store.Ping(ctx) })
	wg.Go(func() { pending, migrErr = s.schema(ctx) })
	wg.Go(func() { lost = s.unloadedSales(ctx) })
	wg.Wait()
	s.dependenciesReady(r, engineErr, storeErr)
	schemaReady(r, pending, migrErr, storeErr)
	s.salesReady(r, lost)
	return r
}

// dependenciesReady records in r what the engine's and the database's
// pings said, and what the instance sells from.
func (s *Service) dependenciesReady(r *flashsale.Readiness, engineErr, storeErr error) {
	switch forced := r.Breaker != nil && r.Breaker.Forced == flashsale.BreakerForceOpen; {
	case engineErr != nil && forced:
		// An operator's decision, not a fault: the breaker refuses the
		// ping too. The instance answers purchases 503 and serves
		// everything else, orders included, so it stays in the load
		// balancer; the switch reaches every instance, and taking them
		// all out would turn "no purchases" into "no answers".
		r.Engine = "not asked: the breaker is forced open"
		r.Reasons = append(r.Reasons, "breaker: forced open by an operator; purchases are answered 503, everything else is served")
	case engineErr != nil:
		r.Ready, r.Engine, r.EngineErr = false, "unavailable", engineErr
		r.Reasons = append(r.Reasons, "engine: the stock engine does not answer")
	}
	switch r.Selling {
	case flashsale.SellingDB:
		// It sells without the engine, not without the database.
		r.Ready, r.Reasons = storeErr == nil, nil
		if r.EngineErr != nil {
			r.Reasons = append(r.Reasons, "engine: the stock engine does not answer; selling from the database")
		}
		if storeErr != nil {
			r.Database, r.DatabaseErr = "unavailable", storeErr
			r.Reasons = append(r.Reasons, "database: does not answer")
		}
		return
	case flashsale.SellingNone:
		r.Ready = false
		r.Reasons = append(r.Reasons, "selling: moving between the stock engine and the database, or cut off from the database")
	}
	if err := storeErr; err != nil {
		r.Database, r.DatabaseErr = "unavailable", err
		if s.queued {
			// Purchases of cached sales still sell: the queue holds the
			// orders until the database is back. Taking the instance out
			// of the load balancer would turn a database outage into a
			// sales outage.
			r.Database = "unavailable, orders wait in the queue"
			r.Reasons = append(r.Reasons, "database: does not answer; orders wait in the queue")
		} else {
			r.Ready = false
			r.Reasons = append(r.Reasons, "database: does not answer")
		}
	}
}

// Breaker returns the stock engine's circuit breaker state; ErrNotFound
// where there is none.
func (s *Service) Breaker(context.Context) (*flashsale.BreakerStatus, error) {
	if s.engine.Breaker == nil {
		return nil, errNoBreaker
	}
	return s.breakerStatus(), nil
}

// ForceBreaker applies an operator's override to the breaker: to every
// instance's with a ForceBoard (force.go), to this one's without.
func (s *Service) ForceBreaker(ctx context.Context, f flashsale.BreakerForce) (*flashsale.BreakerStatus, error) {
	if s.engine.Breaker == nil {
		return nil, errNoBreaker
	}
	if err := f.Valid(); err != nil {
		return nil, err
	}
	if s.force != nil {
		if err := s.force.everywhere(ctx, f); err != nil {
			return nil, err
		}
	} else if err := s.engine.Breaker.Force(f); err != nil {
		return nil, err
	}
	return s.breakerStatus(), nil
}

// breakerStatus is the breaker's status with the deployment's override.
func (s *Service) breakerStatus() *flashsale.BreakerStatus {
	st := s.engine.Breaker.Status()
	if s.force != nil {
		st.DeploymentForce = s.force.current()
	}
	return &st
}

var errNoBreaker = flashsale.Errorf(flashsale.ENotFound, "this instance has no circuit breaker: its stock engine is in-process and cannot fail on its own")

// every runs fn each period (and whenever wake fires) until ctx ends.
func every(ctx context.Context, period time.Duration, wake <-chan struct{}, fn func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn(ctx)
	}
}
