package flashsale

import (
	"context"
	"time"
)

// Selling from the database while the stock engine is out (the breaker's
// db mode, distributed shape). Stock lives in two places, the engine's
// counters and the database's, and only the database knows every order;
// orders a guest got a 202 for may still be in the queue. So the instances
// agree, through the database, on one place to sell from:
//
//	engine    every instance sells from the engine (the normal state)
//	stopping  the engine is out for someone: each instance stops selling
//	          from it, waits for its purchases in flight, pauses its queue
//	          consumer and says so; once all have (or their lease ran out),
//	          the queue is drained into the database
//	db        purchases go straight to the database's conditional update
//	returning the engine answers again: each instance stops selling from
//	          the database, and the engine is rebuilt from it (the fenced
//	          rebuild) before the mode is engine again
//
// An instance sells from the engine only while its lease on the board is
// fresh: one cut off from the database stops when its lease runs out, so
// the others can count it as stopped without hearing from it.

// SellPhase is where a deployment sells from, or which way it is moving.
type SellPhase string

// Sell phases, in the order a deployment goes through them.
const (
	PhaseEngine    SellPhase = "engine"
	PhaseStopping  SellPhase = "stopping"
	PhaseDB        SellPhase = "db"
	PhaseReturning SellPhase = "returning"
)

// SellMode is a deployment's phase; Epoch counts its changes, so a step
// taken for one change cannot be mistaken for the next one's.
type SellMode struct {
	Phase SellPhase `json:"phase"`
	Epoch int64     `json:"epoch"`
}

// Selling is what one instance sells from now.
type Selling string

// What an instance sells from.
const (
	SellingEngine Selling = "engine"
	SellingDB     Selling = "db"
	SellingNone   Selling = "none" // between the two, or cut off
)

// SellPart is one instance's report on the board: the mode it has acted
// on and what it sells from, until Expires (the database's clock).
type SellPart struct {
	Instance string
	Mode     SellMode
	Selling  Selling
	Expires  time.Time
}

// ModeBoard is where the instances agree on the sell mode. The SQL stores
// of the distributed shape implement it (modetest is its conformance
// suite).
type ModeBoard interface {
	// Beat records p until lease from the database's now and returns the
	// mode, in one transaction that reads the mode row under a shared
	// lock: a Move waits for every Beat in progress, so once Move returns
	// every part either was written before it (and says the old mode) or
	// its instance has read the new one.
	Beat(ctx context.Context, p SellPart, lease time.Duration) (SellMode, error)
	// Move changes the mode from from to to, if it is still from.
	Move(ctx context.Context, from, to SellMode) (bool, error)
	// Parts returns every instance's last report and the database's now.
	Parts(ctx context.Context) ([]SellPart, time.Time, error)
}
