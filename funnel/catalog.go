package funnel

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/maypok86/otter/v2"
	"golang.org/x/sync/singleflight"
)

// catalog is this instance's memory of sales. It keeps every sale it has
// seen by ID, so the purchase path never reads the database to find one; a
// change replaces an entry, never edits it in place, and run brings in
// other instances' changes. It also keeps the reads a flood must not take
// to the database: the IDs of sales that do not exist (a scalper probing, a
// stale link shared a million times) and the list of current sales (every
// guest's landing page). It owns one lock (mu, never held across a call
// out) and one goroutine (run).
type catalog struct {
	store  flashsale.SaleStore
	obs    Observer
	log    *slog.Logger
	now    func() time.Time
	period time.Duration // how often run rereads the current sales

	mu    sync.RWMutex
	sales map[string]*flashsale.Sale
	// queued are those of sales with a waiting room, kept beside sales
	// (set, unset), so the waiting room's step walks its own sales and
	// not every sale of the platform ten times a second.
	queued map[string]*flashsale.Sale
	// misses collapses concurrent cache misses for one sale into one read:
	// the opening second sends thousands of requests for a sale this
	// instance has not seen yet.
	misses singleflight.Group
	// unknown and list are otter caches: bounded, expiring, and Get
	// collapses concurrent misses of a key into one load.
	unknown *otter.Cache[string, struct{}]
	list    *otter.Cache[struct{}, []*flashsale.Sale]
}

// SaleRefreshDefault is how often an instance rereads the current sales
// to pick up other instances' changes: well inside the one second a
// change has to reach every instance.
const SaleRefreshDefault = 500 * time.Millisecond

const (
	// unknownTTL is how long an ID the database did not have is answered
	// 404 from memory. A sale's ID is made when it is created, so no ID
	// is asked for before its sale exists but by guessing.
	unknownTTL = 5 * time.Second
	unknownMax = 100_000
	// listTTL is how long the list of current sales is reused, give or take
	// listJitter so that instances do not all reload it in the same
	// instant. A new sale on this instance shows at once (CreateSale drops
	// the list); one created on another shows within listTTL.
	listTTL    = time.Second
	listJitter = 250 * time.Millisecond
)

func newCatalog(store flashsale.SaleStore, obs Observer, log *slog.Logger, now func() time.Time, period time.Duration) *catalog {
	return &catalog{
		store: store, obs: obs, log: log, now: now, period: period,
		sales: make(map[string]*flashsale.Sale), queued: make(map[string]*flashsale.Sale),
		unknown: otter.Must(&otter.Options[string, struct{}]{
			MaximumSize:      unknownMax,
			ExpiryCalculator: otter.ExpiryWriting[string, struct{}](unknownTTL),
		}),
		list: otter.Must(&otter.Options[struct{}, []*flashsale.Sale]{
			MaximumSize: 1,
			ExpiryCalculator: otter.ExpiryWritingFunc(func(otter.Entry[struct{}, []*flashsale.Sale]) time.Duration {
				return listTTL - listJitter + rand.N(2*listJitter)
			}),
		}),
	}
}

// run picks up changes other instances made to current sales until ctx
// ends.
func (c *catalog) run(ctx context.Context) {
	every(ctx, c.period, nil, func(ctx context.Context) {
		rctx, cancel := context.WithTimeout(ctx, c.period)
		defer cancel()
		if err := c.refresh(rctx); err != nil && ctx.Err() == nil {
			c.log.Debug("sale refresh failed; the cached sales stay until the next", "err", err)
		}
	})
}

// close stops the caches' own goroutines; run has returned.
func (c *catalog) close() {
	c.unknown.StopAllGoroutines()
	c.list.StopAllGoroutines()
}

// put caches sale, replacing what was there.
func (c *catalog) put(sale *flashsale.Sale) {
	c.mu.Lock()
	c.set(sale)
	c.mu.Unlock()
	c.obs.Sale(sale)
}

// putNewer caches sale unless the cache holds a later revision of it.
func (c *catalog) putNewer(sale *flashsale.Sale) {
	c.mu.Lock()
	if old := c.sales[sale.ID]; old == nil || old.Revision <= sale.Revision {
		c.set(sale)
	}
	c.mu.Unlock()
	c.changed()
}

// forget drops a sale this instance deleted: it is unknown from now on.
func (c *catalog) forget(id string) {
	c.drop(id)
	c.unknown.Set(id, struct{}{})
}

// drop removes a sale from the cache; the next read loads it as it is now.
func (c *catalog) drop(id string) {
	c.mu.Lock()
	c.unset(id)
	c.mu.Unlock()
	c.changed()
}

// set caches sale; c.mu is held.
func (c *catalog) set(sale *flashsale.Sale) {
	c.sales[sale.ID] = sale
	if sale.WaitingRoom != nil {
		c.queued[sale.ID] = sale
	} else {
		delete(c.queued, sale.ID)
	}
}

// unset drops a sale from the cache; c.mu is held.
func (c *catalog) unset(id string) {
	delete(c.sales, id)
	delete(c.queued, id)
}

// changed drops the list of current sales, so the next read has the change.
func (c *catalog) changed() { c.list.Invalidate(struct{}{}) }

