package funnel

// StartAudits starts the scheduled audit, for tests that do not wait for
// Start to.
func (s *Service) StartAudits() { s.startAudits() }
