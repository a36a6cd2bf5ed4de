package funnel_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
)

// gate stops the first call through it until the test lets it go.
type gate struct {
	once             sync.Once
	entered, proceed chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}), proceed: make(chan struct{})} }

func (g *gate) pass() {
	if g == nil {
		return
	}
	g.once.Do(func() {
		g.entered <- struct{}{}
		<-g.proceed
	})
}

// gatedEngine stops the first Release before it runs and the first Retake
// after it ran, to interleave a reaper and a late payment exactly.
type gatedEngine struct {
	*inmem.Engine
	release, retake *gate
}

func (g *gatedEngine) Release(ctx context.Context, saleID, orderID string) error {
	g.release.pass()
	return g.Engine.Release(ctx, saleID, orderID)
}

func (g *gatedEngine) Retake(ctx context.Context, saleID, orderID string) error {
	err := g.Engine.Retake(ctx, saleID, orderID)
	g.retake.pass()
	return err
}

// mustOpenGated is mustOpen over a gated engine.
func mustOpenGated(tb testing.TB, g *gatedEngine) *env {
	tb.Helper()
	ctx := context.Background()
	c := newClock()
	store, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "fs.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	testenv.Load(tb) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{
		Store: store.Roles(), Engine: flashsale.EngineOf(g), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour,
	})
	if err := svc.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	e := &env{svc: svc, store: store.Roles(), engine: g.Engine, writer: writer, clock: c}
	tb.Cleanup(func() { e.close(tb) })
	return e
}

// TestPaidWhileReaperReleases: a payment arrives after the reaper expired
// a hold in the database but before it released the engine's reservation,
// so the payment's Retake finds the reservation still active and does
// nothing. Whichever of the late Release and the payment's database
// transition comes first, the paid rooms must stay counted in the engine.
func TestPaidWhileReaperReleases(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, e *env, saleID string) {
		t.Helper()
		if n := e.nights(t, saleID)[0]; n.Sold != 1 || n.Available != 0 {
			t.Errorf("night = %+v", n)
		}
		if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: saleID}); err == nil {
			t.Error("bob bought the room alice paid for")
		}
	}
	t.Run("ReleaseAfterPaid", func(t *testing.T) {
		g := &gatedEngine{Engine: inmem.NewEngine(), release: newGate()}
		e := mustOpenGated(t, g)
		s := e.sale(t, nil, 1)
		o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		reaped := make(chan int)
		go func() { reaped <- e.svc.Reap(ctx) }()
		<-g.release.entered // expired in the database, still active in the engine
		p, err := e.svc.MarkPaid(ctx, o.ID, "pay-1")
		if err != nil || p.Status != flashsale.OrderPaid {
			t.Fatalf("paid: %+v, %v", p, err)
		}
		close(g.release.proceed)
		if n := <-reaped; n != 1 {
			t.Fatalf("reaped %d, want 1", n)
		}
		check(t, e, s.ID)
	})
	t.Run("ReleaseBetweenRetakeAndPaid", func(t *testing.T) {
		g := &gatedEngine{Engine: inmem.NewEngine(), release: newGate(), retake: newGate()}
		e := mustOpenGated(t, g)
		s := e.sale(t, nil, 1)
		o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		reaped := make(chan int)
		go func() { reaped <- e.svc.Reap(ctx) }()
		<-g.release.entered
		type result struct {
			o   *flashsale.Order
			err error
		}
		paid := make(chan result)
		go func() { p, err := e.svc.MarkPaid(ctx, o.ID, "pay-1"); paid <- result{p, err} }()
		<-g.retake.entered // the payment's Retake found it active and did nothing
		close(g.release.proceed)
		if n := <-reaped; n != 1 {
			t.Fatalf("reaped %d, want 1", n)
		}
		close(g.retake.proceed)
		if r := <-paid; r.err != nil || r.o.Status != flashsale.OrderPaid {
			t.Fatalf("paid: %+v, %v", r.o, r.err)
		}
		check(t, e, s.ID)
	})
}
