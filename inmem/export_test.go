package inmem

import "time"

// SpentTokens exposes the engine's spent-token set to the package's tests.
type SpentTokens = spentTokens

// NewSpentTokens returns an empty set whose clock is now, so tests can
// expire tokens.
func NewSpentTokens(now func() time.Time) *SpentTokens {
	return newSpentTokens(now)
}

func (s *SpentTokens) Spend(id string, expires time.Time) bool { return s.spend(id, expires) }
func (s *SpentTokens) Len() int                                { return s.len() }

// NewLimiterClock returns a Limiter that reads the time from now.
func NewLimiterClock(now func() time.Time) *Limiter { return newLimiter(now) }
