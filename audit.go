package flashsale

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// FindingKind names what an audit found. The strings are stable: alerts and
// runbooks match on them.
type FindingKind string

// The findings an audit reports. The night findings compare counters, the
// order findings compare the engine's record of one order with the
// database's row, and the rest check the database's own rules.
const (
	// FindingEngineNotLoaded: the sale has not ended but the engine has no
	// stock for it, so nothing of it can be sold (nor compared).
	FindingEngineNotLoaded FindingKind = "engine_not_loaded"
	// FindingDBOversold: a night's held + sold exceeds its stock (I1).
	FindingDBOversold FindingKind = "db_oversold"
	// FindingDBCountersDrift: a night's held + sold is not the rooms its
	// active orders take. The database's counters and its rows disagree,
	// which no code path does (each counter change shares a transaction
	// with its row); only an operator can say which of the two is right.
	FindingDBCountersDrift FindingKind = "db_counters_drift"
	// FindingEngineNegative: the engine has fewer than zero units of a night.
	FindingEngineNegative FindingKind = "engine_negative"
	// FindingUnitsDrift: a night's engine available is not stock - held -
	// sold - in flight. More is phantom rooms the engine would sell and the
	// database refuse; fewer is rooms nobody can buy.
	FindingUnitsDrift FindingKind = "units_drift"
	// FindingEngineActiveDBFinal: the engine counts an order the database
	// has expired, cancelled or failed: the engine undersells its rooms.
	FindingEngineActiveDBFinal FindingKind = "engine_active_db_final"
	// FindingDBActiveEngineInactive: the database has an order held or paid
	// that the engine records as released, or not at all: the engine would
	// sell its rooms again.
	FindingDBActiveEngineInactive FindingKind = "db_active_engine_inactive"
	// FindingStranded: the engine took rooms for an order the database has
	// no row of, longer ago than the grace, while nothing waits in the
	// queue: a 202 the order path has lost (I2), whether the outbox lost
	// it too or the relay has not delivered it from there.
	FindingStranded FindingKind = "stranded"
	// FindingUserOverLimit: a user's active orders take more rooms than the
	// sale's per-user limit (I3).
	FindingUserOverLimit FindingKind = "user_over_limit"
	// FindingDuplicateKey: two orders of one user share an idempotency key
	// (I4). The unique index forbids it; the audit checks anyway.
	FindingDuplicateKey FindingKind = "duplicate_key"
)

// Audit is the proof that one sale's books balance (I6), or the list of
// what does not: the database's counters against its orders and the sale's
// rules, and the stock engine's view against the database's.
type Audit struct {
	SaleID string
	At     time.Time
	// Engine reports whether the engine's view was compared. It is false
	// when only the database was audited, or the engine has no stock for
	// the sale; then the nights' EngineAvailable and InFlight mean nothing.
	Engine   bool
	Nights   []AuditNight
	Findings []Finding
	// Repairs lists what a repair did or tried, in order; empty for a plain audit.
	Repairs []RepairStep
}

// Balanced reports whether the audit found nothing.
func (a *Audit) Balanced() bool { return len(a.Findings) == 0 }

// AuditNight is one night's figures as the audit saw them.
type AuditNight struct {
	Date            string
	Stock           int
	EngineAvailable int
	Held            int // the database's counter
	Sold            int // the database's counter
	// InFlight is the rooms of reservations the engine took whose order is
	// not in the database yet but is on its way: younger than the grace,
	// or still in the outbox.
	InFlight int
}

// Expected is what the engine should have left of the night.
func (n AuditNight) Expected() int { return n.Stock - n.Held - n.Sold - n.InFlight }

// Drift is how many units the engine has beyond what it should (negative:
// short of it).
func (n AuditNight) Drift() int { return n.EngineAvailable - n.Expected() }

// Finding is one thing that does not balance. Night is set for a night's
// figures, OrderID for an order's, UserID for a user's (and beside an order).
type Finding struct {
	Kind    FindingKind
	Night   string
	OrderID string
	UserID  string
	Detail  string // a sentence for the operator
}

// RepairStep is one action a repair took or tried. Err is why it failed
// or was not taken, nil when it was done.
type RepairStep struct {
	Action  RepairAction
	OrderID string
	Err     error
}

// RepairAction names a repair step. The strings are stable.
type RepairAction string

// The repair actions: three on one order, one on the whole sale.
const (
	// RepairRetake makes the engine count an order the database holds or sold.
	RepairRetake RepairAction = "retake"
	// RepairRelease gives the engine back the rooms of an order the database ended.
	RepairRelease RepairAction = "release"
	// RepairRepublish sends a stranded reservation down the order path again.
	RepairRepublish RepairAction = "republish"
	// RepairRebuild reloads the sale's stock in the engine from the database.
	RepairRebuild RepairAction = "rebuild"
)

