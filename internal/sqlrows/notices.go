package sqlrows

import (
	"database/sql"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale"
)

// The outbox of order events, as every store keeps it: the notices a
// transaction writes beside its change, decided here from what the
// transaction did, and the rows of the notices, cursors and deliveries
// tables read back. Each store writes its own SQL and its own lock that
// makes a notice's Seq follow commit order (see each store's notice.go).

// Night is one night of a sale as the outbox needs it: its index, its
// date (YYYY-MM-DD), its start_time (a slot's, "19:00"; "" for a stay's
// night) and the rooms available (stock - held - sold).
type Night struct {
	Idx       int
	Date      string
	Time      string
	Available int
}

// Stock is a sale's nights as a transaction that locked them read them,
// which it then follows through its own takes to tell when the last room
// goes.
type Stock struct {
	Currency string
	dates    map[int]string
	starts   map[int]string // the units with a start time (a slot sale's); nil for a stay
	avail    map[int]int
	soldOut  bool // every night at zero: the notice was made, or it was so before
}

// NewStock returns the stock of a sale with the given currency and nights,
// read before the transaction took any of them.
func NewStock(currency string, nights []Night) *Stock {
	st := &Stock{Currency: currency, dates: make(map[int]string, len(nights)), avail: make(map[int]int, len(nights))}
	for _, n := range nights {
		st.dates[n.Idx], st.avail[n.Idx] = n.Date, n.Available
		if n.Time != "" {
			if st.starts == nil {
				st.starts = make(map[int]string, len(nights))
			}
			st.starts[n.Idx] = n.Time
		}
	}
	st.soldOut = st.zero()
	return st
}

// CheckIn is the date of night idx, or "" when the sale has no such night
// (a failed order's stay may start past the last one).
func (st *Stock) CheckIn(idx int) string { return st.dates[idx] }

// Slot is the slot of unit idx as an order names it ("2026-12-24T19:00"),
// or "" when the unit is a stay's night or the sale has no such unit.
func (st *Stock) Slot(idx int) string { return Slot(st.dates[idx], st.starts[idx]) }

// Slot is an order's slot from its first unit's date and start_time, as
// the order reads and the outbox write it: "" for a stay's night (no
// start time) or no unit at all.
func Slot(date, start string) string {
	if start == "" || date == "" {
		return ""
	}
	return date + "T" + start
}

// Take follows a take of rooms on nights [first, first+nights) and reports
// whether it took the sale's last room: every night at zero after it and
// not before it. It reports true at most once.
func (st *Stock) Take(first, nights, rooms int) bool {
	for i := first; i < first+nights; i++ {
		st.avail[i] -= rooms
	}
	if st.soldOut || !st.zero() {
		return false
	}
	st.soldOut = true
	return true
}

func (st *Stock) zero() bool {
	for _, n := range st.avail {
		if n > 0 {
			return false
		}
	}
	return len(st.avail) > 0
}

// PlaceNotices returns the notices of a PlaceOrders batch, in the order
// they go into the outbox: for each reservation in batch order, the
// OrderNotice of the order as inserted (held, or failed with its refusal's
// code as the reason, as every store writes it), none for ErrDuplicate,
// ErrNotFound and ErrInvalid (nothing was inserted); and right after the
// held order that took a sale's last room, its SoldOutNotice. stocks are
// the batch's sales read under lock before its takes; a batch places its
// orders as if one by one in batch order (see each store's PlaceOrders),
// so following the held ones through Take in that order finds the order
// after which every night is at zero. at is the batch's now in unix
// milliseconds.
func PlaceNotices(rs []flashsale.Reservation, results []error, stocks map[string]*Stock, atMS int64) []flashsale.Notice {
	at := FromMS(atMS)
	ns := make([]flashsale.Notice, 0, len(rs))
	for i := range rs {
		r, result := &rs[i], results[i]
		status, reason := flashsale.OrderHeld, ""
		switch {
		case result == nil:
		case errors.Is(result, flashsale.ErrSoldOut), errors.Is(result, flashsale.ErrLimitExceeded),
			errors.Is(result, flashsale.ErrKeyConflict):
			status, reason = flashsale.OrderFailed, flashsale.ErrorCode(result)
		default:
			continue
		}
		st := stocks[r.SaleID]
		o := PlacedOrder(r, status, reason, st, atMS)
		ns = append(ns, flashsale.OrderNotice(o, at))
		if status == flashsale.OrderHeld && st.Take(r.FirstNight, r.Nights, r.Rooms) {
			ns = append(ns, flashsale.SoldOutNotice(r.SaleID, r.OrderID, at))
		}
	}
	return ns
}

