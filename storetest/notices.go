package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The outbox of order events: every change of an order's status writes
// exactly its notice in the change's transaction, a sale's last room going
// writes one sale.sold_out, nothing else writes any, and the cursors and
// the delivery log behave as flashsale.Store says.

// wireNotice is an event's JSON as a receiver reads it, decoded here
// independently of the root package's encoder.
type wireNotice struct {
	ID         string               `json:"id"`
	Type       flashsale.NoticeType `json:"type"`
	OccurredAt time.Time            `json:"occurred_at"`
	SaleID     string               `json:"sale_id"`
	OrderID    string               `json:"order_id"`
	Order      *wireOrder           `json:"order"`
}

type wireOrder struct {
	OrderID       string                `json:"order_id"`
	UserID        string                `json:"user_id"`
	Status        flashsale.OrderStatus `json:"status"`
	CheckIn       string                `json:"check_in"`
	Slot          string                `json:"slot"`
	Nights        int                   `json:"nights"`
	Rooms         int                   `json:"rooms"`
	Amount        int64                 `json:"amount"`
	Currency      string                `json:"currency"`
	HoldExpiresAt time.Time             `json:"hold_expires_at"`
	PaymentRef    string                `json:"payment_ref"`
	FailureReason string                `json:"failure_reason"`
}

// notice is a Notice with its payload decoded, Seq left out: what a test
// expects of one.
type notice struct {
	ID      string
	Type    flashsale.NoticeType
	SaleID  string
	OrderID string
	At      time.Time
	Body    wireNotice
}

// statusTypes are the event types of order statuses, written out here.
var statusTypes = map[flashsale.OrderStatus]flashsale.NoticeType{
	flashsale.OrderHeld: "order.held", flashsale.OrderPaid: "order.paid", flashsale.OrderExpired: "order.expired",
	flashsale.OrderCancelled: "order.cancelled", flashsale.OrderFailed: "order.failed",
}

// orderWant is the notice of o having reached its status, o read from the
// store right after the change: at its UpdatedAt, the payload its fields.
func orderWant(o *flashsale.Order) notice {
	id := o.ID + "." + string(o.Status)
	return notice{ID: id, Type: statusTypes[o.Status], SaleID: o.SaleID, OrderID: o.ID, At: o.UpdatedAt,
		Body: wireNotice{ID: id, Type: statusTypes[o.Status], OccurredAt: o.UpdatedAt, SaleID: o.SaleID, Order: &wireOrder{
			OrderID: o.ID, UserID: o.UserID, Status: o.Status, CheckIn: o.CheckIn, Slot: o.Slot, Nights: o.Nights, Rooms: o.Rooms,
			Amount: o.Amount, Currency: o.Currency, HoldExpiresAt: o.HoldExpiresAt, PaymentRef: o.PaymentRef,
			FailureReason: o.FailureReason,
		}}}
}

// soldOutWant is the sale.sold_out of o taking its sale's last room, at
// o's UpdatedAt (the change that took it).
func soldOutWant(o *flashsale.Order) notice {
	id := o.SaleID + ".sold_out." + o.ID
	return notice{ID: id, Type: "sale.sold_out", SaleID: o.SaleID, OrderID: o.ID, At: o.UpdatedAt,
		Body: wireNotice{ID: id, Type: "sale.sold_out", OccurredAt: o.UpdatedAt, SaleID: o.SaleID, OrderID: o.ID}}
}

// decode decodes ns' payloads and checks their Seqs rise.
func decode(tb testing.TB, ns []flashsale.Notice) []notice {
	tb.Helper()
	got := make([]notice, len(ns))
	for i, n := range ns {
		if i > 0 && n.Seq <= ns[i-1].Seq {
			tb.Errorf("notice %s: seq %d after %d: not in seq order", n.ID, n.Seq, ns[i-1].Seq)
		}
		got[i] = notice{ID: n.ID, Type: n.Type, SaleID: n.SaleID, OrderID: n.OrderID, At: n.At}
		if err := json.Unmarshal(n.Payload, &got[i].Body); err != nil {
			tb.Errorf("notice %s: payload %q: %v", n.ID, n.Payload, err)
		}
	}
	return got
}

// readers names a fresh transport for every read of the whole outbox.
var readers atomic.Int64

// outbox returns every notice in the outbox, in seq order, as a transport
// claimed for the first time sees it.
func outbox(tb testing.TB, s flashsale.Store) []flashsale.Notice {
	tb.Helper()
	transport := fmt.Sprintf("read%d", readers.Add(1))
	ns, ok, err := s.ClaimNotices(tb.Context(), transport, "test", time.Now().Add(time.Minute), 100000)
	if err != nil || !ok {
		tb.Fatalf("ClaimNotices(%s) = %v, %v", transport, ok, err)
	}
	return ns
}

// checkOutbox compares the whole outbox with want, in order.
func checkOutbox(tb testing.TB, s flashsale.Store, want ...notice) {
	tb.Helper()
	if diff := cmp.Diff(want, decode(tb, outbox(tb, s)), msTime, cmpopts.EquateEmpty()); diff != "" {
		tb.Errorf("outbox mismatch (-want +got):\n%s", diff)
	}
}

