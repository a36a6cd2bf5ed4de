package inmem

import (
	"time"

	"github.com/flashsale/flashsale/internal/expiring"
)

// spentIdle is how often a set that holds tokens sweeps the expired ones
// while nobody spends: the tokens of a sale that ended leave within
// their lifetime and this.
const spentIdle = 30 * time.Second

// spentTokens remembers spent purchase tokens in memory until they expire.
// It never forgets a live one (no size bound): forgotten, it could be
// spent twice.
type spentTokens struct {
	m *expiring.Map[string, struct{}]
}

func newSpentTokens(now func() time.Time) *spentTokens {
	return &spentTokens{m: expiring.New[string, struct{}](expiring.Config{Idle: spentIdle, Now: now})}
}

// spend marks id used until expires and reports whether this call was the
// first. A token whose entry expired is forgotten, so spending it again
// succeeds; callers reject expired tokens before spending them.
func (s *spentTokens) spend(id string, expires time.Time) bool {
	return s.m.Add(id, struct{}{}, expires)
}

// len returns the number of remembered tokens, expired or not.
func (s *spentTokens) len() int { return s.m.Len() }
