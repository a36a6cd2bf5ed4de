package inmem

import (
	"sync"
	"time"
)

// spentSweepMin is the size below which the set never sweeps: a small map
// costs nothing to keep.
const spentSweepMin = 1024

// spentTokens remembers spent purchase tokens in memory until they expire.
// Expired entries are swept lazily: when the map has doubled since the last
// sweep, so memory stays within twice the live tokens and the sweep's cost
// is amortised over the spends that grew the map.
type spentTokens struct {
	now func() time.Time // for tests

	mu        sync.Mutex
	spent     map[string]time.Time // token ID -> expiry
	nextSweep int
}

func newSpentTokens() *spentTokens {
	return &spentTokens{now: time.Now, spent: make(map[string]time.Time), nextSweep: spentSweepMin}
}

// spend marks id used until expires and reports whether this call was the
// first. A token whose entry expired is forgotten, so spending it again
// succeeds; callers reject expired tokens before spending them.
func (s *spentTokens) spend(id string, expires time.Time) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp, ok := s.spent[id]; ok && now.Before(exp) {
		return false
	}
	s.spent[id] = expires
	if len(s.spent) >= s.nextSweep {
		for k, exp := range s.spent {
			if !now.Before(exp) {
				delete(s.spent, k)
			}
		}
		s.nextSweep = max(2*len(s.spent), spentSweepMin)
	}
	return true
}

// len returns the number of remembered tokens, expired or not.
func (s *spentTokens) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spent)
}