func testNotices(t *testing.T, open OpenFunc) {
	t.Run("HeldThenPaid", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("n", 2, 5, 5))
		placeWant(t, s, []error{nil}, res("o1", "n", "u1", "k1", 1, 1, 2))
		held := mustOrder(t, s, "o1")
		checkOutbox(t, s, orderWant(held))
		paid := mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1")
		if paid.CheckIn != "2026-12-25" || paid.PaymentRef != "pay-1" {
			t.Errorf("paid order = %+v, want check-in 2026-12-25 and ref pay-1", paid)
		}
		checkOutbox(t, s, orderWant(held), orderWant(mustOrder(t, s, "o1")))
	})

	t.Run("LatePayment", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("n", 2, 5))
		placeWant(t, s, []error{nil}, res("o1", "n", "u1", "", 0, 1, 1))
		held := mustOrder(t, s, "o1")
		mustExpire(t, s, now.Add(time.Hour), 10)
		expired := mustOrder(t, s, "o1")
		if got, want := expired.UpdatedAt, now.Add(time.Hour); !got.Equal(want) {
			t.Fatalf("expired at %v, want %v", got, want)
		}
		mustTransition(t, s, "o1", flashsale.OrderExpired, flashsale.OrderPaid, "late")
		checkOutbox(t, s, orderWant(held), orderWant(expired), orderWant(mustOrder(t, s, "o1")))
	})

	t.Run("Cancelled", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("n", 2, 5))
		placeWant(t, s, []error{nil}, res("o1", "n", "u1", "", 0, 1, 1))
		held := mustOrder(t, s, "o1")
		mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderCancelled, "")
		checkOutbox(t, s, orderWant(held), orderWant(mustOrder(t, s, "o1")))
	})

	t.Run("Failed", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("n", 3, 2))
		placeWant(t, s, []error{flashsale.ErrSoldOut, flashsale.ErrLimitExceeded, nil, flashsale.ErrKeyConflict},
			res("o1", "n", "u1", "", 0, 1, 3),
			res("o2", "n", "u2", "", 0, 1, 4),
			res("o3", "n", "u3", "k", 0, 1, 1),
			res("o4", "n", "u3", "k", 0, 1, 1))
		if err := s.FailOrder(t.Context(), res("o5", "n", "u5", "k5", 0, 1, 1), "the queue gave up"); err != nil {
			t.Fatal(err)
		}
		// A stay past the sale's last night has no check-in date.
		if err := s.FailOrder(t.Context(), res("o6", "n", "u6", "", 4, 1, 1), "refused"); err != nil {
			t.Fatal(err)
		}
		var want []notice
		for id, reason := range map[string]string{
			"o1": flashsale.ErrorCode(flashsale.ErrSoldOut), "o2": flashsale.ErrorCode(flashsale.ErrLimitExceeded),
			"o3": "", "o4": flashsale.ErrorCode(flashsale.ErrKeyConflict), "o5": "the queue gave up", "o6": "refused",
		} {
			if got := mustOrder(t, s, id).FailureReason; got != reason {
				t.Errorf("order %s failure reason = %q, want %q", id, got, reason)
			}
		}
		for _, id := range []string{"o1", "o2", "o3", "o4", "o5", "o6"} {
			want = append(want, orderWant(mustOrder(t, s, id)))
		}
		if want[5].Body.Order.CheckIn != "" {
			t.Errorf("o6 check-in = %q, want none", want[5].Body.Order.CheckIn)
		}
		checkOutbox(t, s, want...)
	})

	t.Run("NoneWithoutChange", func(t *testing.T) {
		s := open(t)
		mustCreateSale(t, s, newSale("n", 2, 5))
		placeWant(t, s, []error{nil}, res("o1", "n", "u1", "", 0, 1, 1))
		held := mustOrder(t, s, "o1")
		placeWant(t, s, []error{flashsale.ErrDuplicate, flashsale.ErrNotFound, flashsale.ErrInvalid},
			res("o1", "n", "u1", "", 0, 1, 1),
			res("o2", "nope", "u1", "", 0, 1, 1),
			res("o3", "n", "u1", "", 0, 1, 0))
		for _, c := range []struct {
			r    flashsale.Reservation
			want error
		}{
			{res("o1", "n", "u1", "", 0, 1, 1), flashsale.ErrDuplicate},
			{res("o4", "nope", "u1", "", 0, 1, 1), flashsale.ErrNotFound},
			{res("o5", "n", "u1", "", 0, 0, 1), flashsale.ErrInvalid},
		} {
			if err := s.FailOrder(t.Context(), c.r, "x"); !errors.Is(err, c.want) {
				t.Errorf("FailOrder(%s) = %v, want %v", c.r.OrderID, err, c.want)
			}
		}
		if _, err := s.Transition(t.Context(), "o1", flashsale.OrderExpired, flashsale.OrderPaid, "p", now); !errors.Is(err, flashsale.ErrStale) {
			t.Errorf("Transition(o1 expired -> paid) = %v, want ErrStale", err)
		}
		if _, err := s.Transition(t.Context(), "o9", flashsale.OrderHeld, flashsale.OrderPaid, "p", now); !errors.Is(err, flashsale.ErrNotFound) {
			t.Errorf("Transition(o9) = %v, want ErrNotFound", err)
		}
		if got := mustExpire(t, s, now, 10); len(got) != 0 {
			t.Errorf("ExpireHolds before the hold ended expired %v", orderIDs(got))
		}
		checkOutbox(t, s, orderWant(held))
	})

	t.Run("SlotOrders", func(t *testing.T) { testSlotNotices(t, open) })
	t.Run("SoldOut", func(t *testing.T) { testSoldOut(t, open) })
	t.Run("SoldOutBatch", func(t *testing.T) { testSoldOutBatch(t, open) })
	t.Run("Lease", func(t *testing.T) { testLease(t, open) })
	t.Run("LeaseRace", func(t *testing.T) { testLeaseRace(t, open) })
	t.Run("Cursor", func(t *testing.T) { testCursor(t, open) })
	t.Run("Deliveries", func(t *testing.T) { testDeliveries(t, open) })
	t.Run("Storm", func(t *testing.T) { testNoticeStorm(t, open) })
}

