package funnel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestPauseResume(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, nil, 5)
	early := e.token(t, alice, s.ID) // issued before the pause
	v, err := e.svc.PauseSale(ctx, s.ID, true)
	if err != nil || !v.Paused || v.Status != flashsale.SalePaused {
		t.Fatalf("PauseSale = %+v, %v", v, err)
	}
	if _, err := e.svc.IssueToken(ctx, bob, flashsale.TokenRequest{SaleID: s.ID}); !errors.Is(err, flashsale.ErrPaused) {
		t.Fatalf("IssueToken while paused = %v, want ErrPaused", err)
	}
	if _, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: early}); !errors.Is(err, flashsale.ErrPaused) {
		t.Fatalf("Purchase while paused = %v, want ErrPaused", err)
	}
	if pv, err := e.svc.PublicSale(ctx, s.ID); err != nil || pv.Status != flashsale.SalePaused {
		t.Fatalf("PublicSale while paused = %+v, %v", pv, err)
	}
	if v, err := e.svc.PauseSale(ctx, s.ID, true); err != nil || v.Revision != 1 {
		t.Fatalf("second pause = %+v, %v: want idempotent at revision 1", v, err)
	}
	if v, err := e.svc.PauseSale(ctx, s.ID, false); err != nil || v.Paused || v.Status != flashsale.SaleActive || v.Revision != 2 {
		t.Fatalf("resume = %+v, %v", v, err)
	}
	if _, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Token: early}); err != nil {
		t.Fatalf("Purchase after resume with the token from before the pause: %v", err)
	}
	cs, err := e.svc.SaleChanges(ctx, s.ID)
	if err != nil || len(cs) != 2 || cs[0].Kind != flashsale.ChangePause || cs[1].Kind != flashsale.ChangeResume || cs[1].Revision != 2 {
		t.Fatalf("changes = %+v, %v", cs, err)
	}
	e.nights(t, s.ID)
}

func TestCloseSale(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, nil, 5)
	o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.svc.CloseSale(ctx, s.ID)
	if err != nil || v.Status != flashsale.SaleEnded || v.EndsAt.After(e.clock.Now()) {
		t.Fatalf("CloseSale = %+v, %v", v, err)
	}
	if _, err := e.svc.IssueToken(ctx, bob, flashsale.TokenRequest{SaleID: s.ID}); !errors.Is(err, flashsale.ErrEnded) {
		t.Fatalf("IssueToken after close = %v, want ErrEnded", err)
	}
	// The hold taken before the close stays payable.
	if paid, err := e.svc.MarkPaid(ctx, o.ID, "pay-1"); err != nil || paid.Status != flashsale.OrderPaid {
		t.Fatalf("MarkPaid after close = %+v, %v", paid, err)
	}
	if v2, err := e.svc.CloseSale(ctx, s.ID); err != nil || v2.Revision != v.Revision {
		t.Fatalf("second close = %+v, %v: want idempotent", v2, err)
	}
	if _, err := e.svc.PauseSale(ctx, s.ID, true); flashsale.ErrorCode(err) != flashsale.EEnded {
		t.Fatalf("pause after close = %v, want ended", err)
	}
	// An upcoming sale closes too: it never opens.
	up := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt = e.clock.Now().Add(time.Hour)
		s.EndsAt = s.StartsAt.Add(time.Hour)
	}, 3)
	if v, err := e.svc.CloseSale(ctx, up.ID); err != nil || v.Status != flashsale.SaleEnded || !v.StartsAt.Before(v.EndsAt) {
		t.Fatalf("CloseSale(upcoming) = %+v, %v", v, err)
	}
}

