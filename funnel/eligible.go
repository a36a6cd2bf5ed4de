package funnel

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
)

// eligible returns nil when u may buy in sale, else the error of the first
// rule u fails. The user service is asked only for facts a rule needs and
// the token did not carry: a sale without rules, or one whose rules the
// token decides, costs no call. Without a user service a fact the token
// lacks is its zero value (no tier, no stays, no channel), which no rule
// accepts.
func (s *Service) eligible(ctx context.Context, u flashsale.User, sale *flashsale.Sale) error {
	e := &sale.Eligibility
	need := e.Needs() &^ u.Claimed
	if need != 0 && s.admit.facts != nil {
		f, err := s.admit.facts.Facts(ctx, u.ID)
		if err != nil {
			return fmt.Errorf("eligible: sale=%s user=%s: %w", sale.ID, u.ID, err)
		}
		u = u.With(f, need)
	}
	return e.Check(u)
}
