package funnel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestStayRules: a purchase breaking a night's rule is 409 with the
// rule's code and a message naming the night; an operator's stop-sell
// mid-sale closes the night at once without taking back rooms held or
// sold, and a reopen sells it again.
func TestStayRules(t *testing.T) {
	ctx := context.Background()
	e := mustOpen(t)
	s := e.sale(t, func(s *flashsale.Sale) {
		s.PerUserLimit = 5
		s.Nights[1].MinStay = 2
	}, 5, 5, 5, 5)
	refused := func(u flashsale.User, checkIn string, nights int, code string) {
		t.Helper()
		_, err := e.buy(t, u, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: checkIn, Nights: nights})
		if flashsale.ErrorCode(err) != code || !strings.Contains(flashsale.ErrorMessage(err), code+": ") {
			t.Fatalf("buy %s+%d = %v, want %s", checkIn, nights, err, code)
		}
	}
	refused(alice, testenv.Night(1), 1, flashsale.EMinStay)
	held, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(1), Nights: 2})
	if err != nil {
		t.Fatal(err)
	}

	yes, no := true, false
	v, err := e.svc.SetNightRules(ctx, s.ID, testenv.Night(2), flashsale.StayRulesPatch{StopSell: &yes})
	if err != nil {
		t.Fatalf("stop-sell: %v", err)
	}
	if !v.Sale.Nights[2].StopSell || v.Sale.Nights[1].MinStay != 2 {
		t.Fatalf("after the stop-sell the nights are %+v: the patch sets stop_sell and keeps the other rules", v.Sale.Nights)
	}
	if n := e.nights(t, s.ID)[2]; n.Held != 1 || n.Available != 4 {
		t.Fatalf("night 2 after the stop-sell = %+v, want alice's room still held", n)
	}
	refused(bob, testenv.Night(2), 1, flashsale.EStopSell)
	refused(bob, testenv.Night(0), 3, flashsale.EStopSell)
	if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(3)}); err != nil {
		t.Fatalf("a stay without the closed night: %v", err)
	}
	if o, err := e.svc.MarkPaid(ctx, held.ID, "pay-1"); err != nil || o.Status != flashsale.OrderPaid {
		t.Fatalf("paying a hold through a stop-sold night = %+v, %v: the stop-sell takes nothing back", o, err)
	}

	if _, err := e.svc.SetNightRules(ctx, s.ID, testenv.Night(2), flashsale.StayRulesPatch{StopSell: &no}); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if _, err := e.buy(t, bob, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(2)}); err != nil {
		t.Fatalf("after the reopen: %v", err)
	}
	changes, err := e.svc.SaleChanges(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, c := range changes {
		if c.Kind == flashsale.ChangeRules {
			logged = append(logged, c.Detail)
		}
	}
	if want := []string{testenv.Night(2) + ": stop_sell", testenv.Night(2) + ": none"}; strings.Join(logged, "|") != strings.Join(want, "|") {
		t.Errorf("change log of the rules = %q, want %q", logged, want)
	}

	t.Run("BadChange", func(t *testing.T) {
		three, one := 3, 1
		for name, c := range map[string]struct {
			date string
			p    flashsale.StayRulesPatch
			code string
		}{
			"NotANight":      {testenv.Night(9), flashsale.StayRulesPatch{StopSell: &yes}, flashsale.EInvalid},
			"MaxBelowMin":    {testenv.Night(1), flashsale.StayRulesPatch{MaxStay: &one}, flashsale.EInvalid},
			"DepartureFirst": {testenv.Night(0), flashsale.StayRulesPatch{ClosedToDeparture: &yes}, flashsale.EInvalid},
			"Fine":           {testenv.Night(3), flashsale.StayRulesPatch{MaxStay: &three}, ""},
		} {
			t.Run(name, func(t *testing.T) {
				before, _ := e.svc.AdminSale(ctx, s.ID)
				_, err := e.svc.SetNightRules(ctx, s.ID, c.date, c.p)
				if flashsale.ErrorCode(err) != c.code {
					t.Fatalf("SetNightRules = %v, want %q", err, c.code)
				}
				after, _ := e.svc.AdminSale(ctx, s.ID)
				if c.code != "" && after.Sale.Revision != before.Sale.Revision {
					t.Errorf("a refused change moved the revision %d -> %d", before.Sale.Revision, after.Sale.Revision)
				}
			})
		}
	})
	t.Run("Ended", func(t *testing.T) {
		e.clock.Advance(2 * time.Hour)
		if _, err := e.svc.SetNightRules(ctx, s.ID, testenv.Night(3), flashsale.StayRulesPatch{StopSell: &yes}); err == nil {
			t.Fatal("a stop-sell after the sale ended was accepted")
		}
	})
}

// TestStayRulesEngineJudges: the engine's refusal reaches the guest
// naming the night's date, as the funnel's own check would. The rules are
// set in the engine alone, as when another instance's stop-sell reached
// the engine before this instance reread the sale.
func TestStayRulesEngineJudges(t *testing.T) {
	ctx := context.Background()
	e := mustOpen(t)
	s := e.sale(t, nil, 5, 5)
	if err := e.engine.SetStayRules(ctx, s.ID, []flashsale.StayRules{{}, {StopSell: true}}); err != nil {
		t.Fatal(err)
	}
	_, err := e.buy(t, alice, flashsale.PurchaseRequest{SaleID: s.ID, CheckIn: testenv.Night(0), Nights: 2})
	if !errors.Is(err, flashsale.ErrStopSell) && flashsale.ErrorCode(err) != flashsale.EStopSell {
		t.Fatalf("buy through a night the engine closed = %v, want stop_sell", err)
	}
	if msg := flashsale.ErrorMessage(err); !strings.Contains(msg, testenv.Night(1)) {
		t.Errorf("message %q does not name the closed night %s", msg, testenv.Night(1))
	}
	if n := e.nights(t, s.ID); n[0].Held != 0 || n[1].Held != 0 {
		t.Errorf("the refusal took rooms: %+v", n)
	}
}
