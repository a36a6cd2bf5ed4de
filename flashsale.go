// Package flashsale holds the domain of a limited-stock flash sale: sales,
// nights, reservations, orders, the errors callers branch on, and the small
// interfaces (Store, StockEngine, OrderWriter) that the adapter
// packages implement. It imports only the standard library, so every adapter
// and the HTTP layer can depend on it without depending on each other.
//
// The funnel a purchase travels through, and the invariants it keeps, are
// described in docs/design.md.
package flashsale

import (
	"context"
	"time"
)

// Version is set at build time with -ldflags "-X github.com/flashsale/flashsale.Version=...".
var Version = "dev"

// Store is the database: the truth about sales and orders. Every counter
// change is a conditional update inside the same transaction as the order
// row it belongs to, so the database refuses an oversell even if the stock
// engine in front of it were wrong.
//
// It is a bundle of roles, not one interface: each part of the service
// takes the role it uses, and each decorator (metrics, tracing) wraps every
// role method by method, so a method added to a role does not compile until
// every wrapper handles it. A store package's Roles method fills it; the
// optional capabilities are nil where the database has none, and nothing
// asks a concrete type what it can do.
type Store struct {
	SaleStore
	OrderStore
	Books
	NoticeStore
	Database

	// Modes and Forces are where the instances of a deployment agree: the
	// sell mode (ModeBoard) and the operator's override of the breaker
	// (ForceBoard). The SQL servers keep them; nil for SQLite, which has
	// no other instance to agree with.
	Modes  ModeBoard
	Forces ForceBoard
	// Queues keeps the waiting rooms' places and draws (queue.go), so a
	// queue lost with its process or its Redis is rebuilt; every SQL
	// store has it, nil only for a test's store without waiting rooms.
	Queues QueueRecords
}

// StoreOf is s in every role, with no boards: what a store package's Roles
// does, for a value that plays them all (a test's fake, a wrapper that
// overrides a method or two).
func StoreOf(s interface {
	SaleStore
	OrderStore
	Books
	NoticeStore
	Database
}) Store {
	return Store{SaleStore: s, OrderStore: s, Books: s, NoticeStore: s, Database: s}
}

// SaleStore keeps sales, their nights and their change log.
type SaleStore interface {
	// CreateSale inserts a validated sale with its nights.
	CreateSale(ctx context.Context, s *Sale) error
	// Sale returns one sale, or ErrNotFound.
	Sale(ctx context.Context, id string) (*Sale, error)
	// Sales returns the sales that end after now, ordered by start time.
	Sales(ctx context.Context, now time.Time) ([]*Sale, error)
	// Revisions returns the revision of each sale Sales(now) returns, by
	// sale ID, and nothing else. Every instance rereads it twice a second
	// to pick up the others' changes: the sales in full, nights and all,
	// made that reread cost in proportion to every live sale's rows even
	// when none changed (issue 26); with this it reads a pair per sale and
	// then only the sales whose revision moved.
	Revisions(ctx context.Context, now time.Time) (map[string]int64, error)
	// ListSales returns up to q.Limit sales matching q, newest first (see
	// SaleQuery), nights included.
	ListSales(ctx context.Context, q SaleQuery) ([]*Sale, error)
	// UpdateSale replaces a sale's fields with s's if, and only if, its
	// revision is still rev (ErrStale otherwise; ErrNotFound when there
	// is no such sale), sets s.Revision to rev+1 and appends c (its
	// Revision set likewise) to the change log, in one transaction.
	// Changed nights are rewritten only while no order holds or bought a
	// room of the sale (ErrStockInUse otherwise); the counters of nights
	// are never written here.
	UpdateSale(ctx context.Context, s *Sale, rev int64, c SaleChange) error
	// AdjustStock adds d.Delta rooms to one night (a negative delta takes
	// them away) if, and only if, the stock stays at most MaxStock and at
	// least held + sold: ErrStockInUse otherwise, and nothing changes. It
	// bumps the sale's revision and appends c in the same transaction,
	// and returns the night's counters after the change. ErrNotFound for
	// an unknown sale or night.
	AdjustStock(ctx context.Context, saleID string, d StockDelta, c SaleChange) (*NightStock, error)
	// SaleChanges returns a sale's change log, oldest first.
	SaleChanges(ctx context.Context, saleID string) ([]SaleChange, error)
	// DeleteSale removes a test sale (Sale.Test) with its nights, orders,
	// change log, events and their delivery log, in one transaction:
	// ErrNotTestSale for any other sale (real sales are never deleted),
	// ErrNotFound when there is none.
	DeleteSale(ctx context.Context, id string) error
}