// testSlotNotices places, pays, cancels, expires and fails orders on a
// slot sale and on a stay: every event of a slot sale's order names its
// slot (order.slot, the first unit's date and start as a purchase names
// it), whichever path wrote it (PlaceOrders held and failed, Transition,
// ExpireHolds, FailOrder), and a stay's events, or a failed order's whose
// unit does not exist, carry no slot field at all.
func testSlotNotices(t *testing.T, open OpenFunc) {
	s := open(t)
	slots := slotSale("s1")
	slots.Nights[5].Stock = 1
	sale := mustCreateSale(t, s, slots)
	mustCreateSale(t, s, newSale("n", 4, 5, 5))
	placeWant(t, s, []error{nil, nil, nil, flashsale.ErrLimitExceeded, flashsale.ErrKeyConflict, flashsale.ErrSoldOut, nil, nil},
		res("o1", "s1", "u1", "k1", 1, 1, 2),
		res("o2", "s1", "u2", "k2", 4, 1, 3),
		res("o3", "s1", "u3", "", 2, 1, 1),
		res("o4", "s1", "u4", "", 0, 1, 5), // over the limit of 4
		res("o5", "s1", "u1", "k1", 3, 1, 1),
		res("o6", "s1", "u6", "", 5, 1, 2), // one cover left
		res("h1", "n", "u1", "", 0, 2, 1),
		res("h2", "n", "u2", "", 1, 1, 1))
	mustTransition(t, s, "o1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-1")
	mustTransition(t, s, "o3", flashsale.OrderHeld, flashsale.OrderCancelled, "")
	mustTransition(t, s, "h1", flashsale.OrderHeld, flashsale.OrderPaid, "pay-h1")
	for _, o := range mustExpire(t, s, now.Add(time.Hour), 10) {
		if want := map[string]string{"o2": sale.SlotName(4)}[o.ID]; o.Slot != want {
			t.Errorf("ExpireHolds returned %s with slot %q, want %q", o.ID, o.Slot, want)
		}
	}
	mustTransition(t, s, "o2", flashsale.OrderExpired, flashsale.OrderPaid, "late")
	mustTransition(t, s, "o3", flashsale.OrderCancelled, flashsale.OrderPaid, "late-3")
	for _, r := range []flashsale.Reservation{
		res("f1", "s1", "u7", "k7", 3, 1, 1),
		res("f2", "s1", "u8", "", 9, 1, 1), // past the last unit: no check-in, no slot
		res("f3", "n", "u9", "", 0, 1, 1),
	} {
		if err := s.FailOrder(t.Context(), r, "the queue gave up"); err != nil {
			t.Fatalf("FailOrder(%s): %v", r.OrderID, err)
		}
	}

	wantSlot := map[string]string{
		"o1": sale.SlotName(1), "o2": sale.SlotName(4), "o3": sale.SlotName(2), "o4": sale.SlotName(0),
		"o5": sale.SlotName(3), "o6": sale.SlotName(5), "f1": sale.SlotName(3),
	}
	ns := outbox(t, s)
	var got []string
	for _, n := range decode(t, ns) {
		got = append(got, n.ID)
		if n.Body.Order == nil {
			t.Errorf("notice %s has no order", n.ID)
			continue
		}
		if want := wantSlot[n.OrderID]; n.Body.Order.Slot != want {
			t.Errorf("notice %s: order.slot = %q, want %q", n.ID, n.Body.Order.Slot, want)
		}
		if o := mustOrder(t, s, n.OrderID); n.Body.Order.Slot != o.Slot || n.Body.Order.CheckIn != o.CheckIn {
			t.Errorf("notice %s: order.slot %q, check_in %q; the order reads %q, %q", n.ID, n.Body.Order.Slot, n.Body.Order.CheckIn, o.Slot, o.CheckIn)
		}
	}
	for _, n := range ns {
		var body struct {
			Order map[string]json.RawMessage `json:"order"`
		}
		if err := json.Unmarshal(n.Payload, &body); err != nil {
			t.Fatalf("notice %s: %v", n.ID, err)
		}
		if _, has := body.Order["slot"]; has != (wantSlot[n.OrderID] != "") {
			t.Errorf("notice %s: slot field present %v, want %v: %s", n.ID, has, !has, n.Payload)
		}
	}
	want := []string{"o1.held", "o2.held", "o3.held", "o4.failed", "o5.failed", "o6.failed", "h1.held", "h2.held",
		"o1.paid", "o3.cancelled", "h1.paid", "h2.expired", "o2.expired", "o2.paid", "o3.paid",
		"f1.failed", "f2.failed", "f3.failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outbox mismatch (-want +got):\n%s", diff)
	}
}

