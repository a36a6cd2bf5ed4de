package inmem

import "time"

// SetClock replaces the spender's clock, so tests can expire tokens.
func (s *Spender) SetClock(now func() time.Time) { s.now = now }