// PlacedOrder is the order PlaceOrders inserts for r, as Order reads it
// back: the currency, check-in date and slot from st (r's sale as the
// transaction read it), times at millisecond precision, created and
// updated at atMS.
func PlacedOrder(r *flashsale.Reservation, status flashsale.OrderStatus, reason string, st *Stock, atMS int64) *flashsale.Order {
	at := FromMS(atMS)
	o := &flashsale.Order{
		ID: r.OrderID, SaleID: r.SaleID, UserID: r.UserID, Status: status, FirstNight: r.FirstNight,
		CheckIn: st.CheckIn(r.FirstNight), Slot: st.Slot(r.FirstNight), Nights: r.Nights, Rooms: r.Rooms,
		Amount: r.Amount, Currency: st.Currency, FailureReason: reason, CreatedAt: at, UpdatedAt: at,
	}
	if !r.HoldExpiresAt.IsZero() {
		o.HoldExpiresAt = FromMS(r.HoldExpiresAt.UnixMilli())
	}
	if reason != flashsale.ErrorCode(flashsale.ErrKeyConflict) {
		o.IdempotencyKey = r.IdempotencyKey
	}
	return o
}

// ExpireNotices returns the OrderNotice of each order ExpireHolds expired,
// at its now.
func ExpireNotices(orders []*flashsale.Order, atMS int64) []flashsale.Notice {
	ns := make([]flashsale.Notice, len(orders))
	for i, o := range orders {
		ns[i] = flashsale.OrderNotice(o, FromMS(atMS))
	}
	return ns
}

// TransitionNotices returns the notices of a transition that left o (as
// committed) in its new status at atMS: its OrderNotice, and the
// SoldOutNotice when the transition was a retake (expired or cancelled to
// paid) and stock, the sale's nights read under lock before the retake
// took its rooms, shows it took the last one.
func TransitionNotices(o *flashsale.Order, from flashsale.OrderStatus, stock *Stock, atMS int64) []flashsale.Notice {
	at := FromMS(atMS)
	ns := []flashsale.Notice{flashsale.OrderNotice(o, at)}
	if Retake(from, o.Status) && stock != nil && stock.Take(o.FirstNight, o.Nights, o.Rooms) {
		ns = append(ns, flashsale.SoldOutNotice(o.SaleID, o.ID, at))
	}
	return ns
}

// Retake reports whether a transition takes the order's rooms again (the
// one transition besides PlaceOrders that can sell a sale out).
func Retake(from, to flashsale.OrderStatus) bool {
	return to == flashsale.OrderPaid && (from == flashsale.OrderExpired || from == flashsale.OrderCancelled)
}

// Notices reads notice rows of NoticeColumns.
func Notices(rows Rows) ([]flashsale.Notice, error) {
	ns := []flashsale.Notice{}
	for rows.Next() {
		var (
			n   flashsale.Notice
			typ string
			at  int64
		)
		if err := rows.Scan(&n.Seq, &n.ID, &typ, &n.SaleID, &n.OrderID, &at, &n.Payload); err != nil {
			return nil, err
		}
		n.Type, n.At = flashsale.NoticeType(typ), FromMS(at)
		ns = append(ns, n)
	}
	return ns, rows.Err()
}

// NoticeColumns are the columns Notices reads, in its order.
const NoticeColumns = "seq, id, type, sale_id, order_id, at_ms, payload"

// Lease is one store's statements of ClaimNotices.
type Lease struct {
	// Take runs the conditional upsert of the transport's cursor and
	// returns its seq; held is false when another owner holds it.
	Take func() (cursor int64, held bool, err error)
	// Read returns up to limit notices after cursor, in seq order.
	Read func(cursor int64, limit int) ([]flashsale.Notice, error)
}

// ClaimNotices is flashsale.Store.ClaimNotices around a store's
// statements: the names checked, the lease taken, then the notices read
// (none for a limit below 1, the lease still taken).
func ClaimNotices(transport, owner string, limit int, l Lease) ([]flashsale.Notice, bool, error) {
	if err := CheckLease(transport, owner); err != nil {
		return nil, false, err
	}
	cursor, held, err := l.Take()
	if err != nil || !held {
		return nil, false, err
	}
	if limit < 1 {
		return []flashsale.Notice{}, true, nil
	}
	ns, err := l.Read(cursor, limit)
	if err != nil {
		return nil, false, err
	}
	return ns, true, nil
}

// AckNotices is flashsale.Store.AckNotices around a store's conditional
// update of the cursor (seq never lowered, where owner is the owner),
// which reports whether it found owner's cursor: ErrStale when not.
func AckNotices(transport, owner string, update func() (found bool, err error)) error {
	if err := CheckLease(transport, owner); err != nil {
		return err
	}
	found, err := update()
	if err == nil && !found {
		err = flashsale.ErrStale
	}
	return err
}

// MaxName is the longest transport or owner name the cursors keep.
const MaxName = 64