// AuditInput is what AuditSale compares.
type AuditInput struct {
	// DB is the database's view (Store.Snapshot): the sale, its counters
	// and every order, from one consistent read.
	DB *StockSnapshot
	// Engine is the engine's view (StockEngine.Snapshot), or nil when the
	// engine has no stock for the sale.
	Engine *StockSnapshot
	// DatabaseOnly audits the database's own rules alone, when the engine
	// cannot be reached from here (the embedded shape's engine lives in
	// the serving process).
	DatabaseOnly bool
	// Unconfirmed are the outbox's reservations (of any sale; others are
	// ignored). Being there does not make an old one in flight: the relay
	// republishes an entry within seconds, so one older than the grace
	// with no backlog is a relay that is not delivering it, and is
	// stranded (its finding says it is still in the outbox).
	Unconfirmed []Reservation
	// Sent are reservations the caller has just republished (a repair):
	// in flight however old.
	Sent []Reservation
	Now  time.Time
	// Grace is how long a reservation may wait for its order row before an
	// engine-active reservation without one is stranded rather than in flight.
	Grace time.Duration
	// Backlog says messages wait in the order queue (or its depth could not
	// be read): a reservation without its row may be among them however
	// old it is, so none is stranded until the queue has drained. Orders
	// wait longer than any grace when a storm meets a rate-capped
	// consumer, and republishing them would only lengthen the queue.
	Backlog bool
}

// AuditSale computes a sale's audit from the two views. It is pure: the
// caller takes the snapshots (the database's first, so an order placed in
// between is seen by the engine as young and in flight, never as missing).
func AuditSale(in AuditInput) *Audit {
	sale := in.DB.Sale
	a := &Audit{SaleID: sale.ID, At: in.Now, Nights: make([]AuditNight, len(in.DB.Nights))}
	for i, n := range in.DB.Nights {
		a.Nights[i] = AuditNight{Date: n.Date, Stock: n.Stock, Held: n.Held, Sold: n.Sold}
	}
	db := indexOrders(in.DB.Reservations)
	if !in.DatabaseOnly {
		switch {
		case in.Engine != nil:
			a.Engine = true
			a.compareEngine(in, db)
		case in.Now.Before(sale.EndsAt):
			a.add(Finding{Kind: FindingEngineNotLoaded,
				Detail: "the sale has not ended but the stock engine has no stock for it: nothing of it can be sold"})
		}
	}
	a.checkDatabase(sale, db)
	return a
}

func (a *Audit) add(f Finding) { a.Findings = append(a.Findings, f) }

// indexOrders returns reservations sorted by order ID, so findings come out
// in a stable order.
func indexOrders(rs []Reservation) []Reservation {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(x, y Reservation) int { return cmp.Compare(x.OrderID, y.OrderID) })
	return out
}

// stay calls f for each night of r's stay that the sale has.
func stay(r *Reservation, nights int, f func(i int)) {
	for i := max(r.FirstNight, 0); i < min(r.FirstNight+r.Nights, nights); i++ {
		f(i)
	}
}

// ordersOf is the set of rs's order IDs that belong to a's sale.
func (a *Audit) ordersOf(rs []Reservation) map[string]bool {
	ids := make(map[string]bool, len(rs))
	for _, r := range rs {
		if r.SaleID == a.SaleID {
			ids[r.OrderID] = true
		}
	}
	return ids
}

