package flashsale

import (
	"context"
	"time"
)

// SaleView is a sale at a moment: what the admin and public endpoints show.
type SaleView struct {
	*Sale
	Status     SaleStatus
	ServerTime time.Time
	// Nights carries the database's counters, except Available, which is
	// the stock engine's figure (what a guest can still buy).
	Nights []NightStock
}

// PurchaseRequest is one guest's attempt to buy.
type PurchaseRequest struct {
	SaleID         string
	IdempotencyKey string // optional; scoped to the user and sale
	Token          string // required when the sale has PurchaseToken
	CheckIn        string // defaults to the sale's first night
	Nights         int    // defaults to 1
	Rooms          int    // defaults to 1; a slot sale's quantity (covers, places)
	// Slot names a slot sale's unit, or a seats sale's departure,
	// "2026-12-24T19:00" (SlotLayout); required there, and only there, in
	// place of CheckIn and Nights.
	Slot string
	// ClientIP is the guest's address, for the per-address purchase limit.
	ClientIP string
}

// PurchaseToken is a one-time permission to buy, bound to a user, a sale and a price.
type PurchaseToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TokenRequest asks for a purchase token. Challenge and Solution are a
// solved Puzzle, required when the sale has a Challenge difficulty.
type TokenRequest struct {
	SaleID    string
	Challenge string
	Solution  string
}

// Puzzle is a proof-of-work challenge bound to one user and one sale: a
// Solution such that the Algorithm's hash of Challenge followed by it
// starts with Difficulty zero bits. The server keeps no state for it.
type Puzzle struct {
	Challenge  string
	Difficulty int
	ExpiresAt  time.Time
	Algorithm  string
}

// MaxSolution bounds a puzzle's solution: 64 characters of [A-Za-z0-9_-]
// (a decimal counter is the usual one).
const MaxSolution = 64

// Service is the use-case layer the HTTP API drives, by the roles its
// endpoints use: each group of handlers needs one, and a test's fake plays
// only the one it tests. Package funnel implements every role; its Roles
// method fills it.
type Service struct {
	Shop
	WaitingRooms
	SaleDesk
	Inventory
	Payments
	Records
	Operations
}

// ServiceOf is s in every role: what funnel's Roles does, for a value that
// plays them all (a test's fake, a wrapper that overrides a method).
func ServiceOf(s interface {
	Shop
	WaitingRooms
	SaleDesk
	Inventory
	Payments
	Records
	Operations
}) Service {
	return Service{Shop: s, WaitingRooms: s, SaleDesk: s, Inventory: s, Payments: s, Records: s, Operations: s}
}

// Shop is what guests do: read the sales, take a token, buy, read and
// cancel their orders.
type Shop interface {
	// PublicSale returns ErrNotFound for an unknown sale.
	PublicSale(ctx context.Context, id string) (*SaleView, error)
	// Sales lists upcoming and active sales.
	Sales(ctx context.Context) ([]*SaleView, error)
	// Challenge returns a puzzle for a sale that asks for one (EConflict
	// for a sale that does not).
	Challenge(ctx context.Context, u User, saleID string) (*Puzzle, error)
	IssueToken(ctx context.Context, u User, req TokenRequest) (*PurchaseToken, error)
	Purchase(ctx context.Context, u User, req PurchaseRequest) (*Order, error)
	// RefuseSoldOut answers, from memory and without I/O, a purchase of
	// an open sale of which this instance knows every night is sold out:
	// true means the answer is ErrSoldOut, counted as Purchase counts it.
	// The HTTP layer asks it before authenticating the guest or reading
	// the body: sold out is public (the sale view says so), who asks
	// changes nothing, and it is the answer a sale's last seconds are made
	// of. False when it cannot tell; Purchase then decides. A purchase
	// with an Idempotency-Key never comes here: its retry must find the
	// order it already has.
	RefuseSoldOut(ctx context.Context, saleID string) bool
	// Order returns the user's order; someone else's is ErrNotFound.
	Order(ctx context.Context, u User, id string) (*Order, error)
	Cancel(ctx context.Context, u User, id string) (*Order, error)
}

