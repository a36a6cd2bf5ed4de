package inmem

import (
	"context"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

var _ flashsale.TokenSpender = (*Spender)(nil)

// spenderSweepMin is the size below which the spender never sweeps: a
// small map costs nothing to keep.
const spenderSweepMin = 1024

// Spender remembers spent purchase tokens in memory until they expire.
// Expired entries are swept lazily: when the map has doubled since the last
// sweep, so memory stays within twice the live tokens and the sweep's cost
// is amortised over the spends that grew the map.
type Spender struct {
	now func() time.Time // for tests

	mu        sync.Mutex
	spent     map[string]time.Time // token ID -> expiry
	nextSweep int
}

// NewSpender returns an empty spender.
func NewSpender() *Spender {
	return &Spender{now: time.Now, spent: make(map[string]time.Time), nextSweep: spenderSweepMin}
}

// Spend marks id used until expires and reports whether this call was the
// first. A token whose entry expired is forgotten, so spending it again
// succeeds; callers reject expired tokens before spending them.
func (s *Spender) Spend(ctx context.Context, id string, expires time.Time) (bool, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp, ok := s.spent[id]; ok && now.Before(exp) {
		return false, nil
	}
	s.spent[id] = expires
	if len(s.spent) >= s.nextSweep {
		for k, exp := range s.spent {
			if !now.Before(exp) {
				delete(s.spent, k)
			}
		}
		s.nextSweep = max(2*len(s.spent), spenderSweepMin)
	}
	return true, nil
}

// Len returns the number of remembered tokens, expired or not.
func (s *Spender) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spent)
}