// testSoldOut takes a one-night sale's last room, gives one back and takes
// it again, by purchase and by a late payment: one sale.sold_out each time
// the last room goes, none otherwise.
func testSoldOut(t *testing.T, open OpenFunc) {
	s := open(t)
	mustCreateSale(t, s, newSale("n", 2, 2))
	var want []notice
	step := func(id string, soldOut bool) {
		t.Helper()
		o := mustOrder(t, s, id)
		want = append(want, orderWant(o))
		if soldOut {
			want = append(want, soldOutWant(o))
		}
	}
	placeWant(t, s, []error{nil}, res("o1", "n", "u1", "", 0, 1, 1))
	step("o1", false)
	placeWant(t, s, []error{nil}, res("o2", "n", "u2", "", 0, 1, 1))
	step("o2", true)
	mustTransition(t, s, "o2", flashsale.OrderHeld, flashsale.OrderCancelled, "")
	step("o2", false)
	placeWant(t, s, []error{nil}, res("o3", "n", "u3", "", 0, 1, 1))
	step("o3", true)
	// A retake that finds no room writes nothing.
	if _, err := s.Transition(t.Context(), "o2", flashsale.OrderCancelled, flashsale.OrderPaid, "p2", now); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("Transition(o2 cancelled -> paid) = %v, want ErrSoldOut", err)
	}
	checkOutbox(t, s, want...)

	// Both holds end: two rooms back. A purchase takes one, a late
	// payment the last; the other late payment finds none.
	if got := orderIDs(mustExpire(t, s, now.Add(time.Hour), 10)); !slices.Equal(got, []string{"o1", "o3"}) {
		t.Fatalf("ExpireHolds = %v, want [o1 o3]", got)
	}
	step("o1", false)
	step("o3", false)
	placeWant(t, s, []error{nil}, res("o4", "n", "u4", "", 0, 1, 1))
	step("o4", false)
	mustTransition(t, s, "o1", flashsale.OrderExpired, flashsale.OrderPaid, "p1")
	step("o1", true)
	if _, err := s.Transition(t.Context(), "o3", flashsale.OrderExpired, flashsale.OrderPaid, "p3", now); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("Transition(o3 expired -> paid) = %v, want ErrSoldOut", err)
	}
	checkOutbox(t, s, want...)

	// o4 gives its room back and o3's late payment takes it: o3 took the
	// last room before, so its sell-out's ID is taken. The store keeps the
	// first notice and the payment still commits.
	mustTransition(t, s, "o4", flashsale.OrderHeld, flashsale.OrderCancelled, "")
	step("o4", false)
	mustTransition(t, s, "o3", flashsale.OrderExpired, flashsale.OrderPaid, "p3")
	step("o3", false)
	checkOutbox(t, s, want...)
	checkNights(t, s, mustSale(t, s, "n"), hs{0, 2})

	// A two-night sale sells out when its last night goes, whichever it is.
	mustCreateSale(t, s, newSale("m", 3, 1, 2))
	placeWant(t, s, []error{nil}, res("m1", "m", "u1", "", 0, 1, 1))
	step("m1", false)
	placeWant(t, s, []error{nil}, res("m2", "m", "u2", "", 1, 1, 1))
	step("m2", false)
	placeWant(t, s, []error{nil}, res("m3", "m", "u3", "", 1, 1, 1))
	step("m3", true)
	checkOutbox(t, s, want...)
}

// testSoldOutBatch sells sales out inside one PlaceOrders batch: the
// notice goes right after the order after which every night is at zero,
// once, and a batch on a sale already sold out writes none.
func testSoldOutBatch(t *testing.T, open OpenFunc) {
	s := open(t)
	mustCreateSale(t, s, newSale("a", 3, 3))
	mustCreateSale(t, s, newSale("b", 3, 1, 2))
	mustCreateSale(t, s, newSale("c", 3, 2))
	placeWant(t, s, []error{nil, nil, nil, flashsale.ErrSoldOut},
		res("a1", "a", "u1", "", 0, 1, 1),
		res("a2", "a", "u2", "", 0, 1, 1),
		res("a3", "a", "u3", "", 0, 1, 1),
		res("a4", "a", "u4", "", 0, 1, 1))
	// A refusal in the middle: the stores place the batch one by one.
	placeWant(t, s, []error{nil, nil, flashsale.ErrSoldOut, nil, flashsale.ErrSoldOut},
		res("b1", "b", "u1", "", 0, 1, 1),
		res("b2", "b", "u2", "", 1, 1, 1),
		res("b3", "b", "u3", "", 0, 2, 1),
		res("b4", "b", "u4", "", 1, 1, 1),
		res("b5", "b", "u5", "", 1, 1, 1))
	// Two sales in one batch, each sold out by its own order.
	placeWant(t, s, []error{nil, flashsale.ErrNotFound},
		res("c1", "c", "u1", "", 0, 1, 2),
		res("x1", "x", "u1", "", 0, 1, 1))
	placeWant(t, s, []error{flashsale.ErrSoldOut}, res("c2", "c", "u2", "", 0, 1, 1))

	var want []notice
	for _, id := range []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4", "b5", "c1", "c2"} {
		o := mustOrder(t, s, id)
		want = append(want, orderWant(o))
		if id == "a3" || id == "b4" || id == "c1" {
			want = append(want, soldOutWant(o))
		}
	}
	// x1 is for a sale that does not exist: nothing.
	checkOutbox(t, s, want...)
}

