package funnel_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// fakeFacts is a user service that counts what it is asked.
type fakeFacts struct {
	mu    sync.Mutex
	facts map[string]flashsale.Facts
	err   error
	calls int
}

func (f *fakeFacts) Facts(_ context.Context, id string) (flashsale.Facts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return flashsale.Facts{}, f.err
	}
	return f.facts[id], nil
}

func (f *fakeFacts) Calls() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

// TestEligible: each rule refuses with its own error at the token and at
// the purchase; facts the token carries decide their rule without a call;
// the rest come from the user service, and only for a sale with a rule
// that needs them; a user service that cannot answer is a 503.
func TestEligible(t *testing.T) {
	ctx := context.Background()
	facts := &fakeFacts{facts: map[string]flashsale.Facts{
		"direct": {Tier: flashsale.TierPlatinum, Stays30d: 5},
		"ota":    {Tier: flashsale.TierBasic, Stays30d: 0, Channel: "ota-x"},
	}}
	e := mustOpenAudit(t, nil, func(cfg *funnel.Config, _ *inmem.Writer) { cfg.Facts = facts })
	rules := func(el flashsale.Eligibility) func(*flashsale.Sale) {
		return func(s *flashsale.Sale) { s.Eligibility, s.PerUserLimit = el, 10 }
	}
	open := e.sale(t, nil, 100)
	gold := e.sale(t, rules(flashsale.Eligibility{MinTier: flashsale.TierGold}), 100)
	stays := e.sale(t, rules(flashsale.Eligibility{MinStays30d: 2}), 100)
	ota := e.sale(t, rules(flashsale.Eligibility{Channels: []string{"ota-y", "ota-x"}}), 100)
	all := e.sale(t, rules(flashsale.Eligibility{MinTier: flashsale.TierSilver, MinStays30d: 1, Channels: []string{"ota-x"}}), 100)

	claimed := func(id string, tier flashsale.Tier, stays int, channel string) flashsale.User {
		return flashsale.User{ID: id, Tier: tier, Stays30d: stays, Channel: channel,
			Claimed: flashsale.FactTier | flashsale.FactStays30d | flashsale.FactChannel}
	}
	tests := []struct {
		name  string
		user  flashsale.User
		sale  *flashsale.Sale
		want  error // nil: may buy
		calls int   // user-service calls it costs
	}{
		{"NoRulesNoCall", flashsale.User{ID: "direct"}, open, nil, 0},
		{"TierFromToken", claimed("t1", flashsale.TierGold, 0, ""), gold, nil, 0},
		{"TierFromTokenLow", claimed("t2", flashsale.TierSilver, 9, "ota-x"), gold, flashsale.ErrNotEligible, 0},
		{"TierFromService", flashsale.User{ID: "direct"}, gold, nil, 1},
		{"TierFromServiceLow", flashsale.User{ID: "ota"}, gold, flashsale.ErrNotEligible, 1},
		{"TierTokenOverService", flashsale.User{ID: "ota", Tier: flashsale.TierGold, Claimed: flashsale.FactTier}, gold, nil, 0},
		{"StaysFromToken", claimed("t3", "", 2, ""), stays, nil, 0},
		{"StaysFromTokenZero", claimed("t4", flashsale.TierPlatinum, 0, ""), stays, flashsale.ErrNotEligibleStays, 0},
		{"StaysFromService", flashsale.User{ID: "direct", Tier: flashsale.TierGold, Claimed: flashsale.FactTier}, stays, nil, 1},
		{"StaysFromServiceLow", flashsale.User{ID: "ota"}, stays, flashsale.ErrNotEligibleStays, 1},
		{"UnknownUserHasNoFacts", flashsale.User{ID: "stranger"}, stays, flashsale.ErrNotEligibleStays, 1},
		{"ChannelFromToken", claimed("t5", "", 0, "ota-y"), ota, nil, 0},
		{"ChannelFromTokenOther", claimed("t6", "", 0, "ota-z"), ota, flashsale.ErrNotEligibleChannel, 0},
		{"ChannelFromTokenDirect", claimed("t7", flashsale.TierPlatinum, 9, ""), ota, flashsale.ErrNotEligibleChannel, 0},
		{"ChannelFromService", flashsale.User{ID: "ota"}, ota, nil, 1},
		{"ChannelFromServiceDirect", flashsale.User{ID: "direct"}, ota, flashsale.ErrNotEligibleChannel, 1},
		{"AllRules", claimed("t8", flashsale.TierSilver, 1, "ota-x"), all, nil, 0},
		{"AllRulesTierFirst", claimed("t9", flashsale.TierBasic, 0, ""), all, flashsale.ErrNotEligible, 0},
		{"AllRulesStaysSecond", claimed("t10", flashsale.TierGold, 0, ""), all, flashsale.ErrNotEligibleStays, 0},
		{"AllRulesChannelLast", claimed("t11", flashsale.TierGold, 3, "ota-y"), all, flashsale.ErrNotEligibleChannel, 0},
		{"AllRulesOneCall", flashsale.User{ID: "ota", Tier: flashsale.TierGold, Claimed: flashsale.FactTier}, all, flashsale.ErrNotEligibleStays, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := facts.Calls()
			_, err := e.svc.IssueToken(ctx, tt.user, flashsale.TokenRequest{SaleID: tt.sale.ID})
			if err != tt.want {
				t.Fatalf("IssueToken: err = %v, want %v", err, tt.want)
			}
			if got := facts.Calls() - before; got != tt.calls {
				t.Errorf("IssueToken cost %d user-service calls, want %d", got, tt.calls)
			}
			req := flashsale.PurchaseRequest{SaleID: tt.sale.ID}
			if tt.want == nil {
				req.Token = e.token(t, tt.user, tt.sale.ID)
			}
			before = facts.Calls()
			if _, err := e.svc.Purchase(ctx, tt.user, req); err != tt.want {
				t.Fatalf("Purchase: err = %v, want %v", err, tt.want)
			}
			if got := facts.Calls() - before; got != tt.calls {
				t.Errorf("Purchase cost %d user-service calls, want %d", got, tt.calls)
			}
		})
	}
	for _, s := range []*flashsale.Sale{open, gold, stays, ota, all} {
		e.nights(t, s.ID)
	}

	t.Run("ErrFactsUnavailable", func(t *testing.T) {
		facts.mu.Lock()
		facts.err = fmt.Errorf("%w: connection refused", flashsale.ErrFactsUnavailable)
		facts.mu.Unlock()
		defer func() { facts.mu.Lock(); facts.err = nil; facts.mu.Unlock() }()
		before := e.nights(t, stays.ID)[0]
		_, err := e.svc.Purchase(ctx, flashsale.User{ID: "direct"}, flashsale.PurchaseRequest{SaleID: stays.ID})
		if flashsale.ErrorCode(err) != flashsale.EUnavailable {
			t.Fatalf("user service down: err = %v, want unavailable", err)
		}
		// The token decides without the service: still answered.
		if _, err := e.svc.IssueToken(ctx, claimed("t12", "", 3, ""), flashsale.TokenRequest{SaleID: stays.ID}); err != nil {
			t.Fatalf("facts in the token, user service down: %v", err)
		}
		if after := e.nights(t, stays.ID)[0]; after != before {
			t.Fatalf("stock changed: %+v, was %+v", after, before)
		}
	})
}
