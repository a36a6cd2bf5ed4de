package flashsale

import "time"

// OrderStatus is where an order is in its life.
type OrderStatus string

// Order statuses. pending exists only in the distributed shape, while the
// order is accepted (in the stock engine and the queue) but not yet in the
// database.
const (
	OrderPending   OrderStatus = "pending"
	OrderHeld      OrderStatus = "held"
	OrderPaid      OrderStatus = "paid"
	OrderExpired   OrderStatus = "expired"
	OrderCancelled OrderStatus = "cancelled"
	OrderFailed    OrderStatus = "failed"
)

// Active reports whether an order in this status holds stock.
func (s OrderStatus) Active() bool {
	return s == OrderPending || s == OrderHeld || s == OrderPaid
}

// CanBecome reports whether Store.Transition moves an order from s to to:
// a hold is paid, expires or is cancelled; an expired or cancelled hold may
// still be paid (if its rooms can be taken again). Every other pair is
// ErrInvalid.
func (s OrderStatus) CanBecome(to OrderStatus) bool {
	switch s {
	case OrderHeld:
		return to == OrderPaid || to == OrderExpired || to == OrderCancelled
	case OrderExpired, OrderCancelled:
		return to == OrderPaid
	}
	return false
}

// Reservation is what the stock engine records for one purchase and what
// travels down the order path: just enough to write the order row.
type Reservation struct {
	OrderID        string    `json:"order_id"`
	SaleID         string    `json:"sale_id"`
	UserID         string    `json:"user_id"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	FirstNight     int       `json:"first_night"` // index into Sale.Nights
	Nights         int       `json:"nights"`
	Rooms          int       `json:"rooms"`
	Amount         int64     `json:"amount"`
	HoldExpiresAt  time.Time `json:"hold_expires_at"`
	// Active is false once the reservation was released (expired, cancelled
	// or failed); its idempotency key still names the order.
	Active bool `json:"active"`
	// Choices, above 1, asks the engine to choose the one unit (Nights 1)
	// among Choices consecutive units from FirstNight: the first with
	// Rooms free, so a group takes its places from one unit, never split
	// (a shuttle's vehicles of one departure). Reserve sets FirstNight to
	// the unit it took; the recorded reservation names it, and nothing
	// after the reserve reads Choices. Stay rules do not apply to a choice.
	Choices int `json:"-"`
}

// Order is a purchase as the database knows it.
type Order struct {
	ID             string      `json:"order_id"`
	SaleID         string      `json:"sale_id"`
	UserID         string      `json:"user_id"`
	IdempotencyKey string      `json:"-"`
	Status         OrderStatus `json:"status"`
	FirstNight     int         `json:"-"`
	CheckIn        string      `json:"check_in"`
	// Slot is a slot sale's order's slot, "2026-12-24T19:00" in the
	// venue's zone (its date is CheckIn); "" for a stay.
	Slot          string    `json:"slot,omitempty"`
	Nights        int       `json:"nights"`
	Rooms         int       `json:"rooms"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	HoldExpiresAt time.Time `json:"hold_expires_at"`
	PaymentRef    string    `json:"payment_ref,omitempty"`
	// FailureReason says why a failed order failed, for its owner and the
	// audit ("sold_out", or what the order path gave up on).
	FailureReason string    `json:"failure_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Reservation returns the stock-engine view of the order.
func (o *Order) Reservation() Reservation {
	return Reservation{
		OrderID: o.ID, SaleID: o.SaleID, UserID: o.UserID, IdempotencyKey: o.IdempotencyKey,
		FirstNight: o.FirstNight, Nights: o.Nights, Rooms: o.Rooms, Amount: o.Amount,
		HoldExpiresAt: o.HoldExpiresAt, Active: o.Status.Active(),
	}
}

// StockSnapshot is a sale as the database knows it, enough to rebuild a
// stock engine: per-night counters and every order that names a user or an
// idempotency key.
type StockSnapshot struct {
	Sale         *Sale
	Nights       []NightStock
	Reservations []Reservation
}
