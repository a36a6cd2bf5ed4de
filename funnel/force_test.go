package funnel_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/breaker"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/postgres"
)

// flakyForces is a board the test can cut this instance off from.
type flakyForces struct {
	flashsale.ForceBoard
	down atomic.Bool
}

func (b *flakyForces) SetBreakerForce(ctx context.Context, f flashsale.BreakerForce) error {
	if b.down.Load() {
		return flashsale.ErrUnavailable
	}
	return b.ForceBoard.SetBreakerForce(ctx, f)
}

func (b *flakyForces) BreakerForce(ctx context.Context) (flashsale.BreakerForce, error) {
	if b.down.Load() {
		return "", flashsale.ErrUnavailable
	}
	return b.ForceBoard.BreakerForce(ctx)
}

// forceInstance is one instance: the in-process engine behind a breaker,
// a store of its own on the shared database, and the board.
type forceInstance struct {
	svc    *funnel.Service
	forces *flakyForces
}

func startForceInstance(t *testing.T, store flashsale.Store) *forceInstance {
	t.Helper()
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	brk := breaker.New(inmem.NewEngine().Roles(), breaker.Config{Logger: slog.New(slog.DiscardHandler)})
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	forces := &flakyForces{ForceBoard: store.Forces}
	store.Forces = forces
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{
		Store: store, Engine: brk.Roles(), Writer: writer, ForcePoll: 50 * time.Millisecond,
		Secret: []byte("test-secret"), ReapInterval: time.Hour, AuditInterval: -1,
	})
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		writer.Close()
		store.Close()
	})
	return &forceInstance{svc: svc, forces: forces}
}

func (in *forceInstance) status(t *testing.T) *flashsale.BreakerStatus {
	t.Helper()
	st, err := in.svc.Breaker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitForced waits until the instance's breaker is forced f by the board.
func (in *forceInstance) waitForced(t *testing.T, f flashsale.BreakerForce) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := in.status(t)
		if st.Forced == f && st.DeploymentForce == f {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("breaker %+v after 5 s, want forced %s by the deployment", st, f)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestForceEverywhere: an override taken at one instance reaches another
// on the same database; one started while it is on follows it from the
// start; one cut off from the database keeps the last it read and
// catches up; a switch the board cannot store is refused and changes
// nothing.
func TestForceEverywhere(t *testing.T) {
	for name, open := range map[string]func(t *testing.T, url string) flashsale.Store{
		"MySQL": func(t *testing.T, url string) flashsale.Store {
			s, err := mysql.Open(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s.Roles()
		},
		"PostgreSQL": func(t *testing.T, url string) flashsale.Store {
			s, err := postgres.Open(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s.Roles()
		},
	} {
		t.Run(name, func(t *testing.T) {
			url := testenv.MySQLDatabase(t)
			if name == "PostgreSQL" {
				url = testenv.PostgresDatabase(t)
			}
			a, b := startForceInstance(t, open(t, url)), startForceInstance(t, open(t, url))
			if st := a.status(t); st.Forced != flashsale.BreakerAuto || st.DeploymentForce != flashsale.BreakerAuto {
				t.Fatalf("fresh: %+v, want auto, auto", st)
			}

			st, err := a.svc.ForceBreaker(t.Context(), flashsale.BreakerForceOpen)
			if err != nil || st.Forced != flashsale.BreakerForceOpen || st.State != flashsale.BreakerOpen {
				t.Fatalf("ForceBreaker(open) = %+v, %v", st, err)
			}
			b.waitForced(t, flashsale.BreakerForceOpen)
			if got := b.status(t).State; got != flashsale.BreakerOpen {
				t.Fatalf("b's state = %s, want open", got)
			}

			late := startForceInstance(t, open(t, url))
			if st := late.status(t); st.Forced != flashsale.BreakerForceOpen {
				t.Fatalf("an instance started while forced open: %+v, want forced open from the start", st)
			}

			b.forces.down.Store(true)
			if _, err := a.svc.ForceBreaker(t.Context(), flashsale.BreakerForceClosed); err != nil {
				t.Fatal(err)
			}
			late.waitForced(t, flashsale.BreakerForceClosed)
			if st := b.status(t); st.Forced != flashsale.BreakerForceOpen {
				t.Fatalf("b cut off from the database: %+v, want the last it read (open)", st)
			}
			if _, err := b.svc.ForceBreaker(t.Context(), flashsale.BreakerAuto); !errors.Is(err, flashsale.ErrUnavailable) {
				t.Fatalf("ForceBreaker with the board down = %v, want unavailable", err)
			}
			if st := b.status(t); st.Forced != flashsale.BreakerForceOpen {
				t.Fatalf("after a refused switch: %+v, want unchanged (open)", st)
			}
			b.forces.down.Store(false)
			b.waitForced(t, flashsale.BreakerForceClosed)

			if _, err := b.svc.ForceBreaker(t.Context(), "half-open"); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Fatalf("ForceBreaker(half-open) = %v, want invalid", err)
			}
			if _, err := b.svc.ForceBreaker(t.Context(), flashsale.BreakerAuto); err != nil {
				t.Fatal(err)
			}
			a.waitForced(t, flashsale.BreakerAuto)
			late.waitForced(t, flashsale.BreakerAuto)
		})
	}
}