// OrderStore keeps orders and moves them through their statuses, with the
// night and user counters in the same transaction.
type OrderStore interface {
	// PlaceOrders writes a batch of reservations in one transaction (the
	// group commit). The returned slice has one entry per reservation:
	//   nil               the order was inserted as held and its units taken;
	//   ErrDuplicate      an order with this ID already exists (redelivery): nothing changed;
	//   ErrSoldOut        a night lacked stock: the order was inserted as failed;
	//   ErrLimitExceeded  the user would exceed the sale's limit: inserted as failed;
	//   ErrKeyConflict    another order holds this idempotency key: inserted as failed without the key;
	//   ErrNotFound       the sale does not exist: nothing is written (no row, no key; the ID stays free);
	//   ErrInvalid        no rooms, no nights or a negative first night: nothing is written.
	// A non-nil error means the transaction did not commit and nothing changed.
	PlaceOrders(ctx context.Context, rs []Reservation) ([]error, error)
	// Order returns one order, or ErrNotFound.
	Order(ctx context.Context, id string) (*Order, error)
	// OrderByKey returns the order a user placed with an idempotency key, or ErrNotFound.
	OrderByKey(ctx context.Context, saleID, userID, key string) (*Order, error)
	// Transition moves an order from one status to another if, and only if,
	// it is still in from (a conditional update, so each transition happens
	// exactly once however many callers race). It adjusts the night and user
	// counters in the same transaction:
	//   held -> paid                   held -= rooms, sold += rooms
	//   held -> expired | cancelled    held -= rooms, user rooms -= rooms
	//   expired | cancelled -> paid    sold += rooms and user rooms += rooms, both guarded:
	//                                  ErrSoldOut or ErrLimitExceeded and nothing changes
	// It returns ErrStale when the order is no longer in from, ErrNotFound
	// when it does not exist, and ErrInvalid for any other pair.
	Transition(ctx context.Context, id string, from, to OrderStatus, paymentRef string, now time.Time) (*Order, error)
	// ExpireHolds moves up to limit held orders whose hold ended at or
	// before now to expired, oldest first, in ONE transaction with their
	// counter changes (held -= rooms per night, user rooms -= rooms), and
	// returns them as expired (UpdatedAt = now). A flash sale's holds all end
	// within the same second; one transaction per hold would queue each on
	// the night's counter row behind the order writer, so they are expired
	// together. Orders another transaction has locked are skipped (they are
	// being paid, cancelled or expired there), so several reapers share the
	// work and each order is expired exactly once.
	ExpireHolds(ctx context.Context, now time.Time, limit int) ([]*Order, error)
	// FailOrder records a reservation the order path gave up on (the queue
	// dead-lettered it: its data was refused, or its write kept failing
	// while the database answered) as a failed order with reason, taking no
	// stock, so its owner reads a final status instead of nothing. If an
	// order with this ID exists it changes nothing and returns ErrDuplicate;
	// if the reservation's idempotency key is bound to another order the
	// row is written without the key. ErrNotFound when the sale does not
	// exist (there is nothing to attach the order to).
	FailOrder(ctx context.Context, r Reservation, reason string) error
	// SaleOrders returns up to q.Limit of a sale's orders, newest first
	// (see OrderQuery).
	SaleOrders(ctx context.Context, saleID string, q OrderQuery) ([]*Order, error)
}

// Books is what the audit and a stock engine's rebuild read: the
// database's counters and every order's units, per sale.
type Books interface {
	// NightStocks returns the database's counters for each night of a sale,
	// in night order. Available is Stock - Held - Sold.
	NightStocks(ctx context.Context, saleID string) ([]NightStock, error)
	// NightStocksOf is NightStocks for many sales in one read: each sale
	// of saleIDs that exists, by ID (an unknown one is absent, never an
	// error); none for none, without I/O. It exists for the phantom watch,
	// which compares every live sale's counters with the engine's every
	// few seconds: one read per sale made an idle instance's cost grow
	// with the number of sales nobody buys (issue 26).
	NightStocksOf(ctx context.Context, saleIDs []string) (map[string][]NightStock, error)

	// Snapshot returns what a stock engine needs to rebuild a sale.
	Snapshot(ctx context.Context, saleID string) (*StockSnapshot, error)
}

