package funnel_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// flakyList is a store whose sale list (and the revisions of its sales)
// can come back short without an error, and whose sale reads can fail as
// a database that went down does.
type flakyList struct {
	flashsale.Store
	short, down atomic.Bool
}

func (f *flakyList) Sales(ctx context.Context, now time.Time) ([]*flashsale.Sale, error) {
	if f.short.Load() {
		return []*flashsale.Sale{}, nil
	}
	return f.Store.Sales(ctx, now)
}

func (f *flakyList) Revisions(ctx context.Context, now time.Time) (map[string]int64, error) {
	if f.short.Load() {
		return map[string]int64{}, nil
	}
	return f.Store.Revisions(ctx, now)
}

func (f *flakyList) Sale(ctx context.Context, id string) (*flashsale.Sale, error) {
	if f.down.Load() {
		return nil, flashsale.ErrUnavailable
	}
	return f.Store.Sale(ctx, id)
}

// TestRefreshKeepsListedOut: a sale the refresh's list leaves out while it
// is still current stays cached, so the instance goes on answering for it
// from memory when the database goes down. Before, the refresh forgot it
// (CI, TestFaultDatabaseDown/postgres: half the guests holding a 202 read
// 503 for their order during the outage instead of pending).
func TestRefreshKeepsListedOut(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	store := &flakyList{Store: mustSQLite(t, filepath.Join(t.TempDir(), "fs.db")).Roles()}
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	svc := funnel.New(funnel.Config{Store: flashsale.StoreOf(store), Engine: inmem.NewEngine().Roles(), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour, SaleRefresh: 20 * time.Millisecond})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(); writer.Close(); store.Close() })
	e := &env{svc: svc, store: flashsale.StoreOf(store), clock: c}
	s := e.sale(t, func(s *flashsale.Sale) { s.Nights = []flashsale.Night{{Date: day(e, 21), Stock: 5}} })
	c.Advance(5 * time.Second) // no longer a sale created this second
	store.short.Store(true)
	time.Sleep(200 * time.Millisecond) // ten refreshes
	store.down.Store(true)
	if _, err := svc.PublicSale(ctx, s.ID); err != nil {
		t.Fatalf("PublicSale with the database down after the sale was left out of the list: %v", err)
	}
	// A sale closed elsewhere is still forgotten: the next read loads it
	// as it is now.
	store.down.Store(false)
	ended := *s
	ended.EndsAt = c.Now().Add(-time.Second)
	ended.Revision++
	if err := store.UpdateSale(ctx, &ended, s.Revision, flashsale.SaleChange{SaleID: s.ID, At: c.Now(), Kind: flashsale.ChangeClose, Detail: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	v, err := svc.PublicSale(ctx, s.ID)
	if err != nil || v.Status != "ended" {
		t.Fatalf("after a close elsewhere: %+v, %v; want the sale ended", v, err)
	}
}
