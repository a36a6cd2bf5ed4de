package http

import (
	"cmp"
	"io"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flashsale/flashsale"
)

// Bounds on a purchase request. They reject nonsense before the service
// sees it; the sale's own limits are the service's to enforce.
const (
	// MaxRooms matches funnel.MaxRooms and the largest per_user_limit.
	MaxRooms = 1000
	// MaxPurchaseToken bounds the purchase token string.
	MaxPurchaseToken = 512
	// MaxIdempotencyKey bounds the Idempotency-Key header.
	MaxIdempotencyKey = 128
	// MaxPaymentRef bounds a payment reference.
	MaxPaymentRef = 128
)

// purchaseWire is the wire form of a purchase. Nights and Rooms are
// pointers to tell an absent field (the default, 1) from a present 0.
type purchaseWire struct {
	Token   string `json:"token"`
	CheckIn string `json:"check_in"`
	Nights  *int   `json:"nights"`
	Rooms   *int   `json:"rooms"`
	// Slot and Quantity are a slot sale's: which slot, and how many of
	// its places (a table for 4 is 4 covers); quantity is rooms by
	// another name, so a request gives one or the other.
	Slot     string `json:"slot"`
	Quantity *int   `json:"quantity"`
	// Departure and Seats are a seats sale's names of the same two.
	Departure string `json:"departure"`
	Seats     *int   `json:"seats"`
}

// purchaseBody is a decoded purchase. Zero values mean "absent": the
// service applies the defaults (first night, 1 night, 1 room).
type purchaseBody struct {
	Token   string
	CheckIn string
	Nights  int
	Rooms   int
	Slot    string
}

// decodePurchase decodes a purchase body from untrusted input. Every field
// is optional and an empty body is the all-defaults purchase; a present
// nights or rooms must be at least 1. Errors are *flashsale.Error with
// EInvalid or ETooLarge.
func decodePurchase(r io.Reader) (purchaseBody, error) {
	buf, err := readBody(r)
	if err != nil {
		return purchaseBody{}, err
	}
	defer putBuf(buf)
	f, ok := scanPurchase(buf.Bytes())
	if !ok {
		if f, err = decodePurchaseJSON(buf.Bytes()); err != nil {
			return purchaseBody{}, err
		}
	}
	return f.check()
}

// decodePurchaseJSON is the strict decoder's reading of a purchase body,
// for what scanPurchase leaves to it.
func decodePurchaseJSON(b []byte) (purchaseFields, error) {
	var w purchaseWire
	if err := decodeJSON(b, &w, true); err != nil {
		return purchaseFields{}, err
	}
	f := purchaseFields{Token: w.Token, CheckIn: w.CheckIn, HasNights: w.Nights != nil, HasRooms: w.Rooms != nil, Slot: w.Slot}
	if w.Nights != nil {
		f.Nights = *w.Nights
	}
	if w.Rooms != nil {
		f.Rooms = *w.Rooms
	}
	if w.Departure != "" {
		if w.Slot != "" {
			return purchaseFields{}, flashsale.Errorf(flashsale.EInvalid, "give slot or departure, not both")
		}
		f.Slot = w.Departure
	}
	for _, q := range []struct {
		name string
		v    *int
	}{{"quantity", w.Quantity}, {"seats", w.Seats}} {
		if q.v == nil {
			continue
		}
		if f.HasRooms {
			return purchaseFields{}, flashsale.Errorf(flashsale.EInvalid, "give one of rooms, quantity and seats: they are one number")
		}
		f.Rooms, f.HasRooms, f.roomsName = *q.v, true, q.name
	}
	return f, nil
}