// compareEngine matches the engine's reservations with the database's
// orders, counts what is in flight, then checks each night's units.
func (a *Audit) compareEngine(in AuditInput, db []Reservation) {
	eng := make(map[string]*Reservation, len(in.Engine.Reservations))
	for i := range in.Engine.Reservations {
		eng[in.Engine.Reservations[i].OrderID] = &in.Engine.Reservations[i]
	}
	inDB := make(map[string]bool, len(db))
	for i := range db {
		o := &db[i]
		inDB[o.OrderID] = true
		e := eng[o.OrderID]
		switch {
		case o.Active && e == nil:
			a.add(Finding{Kind: FindingDBActiveEngineInactive, OrderID: o.OrderID, UserID: o.UserID,
				Detail: fmt.Sprintf("the database has it held or paid (%s), but the engine has no record of it: the engine would sell those rooms again", rooms(o.Rooms))})
		case o.Active && !e.Active:
			a.add(Finding{Kind: FindingDBActiveEngineInactive, OrderID: o.OrderID, UserID: o.UserID,
				Detail: fmt.Sprintf("the database has it held or paid (%s), but the engine records it as released", rooms(o.Rooms))})
		case !o.Active && e != nil && e.Active:
			a.add(Finding{Kind: FindingEngineActiveDBFinal, OrderID: o.OrderID, UserID: o.UserID,
				Detail: fmt.Sprintf("the engine counts its %s, but the database has it expired, cancelled or failed: the engine undersells them", rooms(e.Rooms))})
		}
	}

	sent, inOutbox := a.ordersOf(in.Sent), a.ordersOf(in.Unconfirmed)
	hold := in.DB.Sale.HoldDuration()
	var missing []Reservation
	for _, r := range in.Engine.Reservations {
		if r.Active && !inDB[r.OrderID] {
			missing = append(missing, r)
		}
	}
	for _, r := range indexOrders(missing) {
		reserved := r.HoldExpiresAt.Add(-hold)
		young := !r.HoldExpiresAt.IsZero() && in.Now.Sub(reserved) < in.Grace
		if young || in.Backlog || sent[r.OrderID] {
			stay(&r, len(a.Nights), func(i int) { a.Nights[i].InFlight += r.Rooms })
			continue
		}
		age := "at an unknown time"
		if !r.HoldExpiresAt.IsZero() {
			age = in.Now.Sub(reserved).Truncate(time.Second).String() + " ago"
		}
		why := "the outbox no longer holds it: a 202 the relay will not republish"
		if inOutbox[r.OrderID] {
			why = "the outbox still holds it with nothing in the queue: a 202 the relay is not delivering (is every publish failing?)"
		}
		a.add(Finding{Kind: FindingStranded, OrderID: r.OrderID, UserID: r.UserID,
			Detail: fmt.Sprintf("the engine took %s for it %s, but the database has no order and %s", rooms(r.Rooms), age, why)})
	}

	if len(in.Engine.Nights) != len(a.Nights) {
		a.add(Finding{Kind: FindingUnitsDrift,
			Detail: fmt.Sprintf("the engine has %d nights of the sale, the database %d", len(in.Engine.Nights), len(a.Nights))})
	}
	for i := range a.Nights {
		if i >= len(in.Engine.Nights) {
			break
		}
		n := &a.Nights[i]
		n.EngineAvailable = in.Engine.Nights[i].Available
		if n.EngineAvailable < 0 {
			a.add(Finding{Kind: FindingEngineNegative, Night: n.Date,
				Detail: fmt.Sprintf("the engine has %d rooms left", n.EngineAvailable)})
		}
		if d := n.Drift(); d != 0 {
			effect := "phantom rooms it would sell and the database refuse"
			if d < 0 {
				effect = "rooms nobody can buy"
			}
			a.add(Finding{Kind: FindingUnitsDrift, Night: n.Date,
				Detail: fmt.Sprintf("the engine has %d rooms left, but stock %d - held %d - sold %d - in flight %d leaves %d: %+d, %s",
					n.EngineAvailable, n.Stock, n.Held, n.Sold, n.InFlight, n.Expected(), d, effect)})
		}
	}
}

// checkDatabase checks the database's counters against its orders and the
// sale's per-user limit and idempotency keys.
func (a *Audit) checkDatabase(sale *Sale, db []Reservation) {
	taken := make([]int, len(a.Nights))
	users := map[string]int{}
	type userKey struct{ user, key string }
	keys := map[userKey]string{}
	var dups []Finding
	for i := range db {
		o := &db[i]
		if o.Active {
			stay(o, len(taken), func(i int) { taken[i] += o.Rooms })
			users[o.UserID] += o.Rooms
		}
		if o.IdempotencyKey == "" {
			continue
		}
		k := userKey{o.UserID, o.IdempotencyKey}
		if first, ok := keys[k]; ok {
			dups = append(dups, Finding{Kind: FindingDuplicateKey, OrderID: o.OrderID, UserID: o.UserID,
				Detail: fmt.Sprintf("orders %s and %s share the idempotency key %q", first, o.OrderID, o.IdempotencyKey)})
			continue
		}
		keys[k] = o.OrderID
	}
	for i, n := range a.Nights {
		if n.Held+n.Sold > n.Stock {
			a.add(Finding{Kind: FindingDBOversold, Night: n.Date,
				Detail: fmt.Sprintf("held %d + sold %d = %d rooms exceed the stock of %d", n.Held, n.Sold, n.Held+n.Sold, n.Stock)})
		}
		if n.Held+n.Sold != taken[i] {
			a.add(Finding{Kind: FindingDBCountersDrift, Night: n.Date,
				Detail: fmt.Sprintf("held %d + sold %d = %d rooms, but the active orders take %d: the database's counters disagree with its orders",
					n.Held, n.Sold, n.Held+n.Sold, taken[i])})
		}
	}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		if users[u] > sale.PerUserLimit {
			a.add(Finding{Kind: FindingUserOverLimit, UserID: u,
				Detail: fmt.Sprintf("the user's active orders take %s; the sale's limit is %d", rooms(users[u]), sale.PerUserLimit)})
		}
	}
	a.Findings = append(a.Findings, dups...)
}

func rooms(n int) string {
	if n == 1 {
		return "1 room"
	}
	return fmt.Sprintf("%d rooms", n)
}
