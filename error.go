package flashsale

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
)

// Error codes are stable strings that clients branch on. The HTTP layer maps
// each to one status; anything that is not an *Error is internal.
const (
	EInvalid         = "invalid_request"
	EUnauthenticated = "unauthenticated"
	EForbidden       = "forbidden"
	ENotEligible     = "not_eligible"
	ETokenInvalid    = "token_invalid"
	// EChallengeFailed: the proof of work a token needs is missing, wrong,
	// expired or someone else's; solve a new challenge.
	EChallengeFailed = "challenge_failed"
	ENotFound        = "not_found"
	ESoldOut         = "sold_out"
	ELimitExceeded   = "limit_exceeded"
	ENotStarted      = "not_started"
	EEnded           = "ended"
	EHoldExpired     = "hold_expired"
	// EAlreadyPaid: the order was paid with another payment_ref; the
	// second charge is the platform's to refund. EOrderCancelled: the
	// guest cancelled before the payment arrived; refund it.
	EAlreadyPaid    = "already_paid"
	EOrderCancelled = "order_cancelled"
	// EOrderPending: the order is still on its way to the database (the
	// distributed shape's queue); retry after Retry-After.
	EOrderPending = "order_pending"
	// EKeyReused: the Idempotency-Key names an earlier purchase with
	// another stay or number of rooms; a new purchase needs a new key.
	EKeyReused      = "idempotency_key_reused"
	EAlreadyStarted = "already_started"
	// EPaused: the operator paused the sale; EStockInUse: rooms to take
	// away are held or sold.
	EPaused      = "paused"
	EStockInUse  = "stock_in_use"
	EConflict    = "conflict"
	ETooLarge    = "too_large"
	ERateLimited = "rate_limited"
	// ENotAdmitted: the sale has a waiting room and this guest's turn has
	// not come (or their admission lapsed).
	ENotAdmitted = "not_admitted"
	EUnavailable = "unavailable"
	EInternal    = "internal"
)

// Error is an application error: a stable code and a message safe to show a user.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, "" for nil
// and EInternal for anything else.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the user-safe message of err, hiding internal details.
func ErrorMessage(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return "internal error"
}

// Sentinels for the hot path: compared with errors.Is, never allocated per call.
var (
	ErrNotFound       = &Error{ENotFound, "not found"}
	ErrSoldOut        = &Error{ESoldOut, "sold out"}
	ErrLimitExceeded  = &Error{ELimitExceeded, "per-user limit reached for this sale"}
	ErrNotStarted     = &Error{ENotStarted, "the sale has not started"}
	ErrEnded          = &Error{EEnded, "the sale has ended"}
	ErrHoldExpired    = &Error{EHoldExpired, "the hold expired and the rooms were sold to someone else"}
	ErrAlreadyStarted = &Error{EAlreadyStarted, "the sale has already started; stock cannot be reset"}
	ErrTokenInvalid   = &Error{ETokenInvalid, "purchase token is invalid, expired or already used"}
	// The eligibility rules, one error each so the guest learns which
	// rule failed without an allocation per refusal.
	ErrNotEligible        = &Error{ENotEligible, "min_tier: your membership tier is below this sale's minimum"}
	ErrNotEligibleStays   = &Error{ENotEligible, "min_stays_30d: this sale needs more nights stayed in the last 30 days"}
	ErrNotEligibleChannel = &Error{ENotEligible, "channels: this sale is reserved for guests of its partner channels"}
	// ErrFactsUnavailable means the user service did not answer and holds
	// nothing cached for the user, so the rules cannot be checked: a 503,
	// never a guess either way.
	ErrFactsUnavailable = &Error{EUnavailable, "the user service is unavailable, so eligibility cannot be checked; retry shortly"}
	ErrUnavailable      = &Error{EUnavailable, "temporarily unavailable, retry shortly"}
	ErrInvalid          = &Error{EInvalid, "invalid request"}
	ErrRateLimited      = &Error{ERateLimited, "too many requests; retry after the time in Retry-After"}

	// ErrDuplicate means the order (or the idempotency key) already exists.
	// Callers treat it as success: the earlier order stands.
	ErrDuplicate = &Error{EConflict, "order already exists"}
	// ErrKeyConflict means a different order already holds the idempotency key.
	ErrKeyConflict = &Error{EConflict, "idempotency key already used by another order"}
	// ErrStale means a conditional transition found the order in another status.
	ErrStale = &Error{EConflict, "order changed concurrently"}
	// ErrIndeterminate means a call may or may not have taken effect (a
	// publish whose confirm never came, a call that timed out): it is a 503
	// to the caller, and the caller keeps what it recorded instead of
	// undoing it, so the relay or the audit can settle the outcome. It is
	// never guessed either way. Errors that wrap it wrap ErrUnavailable too.
	ErrIndeterminate = &Error{EUnavailable, "the outcome is not known yet; retry with the same Idempotency-Key to learn it"}
	// ErrNotLoaded means the stock engine has no stock for the sale (not preheated).
	ErrNotLoaded = &Error{EUnavailable, "sale stock is not loaded"}
	// ErrOverloaded means the instance, or the sale, has as many purchases
	// in progress as it takes: shed at once, never queued.
	ErrOverloaded = &Error{EUnavailable, "too many purchases in progress; retry shortly"}
)

// ErrOrderPending answers a payment or a cancellation of an order that is
// still being placed: it will be in a moment, so the caller retries.
var ErrOrderPending = &Error{EOrderPending, "the order is still being placed; retry after the time in Retry-After"}

// ErrKeyReused answers a purchase whose Idempotency-Key already names an
// order of another stay or number of rooms (Stripe's rule: a key is one
// request, and a different body under it is the client's mistake).
var ErrKeyReused = &Error{EKeyReused, "this Idempotency-Key was used for a purchase with another check_in, nights or rooms; use a new key for a new purchase"}

// ErrOrderCancelled answers a payment for an order its guest cancelled:
// the rooms went back on sale, the money goes back to the guest.
var ErrOrderCancelled = &Error{EOrderCancelled, "the guest cancelled this order before the payment arrived; refund it"}

// AlreadyPaid is the answer to a second payment of a paid order with
// another payment_ref: the order stays paid with the first, whose
// reference the message names so the platform refunds the other.
func AlreadyPaid(ref string) *Error {
	return Errorf(EAlreadyPaid, "the order is already paid with payment_ref %q; refund this payment", ref)
}

// ErrNotAdmitted answers a token (or a purchase) asked for through a
// waiting room by a guest it has not admitted.
var ErrNotAdmitted = &Error{ENotAdmitted, "this sale has a waiting room: join it (POST /api/sales/{id}/queue) and wait to be admitted"}

// ErrChallengeFailed means a token was asked for without the solved
// challenge the sale wants.
var ErrChallengeFailed = &Error{EChallengeFailed, "this sale asks for a solved proof-of-work challenge: POST /api/sales/{id}/challenge, then send its challenge and solution"}

// Unreachable reports whether err means a dependency did not answer rather
// than refused: ErrUnavailable in the chain, a deadline that passed, a
// network error, or a connection the database driver gave up on. Callers
// answer these 503 with Retry-After, never 500, and a queue consumer treats
// them as an outage to wait out rather than a message to give up on.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code == EUnavailable
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}