// check applies a purchase's bounds.
func (f purchaseFields) check() (purchaseBody, error) {
	b := purchaseBody{Token: f.Token, CheckIn: f.CheckIn, Slot: f.Slot}
	if f.Slot != "" {
		if _, err := time.Parse(flashsale.SlotLayout, f.Slot); err != nil {
			return purchaseBody{}, flashsale.Errorf(flashsale.EInvalid, "slot (or departure) must be a date and a start like 2026-12-24T19:00")
		}
	}
	if len(f.Token) > MaxPurchaseToken {
		return purchaseBody{}, flashsale.Errorf(flashsale.EInvalid, "token is longer than %d bytes", MaxPurchaseToken)
	}
	if f.CheckIn != "" {
		if _, err := time.Parse(flashsale.DateLayout, f.CheckIn); err != nil {
			return purchaseBody{}, flashsale.Errorf(flashsale.EInvalid, "check_in must be a date like 2026-12-24")
		}
	}
	if f.HasNights {
		if f.Nights < 1 || f.Nights > flashsale.MaxNights {
			return purchaseBody{}, flashsale.Errorf(flashsale.EInvalid, "nights must be between 1 and %d", flashsale.MaxNights)
		}
		b.Nights = f.Nights
	}
	if f.HasRooms {
		if f.Rooms < 1 || f.Rooms > MaxRooms {
			name := cmp.Or(f.roomsName, "rooms")
			return purchaseBody{}, flashsale.Errorf(flashsale.EInvalid, "%s must be between 1 and %d", name, MaxRooms)
		}
		b.Rooms = f.Rooms
	}
	return b, nil
}

// idempotencyKey returns the optional Idempotency-Key header: absent is "",
// present must be a single value of 1 to 128 printable ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	vs, ok := r.Header["Idempotency-Key"]
	if !ok {
		return "", nil
	}
	if len(vs) != 1 || !printableASCII(vs[0], MaxIdempotencyKey) {
		return "", errBadIdempotencyKey
	}
	return vs[0], nil
}

var errBadIdempotencyKey = flashsale.Errorf(flashsale.EInvalid,
	"Idempotency-Key must be one value of 1 to %d printable ASCII characters", MaxIdempotencyKey)

// paidBody is the payment platform's confirmation.
type paidBody struct {
	PaymentRef string `json:"payment_ref"`
}

// decodePaid decodes a payment confirmation: payment_ref is required, 1 to
// 128 characters of valid UTF-8 without control characters.
func decodePaid(r io.Reader) (paidBody, error) {
	var b paidBody
	if err := decodeBody(r, &b, false); err != nil {
		return paidBody{}, err
	}
	if !validText(b.PaymentRef, MaxPaymentRef) {
		return paidBody{}, flashsale.Errorf(flashsale.EInvalid,
			"payment_ref is required: 1 to %d characters, no control characters", MaxPaymentRef)
	}
	return b, nil
}

// validText reports whether s is 1 to max runes of valid UTF-8 with no
// control characters.
func validText(s string, max int) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return false
		}
	}
	return true
}

// orderJSON is an order as its owner (and the payment platform) sees it.
type orderJSON struct {
	ID      string                `json:"order_id"`
	SaleID  string                `json:"sale_id"`
	UserID  string                `json:"user_id"`
	Status  flashsale.OrderStatus `json:"status"`
	CheckIn string                `json:"check_in"`
	// Slot is a slot sale's order's slot (its date is check_in).
	Slot          string    `json:"slot,omitempty"`
	Nights        int       `json:"nights"`
	Rooms         int       `json:"rooms"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	HoldExpiresAt time.Time `json:"hold_expires_at"`
	PaymentRef    string    `json:"payment_ref,omitempty"`
	FailureReason string    `json:"failure_reason,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
}

func orderView(o *flashsale.Order) orderJSON {
	return orderJSON{
		ID: o.ID, SaleID: o.SaleID, UserID: o.UserID, Status: o.Status, CheckIn: o.CheckIn, Slot: o.Slot,
		Nights: o.Nights, Rooms: o.Rooms, Amount: o.Amount, Currency: o.Currency,
		HoldExpiresAt: o.HoldExpiresAt, PaymentRef: o.PaymentRef, FailureReason: o.FailureReason,
		CreatedAt: o.CreatedAt,
	}
}

// acceptedJSON answers a purchase: enough to pay for it or poll it.
type acceptedJSON struct {
	OrderID       string                `json:"order_id"`
	Status        flashsale.OrderStatus `json:"status"`
	HoldExpiresAt time.Time             `json:"hold_expires_at"`
	Amount        int64                 `json:"amount"`
	Currency      string                `json:"currency"`
	// Slot names the slot or departure a slot or seats sale's purchase took.
	Slot string `json:"slot,omitempty"`
}

