package flashsale

import (
	"context"
	"time"
)

// The waiting room's queue (issue 24): each sale with a waiting room keeps
// one queue of the guests who joined it. Those who joined before the
// start are put in order once, at the start, by the sale's draw (draw.go);
// later arrivals join the back in arrival order. Guests leave the front by
// admission (they may then take a purchase token until AdmittedUntil), or
// are skipped there when they stopped asking for their place. What a
// guest's place is, and who is admitted, is the Queue's; how many to
// admit, when, and what the stock allows is the funnel's.

// QueueState is where a guest stands in a sale's queue.
type QueueState string

const (
	// QueueWaiting: in the queue, not yet admitted.
	QueueWaiting QueueState = "waiting"
	// QueueAdmitted: may take a purchase token until AdmittedUntil.
	QueueAdmitted QueueState = "admitted"
	// QueueSoldOut: waiting, but every room left is spoken for; the place
	// is kept, and the queue moves again if rooms come back.
	QueueSoldOut QueueState = "sold_out"
	// QueueClosed: the sale ended.
	QueueClosed QueueState = "closed"
	// QueueExpired: the admission lapsed unused, or the guest was skipped
	// at the front because they had stopped asking; joining again goes to
	// the back.
	QueueExpired QueueState = "expired"
)

// Place is one guest's place in a sale's queue.
type Place struct {
	// Ticket names the place in the published draw; never the user.
	Ticket string
	State  QueueState
	// Rank is the place's position in the queue's order, 1 the first;
	// 0 before the draw has put the prequeue in order.
	Rank int
	// Ahead is how many guests still wait in front (0 before the draw).
	// It only ever decreases while the guest waits.
	Ahead int
	// AdmittedUntil is when an admission lapses if unused; Used, whether a
	// purchase token was taken with it.
	AdmittedUntil time.Time
	Used          bool
}

// QueueView is a guest's place as the API answers it.
type QueueView struct {
	// Ticket is the place's ID in the published draw: the guest finds it
	// in the draw's list to check their place.
	Ticket string     `json:"ticket"`
	State  QueueState `json:"state"`
	// Position is 1 for the next to be admitted (0 once admitted, and
	// before the draw, when nobody's place is known: then Ahead is 0 too
	// and ETASeconds counts to the start).
	Position int `json:"position"`
	Ahead    int `json:"ahead"`
	// ETASeconds is the wait at the sale's admission rate.
	ETASeconds int `json:"eta_seconds"`
	// AdmittedUntil is when an unused admission lapses.
	AdmittedUntil *time.Time `json:"admitted_until,omitempty"`
	// PollAfterMS is when to ask again (a tenth of the wait, 1 to 10 s).
	PollAfterMS int `json:"poll_after_ms"`
	// RoomsLeft is the rooms the stock engine has left, every night.
	RoomsLeft int `json:"rooms_left"`
}

// JoinRequest is a guest's join of a sale's waiting room: a sale with a
// proof-of-work challenge asks for its solution here rather than at the
// token (the admission is the proof then).
type JoinRequest struct {
	SaleID    string
	Challenge string
	Solution  string
	// ClientIP is the guest's address, for the per-address join limit.
	ClientIP string
}

// QueueReport is a sale's waiting room as its operators watch it.
type QueueReport struct {
	Stats QueueStats
	// Rate is the admissions a second the loop works to (the sale's, or
	// the one derived from its stock).
	Rate float64
	// Commitment is the draw's, published before the start; Seed is
	// revealed once the draw is made.
	Commitment, Seed string
}

// WaitingRooms is what guests do in a sale's waiting room (queue.go), and
// what its operators see of it.
type WaitingRooms interface {
	// JoinQueue gives the user a place (created false: the one they had);
	// ErrNotFound for a sale without a waiting room.
	JoinQueue(ctx context.Context, u User, req JoinRequest) (v *QueueView, created bool, err error)
	// QueueStatus is the user's place; ErrNotFound if they never joined.
	QueueStatus(ctx context.Context, u User, saleID string) (*QueueView, error)
	// QueueMoved is closed when the sale's queue next moves, so a stream
	// reads its guest's place again then rather than every second.
	QueueMoved(ctx context.Context, saleID string) (<-chan struct{}, error)
	// QueueDraw is the sale's published draw (only the commitment before
	// the start).
	QueueDraw(ctx context.Context, saleID string) (*Draw, error)
	// QueueReport is the queue's counts, pace and draw for the operators.
	QueueReport(ctx context.Context, saleID string) (*QueueReport, error)
}

// QueueStats are a queue's counts as of a moment.
type QueueStats struct {
	Drawn bool // the prequeue has been put in order
	// Joined counts the users who joined; Waiting those still waiting
	// (in the prequeue too); Admitted the admissions live and unused;
	// Used the admissions used; Expired the lapsed and skipped.
	Joined, Waiting, Admitted, Used, Expired int
	SoldOut                                  bool
}