// CheckLease refuses a claim or an ack whose transport or owner is empty
// or longer than MaxName.
func CheckLease(transport, owner string) error {
	for _, v := range []struct{ name, value string }{{"transport", transport}, {"owner", owner}} {
		if v.value == "" || len(v.value) > MaxName {
			return flashsale.Errorf(flashsale.EInvalid, "%s must be 1 to %d bytes", v.name, MaxName)
		}
	}
	return nil
}

// MaxDeliveryError is the longest delivery error the log keeps, in
// characters.
const MaxDeliveryError = 1000

// CheckDelivery refuses a delivery the log cannot keep (no transport, or
// one longer than MaxName; a notice ID longer than the notices' column)
// and returns d with its error cut as the log keeps it.
func CheckDelivery(d flashsale.Delivery) (flashsale.Delivery, error) {
	if d.Transport == "" || len(d.Transport) > MaxName {
		return d, flashsale.Errorf(flashsale.EInvalid, "transport must be 1 to %d bytes", MaxName)
	}
	if len(d.NoticeID) > MaxNoticeID {
		return d, flashsale.Errorf(flashsale.EInvalid, "notice id is longer than %d bytes", MaxNoticeID)
	}
	d.Error = cut(d.Error, MaxDeliveryError)
	return d, nil
}

// DeliveryColumns are the columns Deliveries reads and DeliveryArgs
// writes, in their order.
const DeliveryColumns = "transport, notice_id, seq, type, attempt, at_ms, ok, status, error, took_ns"

// InsertDeliveries checks every one of ds (see CheckDelivery) and
// returns one INSERT of them all, in their order, with its arguments
// (times in unix milliseconds): "$n" placeholders when numbered, else "?".
// Nothing is returned for an empty ds, or when one fails its check.
func InsertDeliveries(ds []flashsale.Delivery, numbered bool) (string, []any, error) {
	if len(ds) > flashsale.MaxDeliveries {
		return "", nil, flashsale.Errorf(flashsale.EInvalid, "%d delivery attempts at once, at most %d", len(ds), flashsale.MaxDeliveries)
	}
	if len(ds) == 0 {
		return "", nil, nil
	}
	var q strings.Builder
	q.WriteString("INSERT INTO deliveries (" + DeliveryColumns + ") VALUES ")
	f := NewFilter(numbered) // for its placeholders and arguments
	for i, d := range ds {
		d, err := CheckDelivery(d)
		if err != nil {
			return "", nil, err
		}
		if i > 0 {
			q.WriteString(", ")
		}
		sep := "("
		for _, v := range []any{d.Transport, d.NoticeID, d.Seq, string(d.Type), d.Attempt, unixMS(d.At), d.OK, d.Status,
			d.Error, int64(d.Took)} {
			q.WriteString(sep + f.Arg(v))
			sep = ", "
		}
		q.WriteByte(')')
	}
	return q.String(), f.Args, nil
}

// MaxNoticeID is the width of the notices' id column: "<sale id>.sold_out.<order id>"
// with both IDs at their 64-byte limit fits.
const MaxNoticeID = 200

// Deliveries reads delivery rows of DeliveryColumns.
func Deliveries(rows Rows) ([]flashsale.Delivery, error) {
	ds := []flashsale.Delivery{}
	for rows.Next() {
		var (
			d       flashsale.Delivery
			typ     string
			at, ns  int64
			ok      bool
			attempt int
		)
		if err := rows.Scan(&d.Transport, &d.NoticeID, &d.Seq, &typ, &attempt, &at, &ok, &d.Status, &d.Error, &ns); err != nil {
			return nil, err
		}
		d.Type, d.Attempt, d.At, d.OK = flashsale.NoticeType(typ), attempt, FromMS(at), ok
		d.Took = time.Duration(ns)
		ds = append(ds, d)
	}
	return ds, rows.Err()
}

// Deliveries adds q's conditions on the deliveries table.
func (f *Filter) Deliveries(q flashsale.DeliveryQuery) {
	if q.Transport != "" {
		f.Add("transport = ?", q.Transport)
	}
	if q.NoticeID != "" {
		f.Add("notice_id = ?", q.NoticeID)
	}
	if q.Failed {
		f.Add("NOT ok")
	}
}

// unixMS is t in unix milliseconds, the zero time as 0 (which FromMS
// reads back as the zero time).
func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Collect returns a reader of a database/sql query's rows that reads them
// with scan and closes them: Collect(Notices)(db.QueryContext(...)).
func Collect[T any](scan func(Rows) (T, error)) func(*sql.Rows, error) (T, error) {
	return func(rows *sql.Rows, err error) (T, error) {
		if err != nil {
			var zero T
			return zero, err
		}
		defer rows.Close()
		return scan(rows)
	}
}

// cut returns s as valid UTF-8 (an invalid byte becomes U+FFFD) of at
// most n characters.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	k := 0
	for i := range s {
		if k == n {
			return s[:i]
		}
		k++
	}
	return s
}
