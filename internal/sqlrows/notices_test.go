package sqlrows

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// TestStockTake pins when a take sells a sale out: every night at zero
// after it and not before it, once.
func TestStockTake(t *testing.T) {
	nights := func(avail ...int) []Night {
		ns := make([]Night, len(avail))
		for i, a := range avail {
			ns[i] = Night{Idx: i, Date: testenv.Night(i), Available: a}
		}
		return ns
	}
	type take struct{ first, nights, rooms int }
	for _, tc := range []struct {
		name  string
		avail []int
		takes []take
		want  []bool
	}{
		{"LastRoom", []int{2}, []take{{0, 1, 1}, {0, 1, 1}}, []bool{false, true}},
		{"AllAtOnce", []int{3}, []take{{0, 1, 3}}, []bool{true}},
		{"OnceOnly", []int{1}, []take{{0, 1, 1}, {0, 1, 0}}, []bool{true, false}},
		{"AlreadyZero", []int{0, 0}, []take{{0, 2, 0}}, []bool{false}},
		{"OtherNightLeft", []int{1, 2}, []take{{0, 1, 1}, {1, 1, 1}, {1, 1, 1}}, []bool{false, false, true}},
		{"TwoNightStay", []int{1, 1}, []take{{0, 2, 1}}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStock("CNY", nights(tc.avail...))
			for i, tk := range tc.takes {
				if got := st.Take(tk.first, tk.nights, tk.rooms); got != tc.want[i] {
					t.Errorf("take %d %+v = %v, want %v", i, tk, got, tc.want[i])
				}
			}
		})
	}
	if got := NewStock("CNY", nights(1, 1)).CheckIn(1); got != testenv.Night(1) {
		t.Errorf("CheckIn(1) = %q", got)
	}
	if got := NewStock("CNY", nights(1)).CheckIn(3); got != "" {
		t.Errorf("CheckIn past the last night = %q, want none", got)
	}
	slots := NewStock("EUR", []Night{{Idx: 0, Date: testenv.Night(0), Time: "12:00"}, {Idx: 1, Date: testenv.Night(0), Time: "19:00"}})
	for _, c := range []struct {
		st   *Stock
		idx  int
		want string
	}{
		{slots, 1, testenv.Night(0) + "T19:00"},
		{slots, 2, ""},                      // no such unit
		{NewStock("CNY", nights(1)), 0, ""}, // a stay's night
	} {
		if got := c.st.Slot(c.idx); got != c.want {
			t.Errorf("Slot(%d) = %q, want %q", c.idx, got, c.want)
		}
	}
}

// TestPlaceNotices pins a batch's notices: one per inserted order in batch
// order, failed ones with their refusal's code, none for what inserted
// nothing, and the sell-out right after the order that took the last room.
func TestPlaceNotices(t *testing.T) {
	atMS := int64(1_700_000_000_123)
	hold := time.UnixMilli(atMS + 30_000).Add(456 * time.Microsecond)
	r := func(id string, first, nights, rooms int) flashsale.Reservation {
		return flashsale.Reservation{OrderID: id, SaleID: "s", UserID: "u" + id, IdempotencyKey: "k" + id,
			FirstNight: first, Nights: nights, Rooms: rooms, Amount: 100, HoldExpiresAt: hold}
	}
	rs := []flashsale.Reservation{r("a", 0, 1, 1), r("b", 0, 2, 1), r("c", 0, 1, 1), r("d", 1, 1, 1),
		r("e", 0, 1, 1), r("f", 0, 1, 1), r("g", 0, 1, 1), r("h", 5, 1, 1)}
	results := []error{nil, flashsale.ErrSoldOut, flashsale.ErrDuplicate, nil, flashsale.ErrLimitExceeded,
		flashsale.ErrKeyConflict, flashsale.ErrNotFound, flashsale.ErrInvalid}
	stocks := map[string]*Stock{"s": NewStock("EUR", []Night{{Idx: 0, Date: testenv.Night(0), Available: 1}, {Idx: 1, Date: testenv.Night(1), Available: 1}})}
	var got []string
	for _, n := range PlaceNotices(rs, results, stocks, atMS) {
		got = append(got, n.ID)
		if n.Type == flashsale.NoticeSaleSoldOut {
			continue
		}
		if !n.At.Equal(time.UnixMilli(atMS)) || !strings.Contains(string(n.Payload), `"currency":"EUR"`) ||
			!strings.Contains(string(n.Payload), hold.Truncate(time.Millisecond).UTC().Format(time.RFC3339Nano)) {
			t.Errorf("notice %s at %v: %s", n.ID, n.At, n.Payload)
		}
	}
	want := []string{"a.held", "b.failed", "d.held", "s.sold_out.d", "e.failed", "f.failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PlaceNotices mismatch (-want +got):\n%s", diff)
	}
	o := PlacedOrder(&rs[5], flashsale.OrderFailed, flashsale.ErrorCode(flashsale.ErrKeyConflict), stocks["s"], atMS)
	if o.IdempotencyKey != "" || o.FailureReason != flashsale.ErrorCode(flashsale.ErrKeyConflict) || o.CheckIn != testenv.Night(0) ||
		o.Currency != "EUR" || o.Slot != "" {
		t.Errorf("key-conflict order = %+v, want no key, its reason, currency and check-in, no slot", o)
	}
}

func TestCheckDelivery(t *testing.T) {
	d, err := CheckDelivery(flashsale.Delivery{Transport: "webhook", NoticeID: "o.held", Error: strings.Repeat("é", MaxDeliveryError) + "x\xff"})
	if err != nil || d.Error != strings.Repeat("é", MaxDeliveryError) {
		t.Errorf("CheckDelivery cut the error to %d characters, %v", len([]rune(d.Error)), err)
	}
	for _, bad := range []flashsale.Delivery{
		{}, {Transport: strings.Repeat("t", MaxName+1)}, {Transport: "webhook", NoticeID: strings.Repeat("n", MaxNoticeID+1)},
	} {
		if _, err := CheckDelivery(bad); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("CheckDelivery(%.20q) = %v, want %s", bad.Transport, err, flashsale.EInvalid)
		}
	}
}