// testLease takes, renews, refuses and takes over a transport's lease.
func testLease(t *testing.T, open OpenFunc) {
	s := open(t)
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	claim := func(transport, owner string, until time.Time, wantOK bool) {
		t.Helper()
		ns, ok, err := s.ClaimNotices(ctx, transport, owner, until, 10)
		if err != nil || ok != wantOK {
			t.Fatalf("ClaimNotices(%s, %s) = %v, %v; want ok %v", transport, owner, ok, err, wantOK)
		}
		if !ok && ns != nil {
			t.Errorf("a refused claim returned notices %v", ns)
		}
	}
	ack := func(transport, owner string, seq int64, want error) {
		t.Helper()
		if err := s.AckNotices(ctx, transport, owner, seq); !sameErr(err, want) {
			t.Fatalf("AckNotices(%s, %s, %d) = %v, want %v", transport, owner, seq, err, want)
		}
	}
	claim("webhook", "a", later, true)
	claim("webhook", "b", later, false)
	claim("webhook", "a", later.Add(time.Minute), true) // renewed by its owner
	ack("webhook", "b", 1, flashsale.ErrStale)
	ack("webhook", "a", 0, nil)
	claim("amqp", "b", later, true) // each transport has its own lease

	// a's lease runs out (renewed into the past): b takes over.
	claim("webhook", "a", time.Now().Add(-time.Second), true)
	claim("webhook", "b", later, true)
	ack("webhook", "a", 1, flashsale.ErrStale)
	claim("webhook", "a", later, false)
	ack("never", "a", 1, flashsale.ErrStale)

	long := strings.Repeat("x", 65)
	for _, c := range [][2]string{{"", "a"}, {"webhook", ""}, {long, "a"}, {"webhook", long}} {
		if _, _, err := s.ClaimNotices(ctx, c[0], c[1], later, 10); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("ClaimNotices(%q, %q) = %v, want %s", c[0], c[1], err, flashsale.EInvalid)
		}
		if err := s.AckNotices(ctx, c[0], c[1], 1); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("AckNotices(%q, %q) = %v, want %s", c[0], c[1], err, flashsale.EInvalid)
		}
	}
}

