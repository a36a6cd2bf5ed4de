package funnel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// Defaults of admission.
const (
	// MaxInFlightDefault bounds the purchases one instance works on at
	// once. A purchase that gets past the sold-out flag holds a Redis
	// connection or a group-commit slot for about a millisecond, so 1 024
	// is far more than the engine can use, and little enough memory.
	MaxInFlightDefault = 1024
	// MaxInFlightPerSaleDefault bounds one sale's share, so a flood on a
	// hot sale leaves half the instance to every other sale.
	MaxInFlightPerSaleDefault = MaxInFlightDefault / 2
)

// admission sheds purchase work beyond the bounds at once (503 with
// Retry-After) instead of queueing it: a queue that grows without bound
// turns a burst into seconds of latency for everyone behind it, and the
// guests at the front of the burst would be answered no sooner. It is the
// thread-pool isolation of the source articles without the threads: one
// counter per instance and one per sale.
type admission struct {
	max, perSale int64
	all          atomic.Int64
	sales        sync.Map // sale ID -> *atomic.Int64, for sales that exist
	// limiter counts limits (nil: no limits).
	limiter flashsale.Limiter
	limits  Limits
	// facts looks up what eligibility rules need beyond the token (nil:
	// nothing). See eligible.go.
	facts flashsale.UserFacts
}

func newAdmission(max, perSale int, limiter flashsale.Limiter, limits Limits, facts flashsale.UserFacts) *admission {
	if max <= 0 {
		max = MaxInFlightDefault
	}
	if perSale <= 0 {
		perSale = max / 2
	}
	return &admission{max: int64(max), perSale: int64(min(perSale, max)), limiter: limiter, limits: limits, facts: facts}
}

// Limits are the purchase rates the funnel allows, each counted by the
// Limiter under its own key (a zero Rate is no limit); they are checked
// where a purchase would first cost I/O, right before admission, so a
// sold-out answer costs no limiter round trip.
type Limits struct {
	// PerSale bounds all purchases of one sale together. The source's
	// rule: a refill a little above the rate the sale is expected to sell
	// at, so a burst far beyond what can be sold is turned away first.
	PerSale flashsale.Rate
	// PerUser bounds one user's purchases (a script resubmitting).
	PerUser flashsale.Rate
	// PerIP bounds the purchases from one client address.
	PerIP flashsale.Rate
}

// admitPurchase applies the limits, the narrowest first (a client refused
// for itself spends nothing of the sale's allowance), then admission. A
// sale's own limits (flashsale.SaleLimits) stand in for the instance's
// where it sets them; a per-user or per-address override is counted under
// a key of that sale's, so it neither spends nor is spent by the guest's
// allowance on other sales.
func (s *Service) admitPurchase(ctx context.Context, u flashsale.User, sale *flashsale.Sale, ip string) (*atomic.Int64, error) {
	if s.admit.limiter != nil {
		// Each key is built only when its limit is on: no allocation for
		// a limit that is off.
		own := &sale.Limits
		if r, saleOwn := pick(own.PerIP, s.admit.limits.PerIP); ip != "" && !r.Off() {
			if err := flashsale.Take(ctx, s.admit.limiter, limitKey("buy-ip:", sale.ID, ip, saleOwn), r, s.log); err != nil {
				return nil, err
			}
		}
		if r, saleOwn := pick(own.PerUser, s.admit.limits.PerUser); !r.Off() {
			if err := flashsale.Take(ctx, s.admit.limiter, limitKey("buy-user:", sale.ID, u.ID, saleOwn), r, s.log); err != nil {
				return nil, err
			}
		}
		if r, _ := pick(own.PerSale, s.admit.limits.PerSale); !r.Off() {
			if err := flashsale.Take(ctx, s.admit.limiter, "buy-sale:"+sale.ID, r, s.log); err != nil {
				return nil, err
			}
		}
	}
	return s.admit.enter(sale.ID)
}

// pick is a sale's override where it has one (true), else the default.
func pick(override *flashsale.Rate, def flashsale.Rate) (flashsale.Rate, bool) {
	if override != nil {
		return *override, true
	}
	return def, false
}

// limitKey is the limiter key of who (a user or an address): the
// instance-wide one, or the sale's own when the sale sets the limit.
func limitKey(kind, saleID, who string, saleOwn bool) string {
	if saleOwn {
		return kind + saleID + ":" + who
	}
	return kind + who
}

// enter admits one purchase of saleID or answers ErrOverloaded; the caller
// passes what it returns to leave once the purchase is answered.
func (a *admission) enter(saleID string) (*atomic.Int64, error) {
	if a.all.Add(1) > a.max {
		a.all.Add(-1)
		return nil, flashsale.ErrOverloaded
	}
	c, ok := a.sales.Load(saleID)
	if !ok {
		c, _ = a.sales.LoadOrStore(saleID, new(atomic.Int64))
	}
	n := c.(*atomic.Int64)
	if n.Add(1) > a.perSale {
		n.Add(-1)
		a.all.Add(-1)
		return nil, flashsale.ErrOverloaded
	}
	return n, nil
}

// forget drops a sale's in-flight counter: the sale is deleted or over
// for good (forget.go), so nothing enters it again.
func (a *admission) forget(saleID string) { a.sales.Delete(saleID) }

func (a *admission) leave(n *atomic.Int64) {
	n.Add(-1)
	a.all.Add(-1)
}