// get returns a sale from the cache, reading the database on a miss (a
// sale created on another instance).
func (c *catalog) get(ctx context.Context, id string) (*flashsale.Sale, error) {
	if sale := c.cached(id); sale != nil {
		return sale, nil
	}
	if !validID(id) {
		return nil, flashsale.ErrNotFound
	}
	if _, unknown := c.unknown.GetIfPresent(id); unknown {
		return nil, flashsale.ErrNotFound
	}
	v, err, _ := c.misses.Do(id, func() (any, error) {
		// Again inside: a read that finished just before this one began
		// has cached its answer, either way.
		if sale := c.cached(id); sale != nil {
			return sale, nil
		}
		if _, unknown := c.unknown.GetIfPresent(id); unknown {
			return nil, flashsale.ErrNotFound
		}
		sale, err := c.store.Sale(ctx, id)
		if errors.Is(err, flashsale.ErrNotFound) {
			c.unknown.Set(id, struct{}{})
		}
		if err != nil {
			return nil, err
		}
		c.put(sale)
		return sale, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*flashsale.Sale), nil
}

// cached returns the sale this instance holds in memory, or nil.
func (c *catalog) cached(id string) *flashsale.Sale {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.sales[id]
}

// validID rejects IDs no store could hold before they cost a query.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// all are the cached sales.
func (c *catalog) all() []*flashsale.Sale {
	c.mu.RLock()
	defer c.mu.RUnlock()
	sales := make([]*flashsale.Sale, 0, len(c.sales))
	for _, sale := range c.sales {
		sales = append(sales, sale)
	}
	return sales
}

// live are the cached sales that have not ended.
func (c *catalog) live() []string {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var ids []string
	for id, sale := range c.sales {
		if now.Before(sale.EndsAt) {
			ids = append(ids, id)
		}
	}
	return ids
}

// waiting are the cached sales with a waiting room that have not ended.
func (c *catalog) waiting() []*flashsale.Sale {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var sales []*flashsale.Sale
	for _, sale := range c.queued {
		if now.Before(sale.EndsAt) {
			sales = append(sales, sale)
		}
	}
	return sales
}

// isLive says whether id is a cached sale that has not ended.
func (c *catalog) isLive(id string) bool {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	sale := c.sales[id]
	return sale != nil && now.Before(sale.EndsAt)
}

// current is store.Sales(now) through the list cache. The cached list may
// hold a sale that has ended since; callers filter by status at now.
func (c *catalog) current(ctx context.Context) ([]*flashsale.Sale, error) {
	return c.list.Get(ctx, struct{}{}, otter.LoaderFunc[struct{}, []*flashsale.Sale](
		func(ctx context.Context, _ struct{}) ([]*flashsale.Sale, error) {
			return c.store.Sales(ctx, c.now())
		}))
}

// refresh swaps in the current sales whose revision moved, and drops the
// cached ones that are no longer current though they were not due to end
// (closed elsewhere): the next read loads them as they are now. It reads
// the current sales' revisions alone and then each moved sale in full:
// reading every current sale in full, twice a second, was most of an idle
// instance's cost with a thousand live sales (issue 26); a revision moves
// with every change to a sale (SaleStore.UpdateSale, AdjustStock), so the
// pairs miss nothing the full rows would show.
func (c *catalog) refresh(ctx context.Context) error {
	now := c.now()
	revs, err := c.store.Revisions(ctx, now)
	if err != nil {
		return err
	}
	var moved, missing []string
	c.mu.RLock()
	for id, old := range c.sales {
		rev, current := revs[id]
		switch {
		case current && old.Revision < rev:
			moved = append(moved, id)
		case !current && now.Before(old.EndsAt) && old.CreatedAt.Before(now.Add(-time.Second)):
			missing = append(missing, id)
		}
	}
	c.mu.RUnlock()
	changed := false
	defer func() {
		if changed { // even when a read below failed: what was swapped in stays
			c.changed()
		}
	}()
	for _, id := range moved {
		sale, err := c.store.Sale(ctx, id)
		switch {
		case errors.Is(err, flashsale.ErrNotFound): // deleted since: missing next time
			continue
		case err != nil:
			return err
		}
		c.mu.Lock()
		if old := c.sales[id]; old != nil && old.Revision < sale.Revision {
			c.set(sale)
			changed = true
		}
		c.mu.Unlock()
	}
	// A sale missing from the list is read on its own before it is
	// forgotten: absence is no proof. Once, with the database going down,
	// an instance forgot a sale it was selling, and every purchase and
	// order read there then needed the database (CI,
	// TestFaultDatabaseDown/postgres: half the guests who had a 202 read
	// 503 instead of pending).
	for _, id := range missing {
		sale, err := c.store.Sale(ctx, id)
		switch {
		case errors.Is(err, flashsale.ErrNotFound): // deleted elsewhere
		case err != nil:
			return err
		case now.Before(sale.EndsAt): // still current: the list was wrong
			c.log.Warn("the sale list left out a current sale; it stays cached", "sale_id", id)
			c.putNewer(sale)
			continue
		}
		// Closed or deleted elsewhere: the next read loads it as it is now.
		c.mu.Lock()
		c.unset(id)
		c.mu.Unlock()
		changed = true
	}
	return nil
}