func TestUpdateSale(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	str := func(s string) *string { return &s }
	t.Run("BeforeStart", func(t *testing.T) {
		s := e.sale(t, func(s *flashsale.Sale) {
			s.StartsAt = e.clock.Now().Add(time.Hour)
			s.EndsAt = s.StartsAt.Add(time.Hour)
		}, 3)
		nights := []flashsale.Night{{Date: s.Nights[0].Date, Stock: 7}, {Date: testenv.Night(1), Stock: 2}}
		price := int64(29900)
		v, err := e.svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{Nights: nights, Price: &price, Description: str("Sea view")})
		if err != nil {
			t.Fatal(err)
		}
		if v.Price != price || v.Description != "Sea view" || len(v.Nights) != 2 || v.Revision != 1 {
			t.Fatalf("view = %+v", v)
		}
		// The engine was reloaded with the new nights.
		avail, err := e.engine.Available(ctx, s.ID)
		if err != nil || len(avail) != 2 || avail[0] != 7 || avail[1] != 2 {
			t.Fatalf("engine available = %v, %v; want [7 2]", avail, err)
		}
		cs, _ := e.svc.SaleChanges(ctx, s.ID)
		if len(cs) != 1 || cs[0].Detail != "description, nights, price" {
			t.Fatalf("changes = %+v", cs)
		}
	})
	t.Run("AfterStart", func(t *testing.T) {
		s := e.sale(t, nil, 3)
		ends := e.clock.Now().Add(3 * time.Hour)
		v, err := e.svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{Title: str("Last rooms"), EndsAt: &ends})
		if err != nil || v.Title != "Last rooms" || !v.EndsAt.Equal(ends.UTC().Truncate(time.Millisecond)) {
			t.Fatalf("UpdateSale(title, ends_at) = %+v, %v", v, err)
		}
		if pv, _ := e.svc.PublicSale(ctx, s.ID); pv.Title != "Last rooms" {
			t.Fatalf("public view title %q: the cache kept the old sale", pv.Title)
		}
		price := int64(1)
		for name, p := range map[string]flashsale.SalePatch{
			"price":          {Price: &price},
			"nights":         {Nights: []flashsale.Night{{Date: s.Nights[0].Date, Stock: 99}}},
			"per_user_limit": {PerUserLimit: new(5)},
		} {
			_, err := e.svc.UpdateSale(ctx, s.ID, p)
			if flashsale.ErrorCode(err) != flashsale.EAlreadyStarted {
				t.Errorf("UpdateSale(%s) after the start = %v, want already_started", name, err)
			}
		}
		past := e.clock.Now().Add(-time.Second)
		if _, err := e.svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{EndsAt: &past}); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("ends_at in the past = %v, want invalid", err)
		}
		if _, err := e.svc.UpdateSale(ctx, s.ID, flashsale.SalePatch{Title: str("")}); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("empty title = %v, want invalid", err)
		}
		if v, _ := e.svc.AdminSale(ctx, s.ID); v.Revision != 1 || v.Nights[0].Stock != 3 {
			t.Errorf("after refused edits: %+v, want revision 1 and stock 3", v)
		}
		e.nights(t, s.ID)
	})
	t.Run("NotFound", func(t *testing.T) {
		if _, err := e.svc.UpdateSale(ctx, "01NOSUCHSALE0000000000000", flashsale.SalePatch{Title: str("x")}); !errors.Is(err, flashsale.ErrNotFound) {
			t.Fatalf("UpdateSale(unknown) = %v", err)
		}
	})
}

func TestAdjustStock(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	s := e.sale(t, func(s *flashsale.Sale) { s.PerUserLimit = 5 }, 1, 1)
	date := s.Nights[0].Date
	if _, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID}); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("second guest = %v, want sold out", err)
	}
	v, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: date, Delta: 2})
	if err != nil || v.Nights[0].Stock != 3 || v.Nights[0].Available != 2 {
		t.Fatalf("AdjustStock(+2) = %+v, %v", v, err)
	}
	// Buyable at once.
	if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID}); err != nil {
		t.Fatalf("purchase of an added room: %v", err)
	}
	// One room left free on the night: taking two is refused, changing nothing.
	if _, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: date, Delta: -2}); !errors.Is(err, flashsale.ErrStockInUse) {
		t.Fatalf("AdjustStock(-2 of 1 free) = %v, want ErrStockInUse", err)
	}
	if ns := e.nights(t, s.ID); ns[0].Stock != 3 || ns[0].Available != 1 {
		t.Fatalf("after the refusal: %+v", ns[0])
	}
	if v, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: date, Delta: -1}); err != nil || v.Nights[0].Stock != 2 || v.Nights[0].Available != 0 {
		t.Fatalf("AdjustStock(-1) = %+v, %v", v, err)
	}
	if _, err := e.buy(t, carol, flashsale.PurchaseRequest{SaleID: s.ID}); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("purchase after the last free room was taken back = %v, want sold out", err)
	}
	if _, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: testenv.Night(8), Delta: 1}); flashsale.ErrorCode(err) != flashsale.EInvalid {
		t.Fatalf("AdjustStock(a date not on sale) = %v, want invalid", err)
	}
	if pv, _ := e.svc.PublicSale(ctx, s.ID); pv.Nights[0].Stock != 2 {
		t.Fatalf("public view stock %d, want 2", pv.Nights[0].Stock)
	}
	cs, _ := e.svc.SaleChanges(ctx, s.ID)
	if len(cs) != 2 || cs[0].Detail != date+" +2" || cs[1].Detail != date+" -1" {
		t.Fatalf("changes = %+v", cs)
	}
	e.nights(t, s.ID)
}

