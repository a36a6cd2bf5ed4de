package flashsale

import (
	"context"
	"time"
)

// Breaker is the circuit breaker in front of a stock engine across the
// network, as the service reports it and operators switch it. When the
// engine stops answering, the breaker opens and purchases are answered 503
// at once instead of each waiting out its deadline, so a dead Redis costs
// microseconds per request instead of a pile of stuck goroutines; it probes
// on its own (half-open) and closes when the engine answers again.
type Breaker interface {
	// Status is the breaker's state now.
	Status() BreakerStatus
	// Force pins the breaker open (take the engine out of the path, say
	// before a planned Redis failover) or closed (every call goes through,
	// nothing is counted), or with BreakerAuto hands it back to its
	// failure counting. Anything else is ErrInvalid.
	Force(f BreakerForce) error
}

// BreakerState is where a circuit breaker is.
type BreakerState string

// Breaker states.
const (
	BreakerClosed   BreakerState = "closed"    // calls go through
	BreakerOpen     BreakerState = "open"      // calls fail at once
	BreakerHalfOpen BreakerState = "half-open" // one probe goes through
)

// BreakerForce is an operator's override of the breaker.
type BreakerForce string

// Breaker overrides.
const (
	BreakerAuto        BreakerForce = "auto"
	BreakerForceOpen   BreakerForce = "open"
	BreakerForceClosed BreakerForce = "closed"
)

// Valid returns an invalid_request error unless f is one of the overrides.
func (f BreakerForce) Valid() error {
	switch f {
	case BreakerAuto, BreakerForceOpen, BreakerForceClosed:
		return nil
	}
	return Errorf(EInvalid, "force must be %q, %q or %q", BreakerForceOpen, BreakerForceClosed, BreakerAuto)
}

// BreakerStatus is a circuit breaker's state and why.
type BreakerStatus struct {
	State BreakerState `json:"state"`
	// Forced is the operator's override; BreakerAuto when there is none.
	Forced BreakerForce `json:"forced"`
	// Since is when State last changed.
	Since time.Time `json:"since"`
	// ConsecutiveFailures counts the engine calls that failed in a row.
	ConsecutiveFailures uint32 `json:"consecutive_failures"`
	// DeploymentForce is the override every instance of the deployment
	// follows (ForceBoard), as this instance last read it; empty where
	// the override is the instance's own (no board: SQLite).
	DeploymentForce BreakerForce `json:"deployment_force,omitempty"`
}

// ForceBoard is where the operator's override of the breaker is kept for
// a whole deployment, so one switch at one instance reaches every one
// behind the load balancer: each instance reads it every second and
// forces its own breaker to match. The SQL stores of the distributed shape
// implement it (forcetest is its conformance suite), in the database and
// not in Redis: the override is for the moments Redis is in trouble.
type ForceBoard interface {
	// SetBreakerForce records f for every instance. The caller checks f
	// (Valid); the database refuses anything but the overrides.
	SetBreakerForce(ctx context.Context, f BreakerForce) error
	// BreakerForce returns the override last set (BreakerAuto if none).
	BreakerForce(ctx context.Context) (BreakerForce, error)
}

// Readiness is whether an instance can sell now, and what each dependency
// said. Ready is the verdict; the rest is for the operator reading /readyz,
// which anyone may call, so the causes (addresses, driver messages) are
// only for the log.
type Readiness struct {
	Ready bool `json:"ready"`
	// Engine and Database are "ok" or "unavailable"; a database outage the
	// queue rides out reads "unavailable, orders wait in the queue".
	Engine   string `json:"engine"`
	Database string `json:"database"`
	// Breaker is the stock engine's circuit breaker; nil where there is none
	// (the in-process engine cannot fail on its own).
	Breaker *BreakerStatus `json:"breaker,omitempty"`
	// Selling is what the instance sells from; SellMode the deployment's
	// mode, where the breaker has a db mode (nil otherwise).
	Selling  Selling   `json:"selling,omitempty"`
	SellMode *SellMode `json:"sell_mode,omitempty"`
	// Migrations is "ok", or "behind" when the database lacks migrations
	// this binary embeds (Pending names them): its SQL would meet tables
	// or columns that are not there.
	Migrations string   `json:"migrations,omitempty"`
	Pending    []string `json:"pending_migrations,omitempty"`
	// Sales is "ok", or "rebuilding" when the stock engine lacks a current
	// sale (NotLoaded names them): lost (Redis back empty, flushed) or
	// stale (back from a snapshot or an AOF, failed over) and unloaded.
	// Its purchases answer 503 until the fenced rebuild puts it back; the
	// instance stays ready (funnel/ready.go says why).
	Sales     string   `json:"sales,omitempty"`
	NotLoaded []string `json:"not_loaded,omitempty"`
	// Reasons says, a line each, why Ready is false (or what the instance
	// rides out while ready).
	Reasons []string `json:"reasons,omitempty"`
	// EngineErr and DatabaseErr are why not.
	EngineErr     error `json:"-"`
	DatabaseErr   error `json:"-"`
	MigrationsErr error `json:"-"`
}
