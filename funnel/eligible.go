package funnel

import (
	"context"

	"github.com/flashsale/flashsale"
)

// eligible returns ErrNotEligible when u may not buy in sale.
func (s *Service) eligible(_ context.Context, u flashsale.User, sale *flashsale.Sale) error {
	if !sale.Eligibility.Allows(u.Tier) {
		return flashsale.ErrNotEligible
	}
	return nil
}