// NoticeStore is the outbox of order events (notice.go) and the log of
// their deliveries.
type NoticeStore interface {
	// The outbox of order events (notice.go). PlaceOrders, Transition,
	// ExpireHolds and FailOrder append each order's OrderNotice in the
	// same transaction as its change (a duplicate writes none), and
	// PlaceOrders and a transition to paid append a SoldOutNotice when
	// they take a sale's last available room (every night at zero after
	// the change, not before it). Seq follows commit order: a notice that
	// commits later never gets a lower Seq than one already visible, so a
	// dispatcher reading past its cursor skips none.
	//
	// ClaimNotices leases transport's cursor to owner until until, when
	// the lease is free, expired or owner's already, and returns up to
	// limit notices after the cursor in Seq order; ok is false (and
	// nothing returned) while another owner holds it. A cursor claimed for
	// the first time starts before the first notice.
	ClaimNotices(ctx context.Context, transport, owner string, until time.Time, limit int) (ns []Notice, ok bool, err error)
	// AckNotices moves transport's cursor to seq (never back) if owner
	// still holds the lease: ErrStale otherwise, and nothing changes.
	AckNotices(ctx context.Context, transport, owner string, seq int64) error
	// NoticeCursor returns transport's cursor and the outbox's last Seq,
	// so an operator sees how far behind a transport is.
	NoticeCursor(ctx context.Context, transport string) (cursor, last int64, err error)
	// RecordDeliveries appends attempts to the delivery log in one write,
	// in their order (a dispatcher's batch: a row each was a round trip
	// and a commit an event), at most MaxDeliveries; when one is invalid
	// none is written. Deliveries reads the log newest first (q.Limit
	// clamped like a page).
	RecordDeliveries(ctx context.Context, ds []Delivery) error
	Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	// PruneOutbox deletes, from the oldest limit notices and the oldest
	// limit delivery-log attempts, the leading run written before before;
	// for notices the run also ends at the first one a transport in use
	// has not acked (a transport whose lease ended before before is gone
	// and holds nothing back). It returns how many of each it deleted; a
	// caller repeats while either is limit. Seq is never reused after a
	// delete.
	PruneOutbox(ctx context.Context, before time.Time, limit int) (notices, deliveries int, err error)
}

// Database is the store's own life: its schema, its health, its end.
type Database interface {
	// Migrate applies the migrations this binary embeds that the database
	// lacks, idempotently, safe when several instances start at once.
	Migrate(ctx context.Context) error
	// PendingMigrations returns the migrations this binary embeds that the
	// database has not recorded as applied, in order (none when its schema
	// is current), for readiness: an instance started against a database
	// another binary's migrate has not brought up to date must not sell.
	PendingMigrations(ctx context.Context) ([]string, error)
	// Ping reports whether the database answers, for readiness and for
	// telling an outage (retry for as long as it takes) from a refusal.
	Ping(ctx context.Context) error
	Close() error
}

// StockEngine is the one place stock is deducted before the database sees
// an order. Reserve is a single atomic step; nothing else takes stock.
//
// Like Store, it is a bundle of roles: the purchase path (Reserver) and
// the keeping of a sale's stock (StockKeeper), filled by an engine
// package's Roles method, with the optional capabilities (Outbox, Breaker)
// nil where the engine has none.
type StockEngine struct {
	Reserver
	StockKeeper

	// Outbox is the engine's outbox of reservations the order path has
	// not confirmed yet, or nil when the engine keeps none (the in-process
	// engine: its writer commits before Reserve's caller answers). The
	// queue path needs one.
	Outbox Outbox
	// Breaker is the circuit breaker the engine sits behind, for /readyz
	// and the operators' switch; nil where there is none (the in-process
	// engine cannot fail on its own).
	Breaker Breaker
}

// EngineOf is e in both roles, with no outbox and no breaker: what an
// engine package's Roles does, for a value that plays them both (a test's
// fake, a wrapper that overrides a method or two).
func EngineOf(e interface {
	Reserver
	StockKeeper
}) StockEngine {
	return StockEngine{Reserver: e, StockKeeper: e}
}

