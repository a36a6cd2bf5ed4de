package funnel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/oklog/ulid/v2"
)

// readCountingStore counts the reads a flood of guests could cause.
type readCountingStore struct {
	flashsale.Store
	saleReads, listReads atomic.Int64
}

func (c *readCountingStore) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	c.saleReads.Add(1)
	return c.Store.Sale(ctx, id)
}

func (c *readCountingStore) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	c.listReads.Add(1)
	return c.Store.Sales(ctx, now)
}

// TestCheapReads: 10 000 concurrent views of 10 sale IDs that do not exist
// cost at most one database read per ID, and 10 000 concurrent listings of
// the current sales one read per life of the cached list (its shortest is
// 750 ms: on a loaded machine the flood outlives a few); a sale created
// meanwhile is listed at once. The catalog's own refresh is slowed out of
// the count.
func TestCheapReads(t *testing.T) {
	ctx := context.Background()
	var store *readCountingStore
	e := mustOpenAudit(t, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
		store = &readCountingStore{Store: cfg.Store}
		cfg.Store = flashsale.StoreOf(store)
		cfg.SaleRefresh = time.Hour
	})
	e.sale(t, nil, 5)
	var unknown []string
	for range 10 {
		unknown = append(unknown, ulid.Make().String())
	}
	store.saleReads.Store(0)
	store.listReads.Store(0)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 10_000 {
		wg.Go(func() {
			if _, err := e.svc.PublicSale(ctx, unknown[i%len(unknown)]); !errors.Is(err, flashsale.ErrNotFound) {
				t.Errorf("unknown sale: %v, want not found", err)
			}
			if views, err := e.svc.Sales(ctx); err != nil || len(views) != 1 {
				t.Errorf("sales: %d, %v", len(views), err)
			}
		})
	}
	wg.Wait()
	lives := 1 + int64(time.Since(start)/(750*time.Millisecond)) // listTTL - listJitter
	if n := store.saleReads.Load(); n > int64(len(unknown)) {
		t.Errorf("%d database reads for %d unknown IDs under 10 000 requests, want at most one each", n, len(unknown))
	}
	if n := store.listReads.Load(); n > lives+1 {
		t.Errorf("%d database reads of the sale list under 10 000 requests in %v, want at most %d (one per life of the list, and one more if it expired mid-flood)", n, time.Since(start), lives+1)
	}
	t.Logf("database reads: %d for %d unknown IDs, %d for the list", store.saleReads.Load(), len(unknown), store.listReads.Load())
	e.sale(t, nil, 3)
	if views, err := e.svc.Sales(ctx); err != nil || len(views) != 2 {
		t.Fatalf("after a second sale was created here: %d views, %v", len(views), err)
	}
}

// availableCounter counts the engine's reads of rooms left.
type availableCounter struct {
	flashsale.StockKeeper
	reads atomic.Int64
}

func (c *availableCounter) Available(ctx context.Context, saleID string) ([]int, error) {
	c.reads.Add(1)
	return c.StockKeeper.Available(ctx, saleID)
}

// TestViewsSpareTheEngine: with ViewMaxAge (an engine the instances share,
// Redis), 10 000 concurrent views of a sale and listings of the sales cost
// the engine one read of its rooms left while the copy is young, however
// many guests refresh; the views still show what the engine said, and a
// purchase shows once the copy is older than ViewMaxAge. Without it
// (the in-process engine) every view reads the engine.
func TestViewsSpareTheEngine(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		maxAge time.Duration
	}{{"Shared", 300 * time.Millisecond}, {"InProcess", 0}} {
		t.Run(c.name, func(t *testing.T) {
			var count *availableCounter
			e := mustOpenAudit(t, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
				count = &availableCounter{StockKeeper: cfg.Engine.StockKeeper}
				cfg.Engine.StockKeeper = count
				cfg.ViewMaxAge = c.maxAge
			})
			sale := e.sale(t, nil, 5)
			count.reads.Store(0)
			var wg sync.WaitGroup
			for range 5_000 {
				wg.Go(func() {
					if v, err := e.svc.PublicSale(ctx, sale.ID); err != nil || v.Nights[0].Available != 5 {
						t.Errorf("view: %+v, %v; want 5 rooms left", v, err)
					}
					if _, err := e.svc.Sales(ctx); err != nil {
						t.Errorf("sales: %v", err)
					}
				})
			}
			wg.Wait()
			reads := count.reads.Load()
			t.Logf("%d engine reads for 10 000 views and listings", reads)
			if c.maxAge == 0 {
				if reads < 10_000 {
					t.Fatalf("%d engine reads for 10 000 views without ViewMaxAge, want one each", reads)
				}
				return
			}
			if reads > 3 { // the flood may outlive one copy on a loaded machine
				t.Fatalf("%d engine reads for 10 000 views within ViewMaxAge, want about one", reads)
			}
			if _, err := e.buy(t, flashsale.User{ID: "viewer"}, flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(c.maxAge + 50*time.Millisecond)
			if v, err := e.svc.PublicSale(ctx, sale.ID); err != nil || v.Nights[0].Available != 4 {
				t.Fatalf("a view longer than ViewMaxAge after a purchase: %+v, %v; want 4 rooms left", v, err)
			}
		})
	}
}
