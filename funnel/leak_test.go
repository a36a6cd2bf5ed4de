package funnel

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/breaker"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/sqlite"
	"go.uber.org/goleak"
)

// memBoards are the force and mode boards in memory, for a Service that
// runs every one of its loops.
type memBoards struct {
	mu    sync.Mutex
	force flashsale.BreakerForce
	mode  flashsale.SellMode
	parts map[string]flashsale.SellPart
}

// withBoards is s with both boards b.
func withBoards(s flashsale.Store, b *memBoards) flashsale.Store {
	s.Modes, s.Forces = b, b
	return s
}

func (b *memBoards) SetBreakerForce(_ context.Context, f flashsale.BreakerForce) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.force = f
	return nil
}

func (b *memBoards) BreakerForce(context.Context) (flashsale.BreakerForce, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.force, nil
}

func (b *memBoards) Beat(_ context.Context, p flashsale.SellPart, _ time.Duration) (flashsale.SellMode, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parts[p.Instance] = p
	return b.mode, nil
}

func (b *memBoards) Move(_ context.Context, from, to flashsale.SellMode) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mode != from {
		return false, nil
	}
	b.mode = to
	return true, nil
}

func (b *memBoards) Parts(context.Context) ([]flashsale.SellPart, time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ps []flashsale.SellPart
	for _, p := range b.parts {
		ps = append(ps, p)
	}
	return ps, time.Now(), nil
}

// nopSink takes every notice.
type nopSink struct{}

func (nopSink) Name() string                                           { return "nop" }
func (nopSink) Deliver(context.Context, flashsale.Notice) (int, error) { return 200, nil }

// TestCloseLeavesNoGoroutine: a Service with every component running (the
// catalog's refresh, the reaper, a dispatcher, the outbox's pruning, the
// audit and its phantom watch, the heal loop and its heartbeat, the admission loop, the force
// switch, the sell mode) leaves no goroutine behind once Close returns,
// and neither does each component on its own (the catalog, the
// dispatcher, the healer, the reaper, the auditor, the mode switch, the
// waiting rooms' waiter, the force switch).
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx := context.Background()
	store := mustStore(t)
	engine := inmem.NewEngine()
	brk := breaker.New(engine.Roles(), breaker.Config{Logger: slog.New(slog.DiscardHandler)})
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	boards := &memBoards{mode: flashsale.SellMode{Phase: flashsale.PhaseEngine}, parts: map[string]flashsale.SellPart{}}
	events := &eventLog{}
	fast := 10 * time.Millisecond
	svc := New(Config{
		Store: withBoards(store.Roles(), boards), Engine: brk.Roles(), Writer: writer, Secret: []byte("s"),
		Fence: &fakeFence{beats: map[string]string{}, events: events}, Drainer: &fakeDrainer{events: events},
		ForcePoll: fast,
		Sinks:     []flashsale.NoticeSink{nopSink{}}, NoticePoll: fast, OutboxRetention: time.Hour,
		ReapInterval: fast, SaleRefresh: fast, AuditInterval: fast, PhantomInterval: fast,
		Queue: inmem.NewQueue(), AdmitTick: fast,
	})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // every loop has ticked
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	writer.Close()
	store.Close()
	goleak.VerifyNone(t, before)

	t.Run("catalog", func(t *testing.T) {
		r := newRig(t, inmem.NewEngine().Roles(), fast)
		runAndStop(t, r.sales.run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("dispatcher", func(t *testing.T) {
		r := newRig(t, inmem.NewEngine().Roles(), fast)
		d := &dispatcher{store: r.store.Roles(), sales: r.sales, log: r.p.log, now: time.Now,
			instance: "self", sinks: []flashsale.NoticeSink{nopSink{}, nopSink{}}, poll: fast, retention: time.Hour}
		runAndStop(t, d.run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("healer", func(t *testing.T) {
		r := newRig(t, inmem.NewEngine().Roles(), fast)
		r.heal.fence, r.heal.drainer = &fakeFence{beats: map[string]string{}, events: events}, &fakeDrainer{events: events}
		runAndStop(t, r.heal.run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("reaper", func(t *testing.T) {
		r := newRig(t, inmem.NewEngine().Roles(), fast)
		runAndStop(t, (&reaper{parts: r.p, interval: fast}).run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("auditor", func(t *testing.T) {
		r := newRig(t, inmem.NewEngine().Roles(), fast)
		a := newAuditor(Config{AuditInterval: fast, PhantomInterval: fast}, r.p, r.sales, r.heal, func() bool { return true })
		runAndStop(t, a.run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("modeSwitch", func(t *testing.T) {
		r := newRig(t, brk.Roles(), fast)
		sl := newSeller(Config{Store: withBoards(r.store.Roles(), boards)})
		r.heal.engineMode, r.heal.drainer = sl.engineMode, &fakeDrainer{events: events}
		ms := &modeSwitch{parts: r.p, sell: sl, healing: r.heal, sales: r.sales, engineWork: r.heal.work}
		runAndStop(t, ms.run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("waiter", func(t *testing.T) {
		r := newRig(t, inmem.NewEngine().Roles(), fast)
		runAndStop(t, newWaiter(r.p, inmem.NewQueue(), r.sales, []byte("s"), fast).run)
		r.close()
		goleak.VerifyNone(t, before)
	})
	t.Run("forceSwitch", func(t *testing.T) {
		f := newForceSwitch(boards, brk, fast, slog.New(slog.DiscardHandler))
		runAndStop(t, f.run)
		goleak.VerifyNone(t, before)
	})
}

// runAndStop runs a component's loop for a few ticks and waits for it to
// return once its context ends.
func runAndStop(t *testing.T, run func(context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not return 5 s after its context ended")
	}
}

// rig is what a component is built on in a test: a migrated SQLite store,
// the parts over it and engine, a catalog refreshing every period, and a
// healer without a fence. close closes what it opened.
type rig struct {
	store *sqlite.Store
	p     *parts
	sales *catalog
	heal  *healer
}

func newRig(t *testing.T, engine flashsale.StockEngine, period time.Duration) *rig {
	store := mustStore(t)
	log := slog.New(slog.DiscardHandler)
	p := &parts{store: store.Roles(), engine: engine, log: log, now: time.Now, obs: nopObserver{}, instance: "self"}
	sales := newCatalog(store.Roles(), nopObserver{}, log, time.Now, period)
	h := &healer{parts: p, sales: sales, work: &inflight{}, engineMode: func() bool { return true },
		drainer: nopDrainer{}, grace: period, wake: make(chan struct{}, 1)}
	return &rig{store: store, p: p, sales: sales, heal: h}
}

func (r *rig) close() {
	r.sales.close()
	r.store.Close()
}

// mustStore opens and migrates a SQLite store; the caller closes it.
func mustStore(t *testing.T) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "fs.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return store
}