// TestLifecycleStorm buys from 2 000 goroutines while operators add and
// take back rooms and pause and resume the sale: no night is oversold
// (I1), no user is over the limit (I3), no key holds two orders (I4), and
// the engine equals the database afterwards.
func TestLifecycleStorm(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	const guests, stock = 2000, 100
	s := e.sale(t, nil, stock, stock)
	var added, removed [2]atomic.Int64
	var paused atomic.Int64
	// Operators: two add a room at a time, two take one back, 60 times
	// each, alternating nights; one pauses and resumes 20 times.
	var ops sync.WaitGroup
	for i := range 4 {
		ops.Go(func() {
			for n := range 60 {
				night := n % 2
				d := flashsale.StockDelta{Date: s.Nights[night].Date, Delta: 1}
				if i%2 == 1 {
					d.Delta = -1
				}
				switch _, err := e.svc.AdjustStock(ctx, s.ID, d); {
				case err == nil && d.Delta > 0:
					added[night].Add(1)
				case err == nil:
					removed[night].Add(1)
				case !errors.Is(err, flashsale.ErrStockInUse):
					t.Errorf("AdjustStock(%v): %v", d, err)
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	ops.Go(func() {
		defer func() {
			if _, err := e.svc.PauseSale(ctx, s.ID, false); err != nil {
				t.Errorf("resume: %v", err)
			}
		}()
		for n := range 20 {
			if _, err := e.svc.PauseSale(ctx, s.ID, n%2 == 0); err != nil {
				t.Errorf("pause/resume: %v", err)
				return
			}
			paused.Add(1)
			time.Sleep(time.Millisecond)
		}
	})
	opsDone := make(chan struct{})
	go func() { ops.Wait(); close(opsDone) }()
	// Guests: each tries until it holds a room or the operators are done
	// (a sold-out or paused answer may change while they work).
	var wg sync.WaitGroup
	var held, refused atomic.Int64
	for i := range guests {
		wg.Go(func() {
			u := flashsale.User{ID: fmt.Sprintf("guest-%d", i)}
			for {
				tok, err := e.svc.IssueToken(ctx, u, flashsale.TokenRequest{SaleID: s.ID})
				if err == nil {
					_, err = e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: s.ID, Token: tok.Token, Nights: 2, IdempotencyKey: "k"})
				}
				switch {
				case err == nil:
					held.Add(1)
					return
				case errors.Is(err, flashsale.ErrPaused), errors.Is(err, flashsale.ErrSoldOut),
					errors.Is(err, flashsale.ErrOverloaded): // shed: retry, as a page would
				default:
					t.Errorf("guest %d: %v", i, err)
					return
				}
				select {
				case <-opsDone:
					refused.Add(1)
					return
				case <-time.After(time.Duration(20+i%10) * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	<-opsDone
	if added[0].Load()+added[1].Load() == 0 || removed[0].Load()+removed[1].Load() == 0 || paused.Load() == 0 {
		t.Fatalf("the storm did not exercise the lifecycle: added %v, removed %v, pauses %d", &added, &removed, paused.Load())
	}
	ns := e.nights(t, s.ID) // I1 and engine == database
	for i, n := range ns {
		if want := stock + int(added[i].Load()-removed[i].Load()); n.Stock != want {
			t.Errorf("night %s: stock %d, want %d + %d added - %d taken back", n.Date, n.Stock, stock, added[i].Load(), removed[i].Load())
		}
		if n.Held+n.Sold != int(held.Load()) {
			t.Errorf("night %s: held+sold %d, %d guests got a 202", n.Date, n.Held+n.Sold, held.Load())
		}
	}
	a, err := e.svc.Audit(ctx, s.ID)
	if err != nil || !a.Balanced() {
		t.Fatalf("audit = %+v, %v", a, err)
	}
	t.Logf("%d held, %d sold out, %d pause toggles; stock now %d/%d", held.Load(), refused.Load(), paused.Load(), ns[0].Stock, ns[1].Stock)
}

// TestTestSale: a test sale sells like any other, is left out of the
// public list, and is deleted with its orders; a real one is not.
func TestTestSale(t *testing.T) {
	e := mustOpen(t)
	ctx := context.Background()
	real := e.sale(t, nil, 5)
	test := e.sale(t, func(s *flashsale.Sale) { s.Test = true }, 5)
	o, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: test.ID})
	if err != nil {
		t.Fatal(err)
	}
	views, err := e.svc.Sales(ctx)
	if err != nil || len(views) != 1 || views[0].ID != real.ID {
		t.Fatalf("Sales = %d views (%v), want only the real sale", len(views), err)
	}
	if v, err := e.svc.PublicSale(ctx, test.ID); err != nil || !v.Test {
		t.Fatalf("PublicSale(test sale) = %+v, %v: its page is the load test's", v, err)
	}
	if err := e.svc.DeleteSale(ctx, real.ID); !errors.Is(err, flashsale.ErrNotTestSale) {
		t.Fatalf("DeleteSale(real) = %v, want ErrNotTestSale", err)
	}
	if err := e.svc.DeleteSale(ctx, test.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PublicSale(ctx, test.ID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Fatalf("PublicSale(deleted) = %v, want ErrNotFound", err)
	}
	if _, err := e.svc.Order(ctx, alice, o.ID); !errors.Is(err, flashsale.ErrNotFound) {
		t.Fatalf("Order of the deleted sale = %v, want ErrNotFound", err)
	}
	if _, err := e.svc.AdminSale(ctx, real.ID); err != nil {
		t.Fatalf("the real sale: %v", err)
	}
}

// muteEngine stops answering Available (AvailableOf, Missing) once mute is set, as a Redis shard
// past its command timeout would, after a change's own steps succeeded.
type muteEngine struct {
	*inmem.Engine
	mute atomic.Bool
}

func (m *muteEngine) Available(ctx context.Context, saleID string) ([]int, error) {
	if m.mute.Load() {
		return nil, fmt.Errorf("%w: available: i/o timeout", flashsale.ErrUnavailable)
	}
	return m.Engine.Available(ctx, saleID)
}

func (m *muteEngine) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	if m.mute.Load() {
		return nil, fmt.Errorf("%w: available of: i/o timeout", flashsale.ErrUnavailable)
	}
	return m.Engine.AvailableOf(ctx, saleIDs)
}

func (m *muteEngine) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	if m.mute.Load() {
		return nil, fmt.Errorf("%w: missing: i/o timeout", flashsale.ErrUnavailable)
	}
	return m.Engine.Missing(ctx, saleIDs)
}

// TestSavedChangeAnswers: a change that is saved answers as saved even
// when the engine does not answer for the view that follows it, with the
// database's figures. A 503 there had a retrying operator add the rooms
// twice (TestDistributedLifecycle's books came out two rooms apart).
func TestSavedChangeAnswers(t *testing.T) {
	var m *muteEngine
	e := mustOpenAudit(t, func(e *inmem.Engine) flashsale.StockEngine { m = &muteEngine{Engine: e}; return flashsale.EngineOf(m) }, nil)
	ctx := context.Background()
	s := e.sale(t, nil, 3)
	date := s.Nights[0].Date
	m.mute.Store(true)
	if _, err := e.svc.AdminSale(ctx, s.ID); !flashsale.Unreachable(err) {
		t.Fatalf("AdminSale with the engine mute = %v, want unavailable (a plain read says so)", err)
	}
	v, err := e.svc.AdjustStock(ctx, s.ID, flashsale.StockDelta{Date: date, Delta: 2})
	if err != nil || v.Nights[0].Stock != 5 || v.Nights[0].Available != 5 {
		t.Fatalf("AdjustStock(+2) with the engine mute for the view = %+v, %v; want saved, stock 5", v, err)
	}
	v, err = e.svc.PauseSale(ctx, s.ID, true)
	if err != nil || !v.Paused || v.Nights[0].Stock != 5 {
		t.Fatalf("PauseSale with the engine mute for the view = %+v, %v; want saved", v, err)
	}
	m.mute.Store(false)
	if a, _ := e.engine.Available(ctx, s.ID); a[0] != 5 {
		t.Fatalf("engine available %v, want the 5 the change made", a)
	}
	if ns := e.nights(t, s.ID); ns[0].Stock != 5 {
		t.Fatalf("database stock %d, want 5", ns[0].Stock)
	}
}