// AdmitRule is one admission step's terms.
type AdmitRule struct {
	// For is how long an admission lasts unused.
	For time.Duration
	// IdleAfter: a guest not seen (joining or reading their place) for
	// longer is skipped when their turn comes; 0 never skips.
	IdleAfter time.Duration
	// Rate is the admissions a second. The queue keeps the clock: what the
	// rate has owed since the queue's last step (nothing at the first,
	// which starts the clock, and at most a second's worth: a stalled
	// queue banks no burst), so
	// instances stepping one queue together admit at Rate between them,
	// and a restarted one does not start the clock again.
	Rate float64
	// Left is the rooms the stock engine had left when the step began. The
	// step admits no more than Left less the admissions live and unused,
	// so every admitted guest can buy, whoever else steps at once; when
	// that leaves none for those waiting, the queue turns sold out, and
	// open again at a step that finds rooms (a hold ended, rooms added).
	Left int
	// Used is the queue's count of admissions used, read before Left was:
	// an admission used since may have taken its room after Left was
	// read, so the step counts it as still promised (a purchase spends its
	// admission just after it takes its room; without this a step between
	// the two would promise that room again).
	Used int
}

// Queue keeps the waiting rooms of sales: one order for every instance.
// Every method is safe for concurrent use.
type Queue interface {
	// Join gives userID a place in saleID's queue, as of at; the same
	// place on every call while it stands (created reports the first).
	// An expired place joins again at the back. While the queue is sold
	// out a user without a place gets ErrSoldOut.
	Join(ctx context.Context, saleID, userID string, at time.Time) (p Place, created bool, err error)
	// Place is userID's place as of at, and marks the guest seen (so not
	// skipped); ErrNotFound if they never joined.
	Place(ctx context.Context, saleID, userID string, at time.Time) (Place, error)
	// Draw puts the places taken so far in the order of the draw of
	// seedHex (DrawOrder) and returns that draw; every later join goes
	// to the back. Only the first call draws: later ones return the
	// same draw whatever their seed.
	Draw(ctx context.Context, saleID, seedHex string) (Draw, error)
	// Admit is one admission step, atomic however many instances step at
	// once: it lapses the admissions ended by at, then (after the draw
	// only) admits the guests at the front that rule's rate owes and its
	// stock allows, skipping those idle, and sets the sold-out flag by
	// rule.Left. It returns who it admitted and skipped, and the counts
	// after.
	Admit(ctx context.Context, saleID string, at time.Time, rule AdmitRule) (Admission, error)
	// Use spends userID's admission (they took a purchase token);
	// ErrNotAdmitted unless it is live at at. Using it again is no error.
	Use(ctx context.Context, saleID, userID string, at time.Time) error
	// Stats are the queue's counts as of at; zero for a sale without one.
	Stats(ctx context.Context, saleID string, at time.Time) (QueueStats, error)
	// Drop forgets saleID's queue (the sale ended or was deleted).
	Drop(ctx context.Context, saleID string) error
	// Restore puts back what a lost or stale queue is missing from its
	// records (QueueRecords): the recorded draw, if it has none; every
	// recorded place it lacks, at its rank (a place from before the draw
	// at its place in the draw's order, or in the prequeue if there is no
	// draw yet), admitted, skipped or used as recorded. Of a place it has
	// and a record of the same user, the later one (the higher rank) is
	// kept, and of the same place the further progress. A restored guest
	// counts as seen at at (a fault may have cut their stream). Restoring
	// the same records twice changes nothing.
	Restore(ctx context.Context, saleID string, d *Draw, places []PlaceRecord, at time.Time) error
}

// Admission is what one admission step did: the users it admitted and
// those it skipped (idle at their turn), in queue order, and the queue's
// counts after it.
type Admission struct {
	Admitted, Skipped []string
	Stats             QueueStats
}

// PlaceRecord is a place as the database keeps it (QueueRecords), so a
// queue lost with its process or its Redis is rebuilt with every place it
// held: who, under which ticket, where in the order, and how far they got.
type PlaceRecord struct {
	UserID, Ticket string
	// Rank is the place's rank in the queue's order when it was taken
	// after the draw; 0 for a place taken before it (the draw ranks it).
	Rank     int
	JoinedAt time.Time
	// AdmittedUntil is when the place's admission lapses; zero until it
	// is admitted. Skipped: passed over at its turn, its guest idle.
	// Used: its admission bought a purchase token.
	AdmittedUntil time.Time
	Skipped, Used bool
}

// QueueRecords keeps the waiting rooms' places and draws in the database
// (the truth a Queue is rebuilt from). A place is recorded before its
// guest is told they have it; the steps after it (admitted, skipped,
// used) as they happen, so a rebuilt queue may be a step behind but never
// misses a place.
type QueueRecords interface {
	// RecordPlaces stores places taken: new ones, or a place taken again
	// at the back after it expired (one record per sale and user: a record
	// with another ticket or rank replaces the old one and its progress;
	// the same one again changes nothing).
	RecordPlaces(ctx context.Context, saleID string, places []PlaceRecord) error
	// RecordPassed marks the places that left the front at an admission
	// step: the users admitted, until until, and the users skipped.
	RecordPassed(ctx context.Context, saleID string, admitted []string, until time.Time, skipped []string) error
	// RecordUse marks the user's admission used.
	RecordUse(ctx context.Context, saleID, userID string) error
	// RecordDraw stores a sale's draw (seed, tickets, order); the first
	// recorded is kept, later ones change nothing.
	RecordDraw(ctx context.Context, d Draw) error
	// QueueRecord returns the sale's recorded draw (nil if none) and its
	// places, those ranked in rank order after those not, which come in
	// the order they joined.
	QueueRecord(ctx context.Context, saleID string) (*Draw, []PlaceRecord, error)
}
