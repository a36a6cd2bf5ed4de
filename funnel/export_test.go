package funnel

import "context"

// AdmitStep runs one step of the waiting rooms' admission loop, for tests
// that drive it with their own clock.
func (s *Service) AdmitStep(ctx context.Context) { s.wait.step(ctx) }

// ForgetOver runs one look for sales over for good (forget.go), for tests
// that drive it with their own clock.
func (s *Service) ForgetOver(ctx context.Context) { s.forgetOver(ctx) }
