package funnel

import (
	"context"
	"slices"
)

// AdmitStep runs one step of the waiting rooms' admission loop, for tests
// that drive it with their own clock.
func (s *Service) AdmitStep(ctx context.Context) { s.wait.step(ctx) }

// ForgetOver runs one look for sales over for good (forget.go), for tests
// that drive it with their own clock.
func (s *Service) ForgetOver(ctx context.Context) { s.forgetOver(ctx) }

// WaitingSales are the IDs of the live sales the waiting rooms' step
// walks, sorted.
func (s *Service) WaitingSales() []string {
	var ids []string
	for _, sale := range s.sales.waiting() {
		ids = append(ids, sale.ID)
	}
	slices.Sort(ids)
	return ids
}
