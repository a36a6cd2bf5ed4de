package funnel

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
)

// The operator's override of the breaker, for a whole deployment: the
// switch is kept on a flashsale.ForceBoard (the database), and every
// instance reads it every ForcePoll and forces its own breaker to match
// when it changed. The instance that takes the switch writes the board
// first and applies it at once; the others follow within a poll. Without
// a board (SQLite, or a breaker without a SQL store) the override is the
// instance's own, as it always was.

// ForcePollDefault is how often an instance rereads the deployment's
// breaker override: well inside the 5 s a switch has to reach every
// instance, and one small read a second per instance.
const ForcePollDefault = time.Second

// forceLoop follows the board until ctx ends.
func (s *Service) forceLoop(ctx context.Context) {
	defer s.done.Done()
	every(ctx, s.forcePoll, nil, s.forceStep)
}

// forceStep reads the board and forces the breaker to it if it moved
// since the last read. forceMu covers the read and the apply, so a switch
// taken here between the two is not undone by the older value read.
func (s *Service) forceStep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.forcePoll)
	defer cancel()
	s.forceMu.Lock()
	defer s.forceMu.Unlock()
	f, err := s.forces.BreakerForce(ctx)
	if err != nil {
		if !s.forceDown {
			s.log.Warn("breaker override: cannot read the deployment's switch; keeping the last one", "force", s.deploymentForce(), "err", err)
			s.forceDown = true
		}
		return
	}
	if s.forceDown {
		s.log.Info("breaker override: the deployment's switch reads again", "force", f)
		s.forceDown = false
	}
	if f == s.deploymentForce() {
		return
	}
	if err := s.breaker.Force(f); err != nil {
		// Only a value written past SetBreakerForce gets here.
		s.log.Error("breaker override: the deployment's switch holds no override", "force", f, "err", err)
		return
	}
	s.deployForce.Store(f)
	s.log.Info("breaker override: following the deployment's switch", "force", f)
}

// deploymentForce is the board's override as last applied ("" before the
// first read).
func (s *Service) deploymentForce() flashsale.BreakerForce {
	f, _ := s.deployForce.Load().(flashsale.BreakerForce)
	return f
}

// forceEverywhere records f on the board and applies it here.
func (s *Service) forceEverywhere(ctx context.Context, f flashsale.BreakerForce) error {
	s.forceMu.Lock()
	defer s.forceMu.Unlock()
	if err := s.forces.SetBreakerForce(ctx, f); err != nil {
		return fmt.Errorf("force breaker: %w", err)
	}
	if err := s.breaker.Force(f); err != nil {
		return err
	}
	s.deployForce.Store(f)
	return nil
}