// Reserver is the purchase path through the engine: take units, give them
// back, and answer what a reservation is.
type Reserver interface {
	// Reserve atomically checks the idempotency key, the user's limit and
	// every night of the stay, then deducts and records the reservation
	// under r.OrderID. With r.Choices above 1 it takes the first of the
	// choices with r.Rooms free and sets r.FirstNight to it (ErrSoldOut
	// when none has; ErrInvalid unless r.Nights is 1 and every choice is a
	// unit of the sale). On ErrDuplicate it returns the ID of the order that
	// already holds the key. Other errors: ErrSoldOut, ErrLimitExceeded,
	// ErrNotLoaded.
	Reserve(ctx context.Context, r *Reservation) (existing string, err error)
	// ReserveSpending is Reserve, preceded inside the same atomic step by
	// spending the one-time purchase token ID until expires: ErrTokenInvalid
	// if it was already spent. One step means one round trip where the
	// engine is across the network, and a token and the stock it bought
	// cannot disagree. The idempotency key is checked before the token, so a
	// retry whose token its first attempt spent gets ErrDuplicate and its
	// order. ErrLimitExceeded and an invalid stay leave the token spent;
	// ErrSoldOut may leave it unspent (an engine may know a stay is sold out
	// without looking at the token).
	ReserveSpending(ctx context.Context, r *Reservation, token string, expires time.Time) (existing string, err error)
	// Release returns a reservation's units and frees the user's limit. It
	// is idempotent: releasing an order that is not active does nothing,
	// and releasing a pinned one only unpins it (see Retake).
	// The idempotency key stays bound to the order.
	Release(ctx context.Context, saleID, orderID string) error
	// Retake reactivates a released reservation (payment arrived after the
	// hold expired), with the same checks as Reserve. ErrSoldOut or
	// ErrLimitExceeded if it cannot. Retaking a reservation that is still
	// active pins it: the next Release of it keeps the units and only
	// unpins. The payment that retakes an expired hold may run before the
	// reaper's Release of that hold (the database expired it first); without
	// the pin, that late Release handed a paid order's rooms to another
	// guest and left the paid order uncounted in the engine: a phantom room.
	Retake(ctx context.Context, saleID, orderID string) error
	// Lookup returns the order ID bound to a user's idempotency key, or ErrNotFound.
	Lookup(ctx context.Context, saleID, userID, key string) (string, error)
	// Reservation returns a recorded reservation by order ID, or ErrNotFound.
	// The distributed shape uses it to answer for orders still in flight.
	Reservation(ctx context.Context, orderID string) (*Reservation, error)
	// SoldOut reports, without I/O, that a stay certainly cannot be served
	// (false when the engine cannot tell). The purchase path asks it before
	// spending a token, so a sold-out sale costs neither a token nor a round
	// trip; a wrapper that dropped it would make every sold-out answer cost
	// one.
	SoldOut(saleID string, firstNight, nights int) bool
	// Shard names, without I/O, the part of the engine that holds a sale's
	// stock, where parts fail on their own (a Redis Cluster's master for the
	// sale's slot); "" when the engine fails as one. The circuit breaker
	// keeps one state per shard, so a dead master refuses only its own
	// sales' purchases.
	Shard(saleID string) string
}