// testLeaseRace has several owners claim a transport nobody claimed
// before, at once: exactly one wins, and only it can ack.
func testLeaseRace(t *testing.T, open OpenFunc) {
	s := open(t)
	const owners = 6
	for round := range 5 {
		transport := fmt.Sprintf("t%d", round)
		var (
			wg    sync.WaitGroup
			won   [owners]bool
			start = make(chan struct{})
		)
		for i := range owners {
			wg.Go(func() {
				<-start
				_, ok, err := s.ClaimNotices(t.Context(), transport, fmt.Sprintf("o%d", i), time.Now().Add(time.Hour), 10)
				if err != nil {
					t.Errorf("ClaimNotices(%s, o%d): %v", transport, i, err)
				}
				won[i] = ok
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, ok := range won {
			want := error(flashsale.ErrStale)
			if ok {
				winners++
				want = nil
			}
			if err := s.AckNotices(t.Context(), transport, fmt.Sprintf("o%d", i), 0); !sameErr(err, want) {
				t.Errorf("AckNotices(%s, o%d) = %v, want %v", transport, i, err, want)
			}
		}
		if winners != 1 {
			t.Errorf("%s: %d owners won the first claim, want 1", transport, winners)
		}
	}
}

// testCursor walks the outbox in pages: a claim returns what follows the
// cursor, an ack moves it, never back, and a new transport starts before
// the first notice.
func testCursor(t *testing.T, open OpenFunc) {
	s := open(t)
	ctx := t.Context()
	mustCreateSale(t, s, newSale("n", 5, 10))
	for i := range 5 {
		placeWant(t, s, []error{nil}, res(fmt.Sprintf("o%d", i), "n", fmt.Sprintf("u%d", i), "", 0, 1, 1))
	}
	all := outbox(t, s)
	if len(all) != 5 {
		t.Fatalf("outbox has %d notices, want 5", len(all))
	}
	later := time.Now().Add(time.Hour)
	claim := func(limit int) []flashsale.Notice {
		t.Helper()
		ns, ok, err := s.ClaimNotices(ctx, "webhook", "a", later, limit)
		if err != nil || !ok {
			t.Fatalf("ClaimNotices = %v, %v", ok, err)
		}
		return ns
	}
	cursor := func(wantCursor int64) {
		t.Helper()
		c, last, err := s.NoticeCursor(ctx, "webhook")
		if err != nil || c != wantCursor || last != all[4].Seq {
			t.Fatalf("NoticeCursor = %d, %d, %v; want %d, %d", c, last, err, wantCursor, all[4].Seq)
		}
	}
	if got := claim(0); len(got) != 0 {
		t.Errorf("ClaimNotices(limit 0) returned %d notices", len(got))
	}
	cursor(0)
	if diff := cmp.Diff(all[:2], claim(2)); diff != "" {
		t.Errorf("first page mismatch (-want +got):\n%s", diff)
	}
	if err := s.AckNotices(ctx, "webhook", "a", all[1].Seq); err != nil {
		t.Fatal(err)
	}
	cursor(all[1].Seq)
	if diff := cmp.Diff(all[2:], claim(10)); diff != "" {
		t.Errorf("second page mismatch (-want +got):\n%s", diff)
	}
	// An ack of less leaves the cursor where it is.
	if err := s.AckNotices(ctx, "webhook", "a", all[0].Seq); err != nil {
		t.Fatal(err)
	}
	cursor(all[1].Seq)
	if err := s.AckNotices(ctx, "webhook", "a", all[4].Seq); err != nil {
		t.Fatal(err)
	}
	cursor(all[4].Seq)
	if got := claim(10); len(got) != 0 {
		t.Errorf("a claim past the last notice returned %d", len(got))
	}
	// Another transport has its own cursor, from the start.
	if c, last, err := s.NoticeCursor(ctx, "amqp"); err != nil || c != 0 || last != all[4].Seq {
		t.Errorf("NoticeCursor(amqp) = %d, %d, %v; want 0, %d", c, last, err, all[4].Seq)
	}
	ns, ok, err := s.ClaimNotices(ctx, "amqp", "b", later, 10)
	if err != nil || !ok {
		t.Fatalf("ClaimNotices(amqp) = %v, %v", ok, err)
	}
	if diff := cmp.Diff(all, ns); diff != "" {
		t.Errorf("a new transport's first claim mismatch (-want +got):\n%s", diff)
	}
}

// testDeliveries writes the delivery log and reads it back through every
// filter, newest first.
func testDeliveries(t *testing.T, open OpenFunc) {
	s := open(t)
	ctx := t.Context()
	if ds, err := s.Deliveries(ctx, flashsale.DeliveryQuery{}); err != nil || len(ds) != 0 {
		t.Fatalf("Deliveries of an empty log = %v, %v", ds, err)
	}
	at := now.Add(123456789).In(cst)
	d := func(transport, notice string, attempt int, ok bool, status int, msg string) flashsale.Delivery {
		return flashsale.Delivery{Transport: transport, NoticeID: notice, Seq: int64(len(notice)), Type: flashsale.NoticeOrderHeld,
			Attempt: attempt, At: at.Add(time.Duration(attempt) * time.Second), OK: ok, Status: status, Error: msg,
			Took: 1234567 * time.Nanosecond}
	}
	long := strings.Repeat("é", 1500)
	ds := []flashsale.Delivery{
		d("webhook", "o1.held", 1, false, 500, "boom"),
		d("webhook", "o1.held", 2, true, 204, ""),
		d("amqp", "o1.held", 1, true, 0, ""),
		d("webhook", "o2.held", 1, false, 0, long),
		d("amqp", "o2.held", 1, false, 0, "nack"),
	}
	// Written in two calls, the first of one attempt; an empty call
	// writes nothing.
	for _, part := range [][]flashsale.Delivery{ds[:1], nil, ds[1:]} {
		if err := s.RecordDeliveries(ctx, part); err != nil {
			t.Fatalf("RecordDeliveries(%+v): %v", part, err)
		}
	}
	ds[3].Error = strings.Repeat("é", 1000) // the log keeps 1000 characters
	for _, c := range []struct {
		name string
		q    flashsale.DeliveryQuery
		want []int
	}{
		{"All", flashsale.DeliveryQuery{}, []int{4, 3, 2, 1, 0}},
		{"Transport", flashsale.DeliveryQuery{Transport: "webhook"}, []int{3, 1, 0}},
		{"Notice", flashsale.DeliveryQuery{NoticeID: "o1.held"}, []int{2, 1, 0}},
		{"Failed", flashsale.DeliveryQuery{Failed: true}, []int{4, 3, 0}},
		{"TransportFailed", flashsale.DeliveryQuery{Transport: "webhook", Failed: true}, []int{3, 0}},
		{"Every", flashsale.DeliveryQuery{Transport: "amqp", NoticeID: "o2.held", Failed: true}, []int{4}},
		{"Limit", flashsale.DeliveryQuery{Limit: 2}, []int{4, 3}},
		{"None", flashsale.DeliveryQuery{Transport: "sms"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Deliveries(ctx, c.q)
			if err != nil {
				t.Fatal(err)
			}
			var want []flashsale.Delivery
			for _, i := range c.want {
				want = append(want, ds[i])
			}
			if diff := cmp.Diff(want, got, msTime, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Deliveries(%+v) mismatch (-want +got):\n%s", c.q, diff)
			}
		})
	}

	// No limit is a page of PageDefault.
	page := make([]flashsale.Delivery, flashsale.PageDefault)
	for i := range page {
		page[i] = d("amqp", fmt.Sprintf("p%d.held", i), 1, true, 0, "")
	}
	if err := s.RecordDeliveries(ctx, page); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{0, -1} {
		if got, err := s.Deliveries(ctx, flashsale.DeliveryQuery{Limit: limit}); err != nil || len(got) != flashsale.PageDefault {
			t.Errorf("Deliveries(limit %d) = %d rows, %v; want %d", limit, len(got), err, flashsale.PageDefault)
		}
	}
	if got, err := s.Deliveries(ctx, flashsale.DeliveryQuery{Limit: flashsale.PageMax + 1}); err != nil || len(got) != len(ds)+flashsale.PageDefault {
		t.Errorf("Deliveries(limit past PageMax) = %d rows, %v; want all %d", len(got), err, len(ds)+flashsale.PageDefault)
	}
	// An invalid attempt among valid ones, or too many at once: none is
	// written.
	valid := d("amqp", "bad.held", 1, true, 0, "")
	for name, bad := range map[string][]flashsale.Delivery{
		"no transport": {valid, {NoticeID: "o1.held"}},
		"long notice":  {valid, {Transport: "amqp", NoticeID: strings.Repeat("n", 201)}},
		"too many":     slices.Repeat([]flashsale.Delivery{valid}, flashsale.MaxDeliveries+1),
	} {
		if err := s.RecordDeliveries(ctx, bad); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("RecordDeliveries(%s) = %v, want %s", name, err, flashsale.EInvalid)
		}
	}
	if got, err := s.Deliveries(ctx, flashsale.DeliveryQuery{NoticeID: "bad.held"}); err != nil || len(got) != 0 {
		t.Errorf("after refused writes the log holds %d attempts of bad.held, %v; want none", len(got), err)
	}
	// The most at once are written, in their order.
	most := make([]flashsale.Delivery, flashsale.MaxDeliveries)
	for i := range most {
		most[i] = d("webhook", "most.held", i+1, true, 204, "")
	}
	if err := s.RecordDeliveries(ctx, most); err != nil {
		t.Fatalf("RecordDeliveries(%d): %v", len(most), err)
	}
	got, err := s.Deliveries(ctx, flashsale.DeliveryQuery{NoticeID: "most.held", Limit: flashsale.PageMax})
	if err != nil || len(got) == 0 || got[0].Attempt != flashsale.MaxDeliveries || got[len(got)-1].Attempt != flashsale.MaxDeliveries-len(got)+1 {
		t.Errorf("Deliveries after %d at once: %d rows, %v; want the newest first, in the order written", len(most), len(got), err)
	}
}

// statusChange is one committed change of an order's status, as a storm's
// worker saw it succeed.
type statusChange struct {
	Order  string
	Status flashsale.OrderStatus
}

// testNoticeStorm runs PlaceOrders, payments, cancellations, late payments
// and ExpireHolds against one sale at once, with a dispatcher claiming and
// acking the outbox as it fills. Afterwards each order's notices, in seq
// order, are a path of its statuses; the notices are exactly the changes
// that committed; every sell-out follows the notice of the change that
// took the last room; and the dispatcher, which read while the changes
// committed, missed none (a seq handed out before another's commit but
// committed after the dispatcher moved past it would be lost).
func testNoticeStorm(t *testing.T, open OpenFunc) {
	const (
		placers = 3
		batches = 12
		payers  = 3
		users   = 24
	)
	s := open(t)
	mustCreateSale(t, s, newSale("n", 2, 15, 15))
	var (
		mu      sync.Mutex
		changes = map[statusChange]int{}
		ids     []string
	)
	record := func(id string, st flashsale.OrderStatus) {
		mu.Lock()
		defer mu.Unlock()
		changes[statusChange{id, st}]++
		if st == flashsale.OrderHeld || st == flashsale.OrderFailed {
			ids = append(ids, id)
		}
	}
	pick := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return ""
		}
		return ids[r.IntN(len(ids))]
	}

	done := make(chan struct{})
	var workers, others sync.WaitGroup
	for g := range placers {
		workers.Go(func() {
			r := rand.New(rand.NewPCG(5, uint64(g)))
			for b := range batches {
				batch := make([]flashsale.Reservation, 1+r.IntN(4))
				for i := range batch {
					first, nights := r.IntN(2), 1
					if first == 0 && r.IntN(2) == 0 {
						nights = 2
					}
					batch[i] = res(fmt.Sprintf("g%d-%d-%d", g, b, i), "n", fmt.Sprintf("u%d", r.IntN(users)), "", first, nights, 1+r.IntN(2))
					if r.IntN(2) == 0 {
						batch[i].HoldExpiresAt = now.Add(-time.Second) // due for the reaper
					}
				}
				errs, err := s.PlaceOrders(t.Context(), batch)
				if err != nil {
					t.Errorf("PlaceOrders: %v", err)
					return
				}
				for i, err := range errs {
					switch {
					case err == nil:
						record(batch[i].OrderID, flashsale.OrderHeld)
					case errors.Is(err, flashsale.ErrSoldOut), errors.Is(err, flashsale.ErrLimitExceeded):
						record(batch[i].OrderID, flashsale.OrderFailed)
					default:
						t.Errorf("PlaceOrders(%s) = %v", batch[i].OrderID, err)
					}
				}
			}
		})
	}
	moves := [][2]flashsale.OrderStatus{
		{flashsale.OrderHeld, flashsale.OrderPaid}, {flashsale.OrderHeld, flashsale.OrderCancelled},
		{flashsale.OrderExpired, flashsale.OrderPaid}, {flashsale.OrderCancelled, flashsale.OrderPaid},
	}
	for g := range payers {
		others.Go(func() {
			r := rand.New(rand.NewPCG(6, uint64(g)))
			for {
				select {
				case <-done:
					return
				default:
				}
				id := pick(r)
				if id == "" {
					time.Sleep(time.Millisecond) // nothing placed yet
					continue
				}
				m := moves[r.IntN(len(moves))]
				_, err := s.Transition(t.Context(), id, m[0], m[1], "ref-"+id, now)
				switch {
				case err == nil:
					record(id, m[1])
				case errors.Is(err, flashsale.ErrStale), errors.Is(err, flashsale.ErrSoldOut), errors.Is(err, flashsale.ErrLimitExceeded):
				default:
					t.Errorf("Transition(%s, %s -> %s): %v", id, m[0], m[1], err)
					return
				}
			}
		})
	}
	others.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			expired, err := s.ExpireHolds(t.Context(), now, 4)
			if err != nil {
				t.Errorf("ExpireHolds: %v", err)
				return
			}
			for _, o := range expired {
				record(o.ID, flashsale.OrderExpired)
			}
		}
	})
	// The dispatcher: claim, "deliver", ack, while the changes commit.
	var delivered []flashsale.Notice
	dispatch := func() int {
		ns, ok, err := s.ClaimNotices(t.Context(), "storm", "d", time.Now().Add(time.Minute), 16)
		if err != nil || !ok {
			t.Errorf("ClaimNotices = %v, %v", ok, err)
			return 0
		}
		if len(ns) > 0 {
			delivered = append(delivered, ns...)
			if err := s.AckNotices(t.Context(), "storm", "d", ns[len(ns)-1].Seq); err != nil {
				t.Errorf("AckNotices: %v", err)
			}
		}
		return len(ns)
	}
	var dispatcher sync.WaitGroup
	dispatcher.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			dispatch()
		}
	})
	workers.Wait()
	close(done)
	others.Wait()
	dispatcher.Wait()
	for dispatch() > 0 {
	}
	if t.Failed() {
		t.FailNow()
	}

	all := outbox(t, s)
	notices := decode(t, all)
	if diff := cmp.Diff(noticeIDs(all), noticeIDs(delivered)); diff != "" {
		t.Errorf("the dispatcher reading during the storm missed notices or saw them out of order (-outbox +delivered):\n%s", diff)
	}

	got := map[statusChange]int{}
	paths := map[string][]flashsale.OrderStatus{}
	soldOuts := 0
	for i, n := range notices {
		if n.Type == flashsale.NoticeSaleSoldOut {
			soldOuts++
			if i == 0 || notices[i-1].OrderID != n.OrderID ||
				(notices[i-1].Type != flashsale.NoticeOrderHeld && notices[i-1].Type != flashsale.NoticeOrderPaid) {
				t.Errorf("sell-out %s does not follow the held or paid notice of its order", n.ID)
			}
			continue
		}
		st := n.Body.Order.Status
		if n.ID != n.OrderID+"."+string(st) || n.Type != statusTypes[st] {
			t.Errorf("notice %s (%s) carries status %s", n.ID, n.Type, st)
		}
		got[statusChange{n.OrderID, st}]++
		paths[n.OrderID] = append(paths[n.OrderID], st)
	}
	if diff := cmp.Diff(changes, got); diff != "" {
		t.Errorf("the order notices are not the committed changes (-changes +notices):\n%s", diff)
	}
	counts := map[flashsale.OrderStatus]int{}
	for id, path := range paths {
		counts[path[len(path)-1]]++
		if !validPath(path) {
			t.Errorf("order %s: notices %v are not a path of its statuses", id, path)
		}
		if o := mustOrder(t, s, id); o.Status != path[len(path)-1] {
			t.Errorf("order %s is %s, its last notice says %s", id, o.Status, path[len(path)-1])
		}
	}
	t.Logf("%d notices, final statuses %v, %d sell-outs", len(notices), counts, soldOuts)
	for _, st := range []flashsale.OrderStatus{flashsale.OrderPaid, flashsale.OrderFailed} {
		if counts[st] == 0 {
			t.Errorf("no order ended %s: the storm did not exercise it", st)
		}
	}
}

