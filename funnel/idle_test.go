package funnel_test

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// idleStore counts the reads the catalog's refresh and the phantom watch
// make, per sale and batched.
type idleStore struct {
	flashsale.Store
	sale, sales, revisions, nightStocks, nightStocksOf atomic.Int64
}

func (s *idleStore) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	s.sale.Add(1)
	return s.Store.Sale(ctx, id)
}

func (s *idleStore) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	s.sales.Add(1)
	return s.Store.Sales(ctx, now)
}

func (s *idleStore) Revisions(ctx context.Context, now time.Time) (map[string]int64, error) {
	s.revisions.Add(1)
	return s.Store.Revisions(ctx, now)
}

func (s *idleStore) NightStocks(ctx context.Context, id string) ([]flashsale.NightStock, error) {
	s.nightStocks.Add(1)
	return s.Store.NightStocks(ctx, id)
}

func (s *idleStore) NightStocksOf(ctx context.Context, ids []string) (map[string][]flashsale.NightStock, error) {
	s.nightStocksOf.Add(1)
	return s.Store.NightStocksOf(ctx, ids)
}

// idleKeeper counts the engine's reads of units left.
type idleKeeper struct {
	flashsale.StockKeeper
	available, availableOf atomic.Int64
}

func (k *idleKeeper) Available(ctx context.Context, id string) ([]int, error) {
	k.available.Add(1)
	return k.StockKeeper.Available(ctx, id)
}

func (k *idleKeeper) AvailableOf(ctx context.Context, ids []string) (map[string][]int, error) {
	k.availableOf.Add(1)
	return k.StockKeeper.AvailableOf(ctx, ids)
}

// TestIdleSalesCostNoReadEach (issue 26, item 4): live sales nobody buys
// cost the catalog's refresh and the phantom watch no read per sale, only
// their one batched read each per round: the refresh reads the revisions
// and the watch the engine's and the database's figures for all the sales
// at once. Before, every refresh read every sale in full and every watch
// made two reads per sale. A change made elsewhere still shows within the
// refresh, at the cost of reading that one sale.
func TestIdleSalesCostNoReadEach(t *testing.T) {
	ctx := context.Background()
	var store *idleStore
	var keeper *idleKeeper
	e := mustOpenAudit(t, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
		store = &idleStore{Store: cfg.Store}
		cfg.Store = flashsale.StoreOf(store)
		keeper = &idleKeeper{StockKeeper: cfg.Engine.StockKeeper}
		cfg.Engine.StockKeeper = keeper
		cfg.AuditInterval, cfg.PhantomInterval, cfg.SaleRefresh = time.Hour, 20*time.Millisecond, 20*time.Millisecond
	})
	var sales []*flashsale.Sale
	for range 20 {
		sales = append(sales, e.sale(t, nil, 5, 5))
	}
	e.clock.Advance(5 * time.Second) // no longer sales created this second
	time.Sleep(100 * time.Millisecond)
	for _, n := range []*atomic.Int64{&store.sale, &store.sales, &store.revisions, &store.nightStocks, &store.nightStocksOf, &keeper.available, &keeper.availableOf} {
		n.Store(0)
	}
	time.Sleep(300 * time.Millisecond) // about fifteen refreshes and watches
	if n := store.revisions.Load(); n == 0 {
		t.Fatal("no refresh ran")
	}
	if n := keeper.availableOf.Load(); n == 0 || store.nightStocksOf.Load() != n {
		t.Fatalf("%d engine reads and %d database reads of all the sales; want one of each per watch", n, store.nightStocksOf.Load())
	}
	if got := [...]int64{store.sale.Load(), store.sales.Load(), store.nightStocks.Load(), keeper.available.Load()}; got != [4]int64{} {
		t.Fatalf("while nobody buys: %d sale reads, %d reads of every sale in full, %d night reads, %d engine reads of one sale; want none",
			got[0], got[1], got[2], got[3])
	}

	// A change made elsewhere (straight in the database) shows within the
	// refresh, and only the changed sale is read.
	s := sales[7]
	changed := *s
	changed.Title = "Changed elsewhere"
	if err := store.Store.UpdateSale(ctx, &changed, s.Revision, flashsale.SaleChange{SaleID: s.ID, At: e.clock.Now(), Kind: flashsale.ChangeEdit, Detail: "title"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		v, err := e.svc.PublicSale(ctx, s.ID)
		if err == nil && v.Title == changed.Title {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second after a change elsewhere: %+v, %v; want the new title", v, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := store.sale.Load(); n != 1 {
		t.Fatalf("%d sale reads after one sale changed elsewhere, want 1", n)
	}
}

// TestWaitingStepIsFlat (issue 26, item 4): the waiting rooms' step walks
// the sales with a waiting room, not every live sale: a step allocates as
// much beside 1 000 sales without one as beside 10 (before, it listed every
// live sale's ID ten times a second). A sale whose waiting room is turned
// off, or that is deleted, leaves the step's sales.
func TestWaitingStepIsFlat(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t)
	later := func(s *flashsale.Sale) { // not open yet: the step reads nothing of it
		s.StartsAt, s.EndsAt = e.clock.Now().Add(time.Hour), e.clock.Now().Add(2*time.Hour)
	}
	queued := func(s *flashsale.Sale) {
		later(s)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 10, AdmitPerSecond: 40, AdmissionSeconds: 30}
	}
	a, b := e.sale(t, queued, 5), e.sale(t, queued, 5)
	// The fewest a step allocates over tries spread across a tenth of a
	// second: AllocsPerRun counts the whole process's allocations, and the
	// service's own loops (the catalog's refresh walking every sale)
	// sometimes run beside it. CI once counted 34 beside 1 000 sales; what
	// the step itself allocates is the floor.
	allocs := func() float64 {
		least := math.Inf(1)
		for range 20 {
			least = min(least, testing.AllocsPerRun(50, func() { e.svc.AdmitStep(ctx) }))
			time.Sleep(5 * time.Millisecond)
		}
		return least
	}
	for range 10 {
		e.sale(t, later, 5)
	}
	few := allocs()
	for range 990 {
		e.sale(t, later, 5)
	}
	if many := allocs(); many > few {
		t.Errorf("a step allocates %.0f times beside 1 000 sales without a waiting room, %.0f beside 10; want no more", many, few)
	}
	want := []string{a.ID, b.ID}
	slices.Sort(want)
	if got := e.svc.WaitingSales(); !slices.Equal(got, want) {
		t.Fatalf("the step's sales: %v, want the two with a waiting room %v", got, want)
	}
	var off *flashsale.WaitingRoom
	if _, err := e.svc.UpdateSale(ctx, a.ID, flashsale.SalePatch{WaitingRoom: &off}); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.WaitingSales(); !slices.Equal(got, []string{b.ID}) {
		t.Fatalf("after %s's waiting room was turned off the step's sales are %v, want [%s]", a.ID, got, b.ID)
	}
	if _, err := e.svc.CloseSale(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.WaitingSales(); len(got) != 0 {
		t.Fatalf("after %s was closed the step's sales are %v, want none", b.ID, got)
	}
}