// userAndID authenticates a request and reads the ID in its path: the
// first two steps of every handler that acts for a user on one sale or
// order, in the order that rejects anonymous floods cheapest. On failure it
// has written the error answer and ok is false.
func (s *Server) userAndID(w http.ResponseWriter, r *http.Request) (u flashsale.User, id string, ok bool) {
	return s.userAnd(w, r, r.PathValue("id"))
}

// readerAndID is userAndID for a read, counted against the per-address
// read rate first.
func (s *Server) readerAndID(w http.ResponseWriter, r *http.Request) (flashsale.User, string, bool) {
	if err := s.limitRead(r); err != nil {
		s.writeError(w, r, err)
		return flashsale.User{}, "", false
	}
	return s.userAndID(w, r)
}

// userAnd is userAndID with the {id} value already read (fastRoute).
func (s *Server) userAnd(w http.ResponseWriter, r *http.Request, rawID string) (u flashsale.User, id string, ok bool) {
	u, err := s.authenticate(r)
	if err == nil {
		id, err = checkID(rawID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return flashsale.User{}, "", false
	}
	return u, id, true
}

// writeOrder answers with the order a service call returned, or with its
// error.
func (s *Server) writeOrder(w http.ResponseWriter, r *http.Request, o *flashsale.Order, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, orderView(o))
}

// withID serves an idHandler from the mux: its {id} is the path value.
func withID(h idHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { h(w, r, r.PathValue("id")) }
}

// issueToken takes an optional body: the solved challenge of a sale that
// asks for one (see handleChallenge).
func (s *Server) issueToken(w http.ResponseWriter, r *http.Request, rawID string) {
	u, id, ok := s.userAnd(w, r, rawID)
	if !ok {
		return
	}
	b, err := decodeTokenRequest(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b.SaleID = id
	t, err := s.svc.IssueToken(r.Context(), u, b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeToken(w, t)
}

// writeToken writes a purchase token without reflection: it is the most
// frequent success in a sale's opening second. Tokens are base64url and
// '.', so they need no JSON escaping; writeJSON is used for anything else.
func writeToken(w http.ResponseWriter, t *flashsale.PurchaseToken) {
	for i := 0; i < len(t.Token); i++ {
		if c := t.Token[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			writeJSON(w, http.StatusCreated, t)
			return
		}
	}
	b := make([]byte, 0, 48+len(t.Token)+len(time.RFC3339Nano))
	b = append(b, `{"token":"`...)
	b = append(b, t.Token...)
	b = append(b, `","expires_at":"`...)
	b = t.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, "\"}\n"...)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}

// purchase is the hot path (a sale known sold out was answered before it:
// see answerSoldOut). It authenticates first (cheapest rejection of
// anonymous floods), then validates everything it can before the service
// spends any I/O.
func (s *Server) purchase(w http.ResponseWriter, r *http.Request, rawID string) {
	u, id, ok := s.userAnd(w, r, rawID)
	if !ok {
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := decodePurchase(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.svc.Purchase(r.Context(), u, flashsale.PurchaseRequest{
		SaleID: id, IdempotencyKey: key, Token: b.Token,
		CheckIn: b.CheckIn, Nights: b.Nights, Rooms: b.Rooms, Slot: b.Slot, ClientIP: s.clientIP(r),
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, acceptedJSON{
		OrderID: o.ID, Status: o.Status, HoldExpiresAt: o.HoldExpiresAt, Amount: o.Amount, Currency: o.Currency, Slot: o.Slot,
	})
}

func (s *Server) handleOrder(w http.ResponseWriter, r *http.Request) {
	if s.isPayment(r) || s.isAdmin(r) {
		// The payment service and the operators read any order.
		id, err := pathID(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		o, err := s.svc.OrderByID(r.Context(), id)
		s.writeOrder(w, r, o, err)
		return
	}
	u, id, ok := s.readerAndID(w, r)
	if !ok {
		return
	}
	o, err := s.svc.Order(r.Context(), u, id)
	s.writeOrder(w, r, o, err)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	u, id, ok := s.userAndID(w, r)
	if !ok {
		return
	}
	o, err := s.svc.Cancel(r.Context(), u, id)
	s.writeOrder(w, r, o, err)
}

func (s *Server) handlePaid(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := decodePaid(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.svc.MarkPaid(r.Context(), id, b.PaymentRef)
	s.writeOrder(w, r, o, err)
}