// validPath reports whether statuses is a path an order's changes can
// take: failed alone, or held and then legal transitions.
func validPath(statuses []flashsale.OrderStatus) bool {
	if len(statuses) == 0 {
		return false
	}
	if statuses[0] == flashsale.OrderFailed {
		return len(statuses) == 1
	}
	if statuses[0] != flashsale.OrderHeld {
		return false
	}
	for i := 1; i < len(statuses); i++ {
		if !legal(statuses[i-1], statuses[i]) {
			return false
		}
	}
	return true
}

func noticeIDs(ns []flashsale.Notice) []string {
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ID
	}
	return ids
}

// RunNoticeOrder checks that a store hands out seqs in commit order, for
// an engine whose seqs come from a sequence that does not (MySQL's
// AUTO_INCREMENT, PostgreSQL's identity): begin opens another writer's
// transaction that takes the outbox's lock as the store's writers do and
// inserts the notice "x.held" of sale "n" (which the test creates),
// leaving it uncommitted; waiting reports whether a store transaction is
// waiting for that lock. A PlaceOrders started meanwhile must wait for the
// other writer's commit: had it committed first, with the higher seq, a
// dispatcher could have delivered it, moved its cursor past x.held's seq,
// and never delivered x.held.
func RunNoticeOrder(t *testing.T, s flashsale.Store, begin func() (commit func() error, err error), waiting func() (bool, error)) {
	mustCreateSale(t, s, newSale("n", 2, 5))
	commit, err := begin()
	if err != nil {
		t.Fatalf("the other writer: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.PlaceOrders(t.Context(), []flashsale.Reservation{res("o1", "n", "u1", "", 0, 1, 1)})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case err := <-done:
			t.Fatalf("PlaceOrders committed (err %v) while an earlier notice was not committed: seqs do not follow commits", err)
		default:
		}
		ok, err := waiting()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("PlaceOrders never waited for the outbox's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := commit(); err != nil {
		t.Fatalf("the other writer's commit: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("PlaceOrders: %v", err)
	}
	if got, want := noticeIDs(outbox(t, s)), []string{"x.held", "o1.held"}; !slices.Equal(got, want) {
		t.Errorf("outbox = %v, want %v", got, want)
	}
}