// StockKeeper installs, adjusts and reads a sale's stock: preheat, the
// operators' changes, the audit, and the engine's health.
type StockKeeper interface {
	// Load installs a sale's stock from a snapshot (preheat, or rebuild at
	// start). If the sale is already loaded and has started at now, it
	// returns ErrAlreadyStarted and changes nothing, so a stray preheat can
	// never reset stock mid-sale. A zero now always loads: only the fenced
	// rebuild passes it, once nothing of the sale is in flight.
	Load(ctx context.Context, snap *StockSnapshot, now time.Time) error
	// AdjustStock adds delta units to one night of a loaded sale (a
	// negative delta takes them away) in one atomic step: ErrStockInUse
	// and nothing changes when fewer than -delta are available. Units it
	// adds are buyable at once, by every instance. ErrNotLoaded.
	AdjustStock(ctx context.Context, saleID string, night, delta int) error
	// SetStayRules replaces a loaded sale's stay rules (StayRules; one per
	// night, nil for none) in one atomic step: every Reserve that starts
	// after it returns judges the stay by them (CheckStay). Retake does
	// not: it completes a stay sold before the rule (a late payment, a
	// paid order counted again), and refusing it would leave a paid
	// order's rooms uncounted. Load takes the rules from the snapshot's
	// sale; this is the operator's change mid-sale. ErrNotLoaded; ErrInvalid
	// when rules is neither nil nor one per night.
	SetStayRules(ctx context.Context, saleID string, rules []StayRules) error
	// Retain keeps what the engine holds of a loaded sale at least as long
	// as Load of sale would: an operator moved its end later, mid-sale,
	// when a reload is refused (ErrAlreadyStarted). An engine whose records
	// expire on their own (Redis keys) extends them; one that keeps a sale
	// until Forget changes nothing. It never shortens what is kept.
	// ErrNotLoaded.
	Retain(ctx context.Context, sale *Sale) error
	// Available returns the units left per night, or ErrNotLoaded.
	Available(ctx context.Context, saleID string) ([]int, error)
	// AvailableOf is Available for many sales in one call: the units left
	// per night of each sale of saleIDs the engine has loaded, by ID; a
	// sale Available would answer ErrNotLoaded for is absent (by the same
	// checks, with the same effects); none for none, without I/O. It
	// exists for the phantom watch, for the reason Missing exists for the
	// heal loop. An error means the engine did not answer for them all;
	// the map then holds the sales it did answer for (an engine of shards,
	// one shard down), possibly none.
	AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error)
	// Missing returns the sales of saleIDs the engine does not have loaded
	// (those Available would answer ErrNotLoaded, by the same checks, with
	// the same effects), each once, in the order of saleIDs; none for
	// none. It exists for the heal loop, which asks after every live sale
	// four times a second: one Available each made an instance's idle
	// cost grow with the number of sales nobody buys (issue 26), and one
	// Missing is one call (a round trip per shard across the network)
	// however many there are. An error means the engine did not answer
	// for them all.
	Missing(ctx context.Context, saleIDs []string) ([]string, error)
	// Forget drops a sale that is over for good (ended, its last hold run
	// out and the late payments' window passed) from what the engine
	// keeps of it, so memory follows the live sales, not history: from
	// then on every call about it answers ErrNotLoaded, as after a
	// restart, and a late payment is refused as too late. The database
	// keeps every order; a reservation the order path has not confirmed
	// yet (Outbox) stays until it is. Forgetting an unknown sale does
	// nothing.
	Forget(ctx context.Context, saleID string) error
	// Snapshot returns the engine's whole view of a sale, in the shape
	// Store.Snapshot gives the database's: the units left per night (in
	// NightStock.Available; Stock, Held and Sold are the store's to know)
	// and every reservation it records, active or released, in no
	// particular order. ErrNotLoaded if it has none. The audit compares the
	// two; it is not a hot-path call.
	Snapshot(ctx context.Context, saleID string) (*StockSnapshot, error)
	// Ping reports whether the engine answers, for readiness and the
	// circuit breaker (an in-process engine always does).
	Ping(ctx context.Context) error
}

// Outbox closes the gap between "the engine took the units" and "the order
// path has the order": the engine records every reservation as
// unconfirmed in the same atomic step as the deduction, Confirm clears it
// once the queue confirmed the publish, and a relay republishes what stays
// unconfirmed (a crash, a lost confirm). Publishing twice is harmless: the
// order ID is the database's primary key.
type Outbox interface {
	// Confirm records that the order path has the order.
	Confirm(ctx context.Context, saleID, orderID string) error
	// Unconfirmed returns up to limit active reservations recorded at or
	// before olderThan and never confirmed, oldest first.
	Unconfirmed(ctx context.Context, olderThan time.Time, limit int) ([]Reservation, error)
}

// OrderWriter makes a reservation durable before the purchase is answered.
// The embedded shape group-commits it into the database and returns
// OrderHeld (or ErrSoldOut/ErrLimitExceeded/ErrKeyConflict when the database
// refused it and the order is failed); the distributed shape publishes it to
// the queue with a confirm and returns OrderPending. ErrUnavailable means it
// was not accepted and the caller must return the units.
type OrderWriter interface {
	Write(ctx context.Context, r *Reservation) (OrderStatus, error)
}