// SaleDesk is the operators' lifecycle of a sale (lifecycle.go). Each
// change is recorded in the sale's change log and reaches every instance
// within a second.
type SaleDesk interface {
	CreateSale(ctx context.Context, s *Sale) (*Sale, error)
	// AdminSale returns ErrNotFound for an unknown sale.
	AdminSale(ctx context.Context, id string) (*SaleView, error)
	// ListSales returns a page of sales (newest first) and the cursor of
	// the next page, "" after the last one. A page may hold fewer than
	// q.Limit sales when q.Status is active or sold_out.
	ListSales(ctx context.Context, q SaleQuery) ([]*SaleView, string, error)
	// UpdateSale applies an edit (see SalePatch.Apply for what may change
	// once the sale started); ErrEnded once it ended.
	UpdateSale(ctx context.Context, id string, p SalePatch) (*SaleView, error)
	// PauseSale pauses (or, with false, resumes) a sale: tokens and
	// purchases answer ErrPaused meanwhile. Idempotent.
	PauseSale(ctx context.Context, id string, paused bool) (*SaleView, error)
	// CloseSale ends a sale now. Idempotent.
	CloseSale(ctx context.Context, id string) (*SaleView, error)
	// DeleteSale removes a test sale and everything of it (ErrNotTestSale
	// for a real one), on every instance within a second.
	DeleteSale(ctx context.Context, id string) error
}

// Inventory is what operators change of a sale's nights while it sells:
// its rooms and its stay rules.
type Inventory interface {
	// AdjustStock adds rooms to a night, buyable at once, or takes back
	// rooms neither held nor sold (ErrStockInUse otherwise).
	AdjustStock(ctx context.Context, id string, d StockDelta) (*SaleView, error)
	// SetNightRules changes one night's stay rules (a partial patch) at
	// any time before the end: every purchase judged after it returns
	// obeys them; rooms already held or sold stay with their guests.
	SetNightRules(ctx context.Context, id, date string, p StayRulesPatch) (*SaleView, error)
}

// Payments is the payment platform's side of an order.
type Payments interface {
	// OrderByID returns any order, for the operators and the payment
	// service (their tokens, never a user's); ErrNotFound when none.
	OrderByID(ctx context.Context, id string) (*Order, error)
	// MarkPaid is the payment platform's confirmation: idempotent for one
	// payment_ref; a second ref on a paid order (EAlreadyPaid) and a
	// payment of a cancelled order (EOrderCancelled) are refused.
	MarkPaid(ctx context.Context, id, paymentRef string) (*Order, error)
}

// Records are what happened to a sale and its orders, for the operators.
type Records interface {
	// SaleChanges returns a sale's change log, oldest first.
	SaleChanges(ctx context.Context, id string) ([]SaleChange, error)
	// SaleOrders returns a page of a sale's orders (newest first) and the
	// next page's cursor, "" after the last one.
	SaleOrders(ctx context.Context, id string, q OrderQuery) ([]*Order, string, error)
	// Deliveries reads the order events' delivery log; NoticeStatus says
	// how far each configured transport's delivery is.
	Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	NoticeStatus(ctx context.Context) ([]NoticeTransport, error)
}

// Operations keep a sale's books and the instance's health.
type Operations interface {
	// Preheat reloads a sale's stock into the engine; ErrAlreadyStarted once it started.
	Preheat(ctx context.Context, id string) error
	// Audit proves one sale's books balance (I6), or lists what does not;
	// ErrNotFound for an unknown sale. An unbalanced sale is a report, not
	// an error.
	Audit(ctx context.Context, saleID string) (*Audit, error)
	// Repair does what is safe and idempotent about an audit's findings
	// (never touching the database's counters: the database is the truth),
	// then audits again and returns that report with the steps it took.
	Repair(ctx context.Context, saleID string) (*Audit, error)
	// Ready reports whether the service can sell now, and what each
	// dependency said.
	Ready(ctx context.Context) *Readiness
	// Breaker returns the stock engine's circuit breaker, and ForceBreaker
	// applies an operator's override to it; both ErrNotFound where there
	// is none (the embedded shape).
	Breaker(ctx context.Context) (*BreakerStatus, error)
	ForceBreaker(ctx context.Context, f BreakerForce) (*BreakerStatus, error)
}
