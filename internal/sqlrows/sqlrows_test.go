package sqlrows

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/google/go-cmp/cmp"
)

func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"Empty", "", ""},
		{"Code", "sold_out", "sold_out"},
		{"AtMost", strings.Repeat("a", MaxFailureReason), strings.Repeat("a", MaxFailureReason)},
		{"CutASCII", strings.Repeat("a", MaxFailureReason+1), strings.Repeat("a", MaxFailureReason)},
		{"CutRunesNotBytes", strings.Repeat("é", MaxFailureReason+50), strings.Repeat("é", MaxFailureReason)},
		{"InvalidUTF8", "bad\xffbyte", "bad\uFFFDbyte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureReason(tc.in); got != tc.want {
				t.Errorf("FailureReason(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFailOrder(t *testing.T) {
	valid := flashsale.Reservation{OrderID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k1", Nights: 1, Rooms: 1}
	errDB := errors.New("db down")
	for _, tc := range []struct {
		name    string
		r       flashsale.Reservation
		answers []Inserted // what the insert reports, call by call
		insErr  error
		want    error
		keys    []string // the keys the inserts were asked to write
	}{
		{"Written", valid, []Inserted{Written}, nil, nil, []string{"k1"}},
		{"NoSale", valid, []Inserted{NoSale}, nil, flashsale.ErrNotFound, []string{"k1"}},
		{"IDTaken", valid, []Inserted{IDTaken}, nil, flashsale.ErrDuplicate, []string{"k1"}},
		{"KeyTaken", valid, []Inserted{KeyTaken, Written}, nil, nil, []string{"k1", ""}},
		{"KeyTakenThenIDTaken", valid, []Inserted{KeyTaken, IDTaken}, nil, flashsale.ErrDuplicate, []string{"k1", ""}},
		{"KeyTakenWithoutKey", flashsale.Reservation{OrderID: "o1", SaleID: "s1", Nights: 1, Rooms: 1},
			[]Inserted{KeyTaken}, nil, errKeyWithoutKey, []string{""}},
		{"Error", valid, []Inserted{Written}, errDB, errDB, []string{"k1"}},
		{"NoRooms", flashsale.Reservation{OrderID: "o1", SaleID: "s1", Nights: 1}, nil, nil, flashsale.ErrInvalid, nil},
		{"NoNights", flashsale.Reservation{OrderID: "o1", SaleID: "s1", Rooms: 1}, nil, nil, flashsale.ErrInvalid, nil},
		{"NegativeFirstNight", flashsale.Reservation{OrderID: "o1", SaleID: "s1", FirstNight: -1, Nights: 1, Rooms: 1},
			nil, nil, flashsale.ErrInvalid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []string
			err := FailOrder(&tc.r, func(key string) (Inserted, error) {
				keys = append(keys, key)
				if len(keys) > len(tc.answers) {
					t.Fatalf("insert called %d times, want %d", len(keys), len(tc.answers))
				}
				return tc.answers[len(keys)-1], tc.insErr
			})
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("FailOrder = %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(tc.keys, keys); diff != "" {
				t.Errorf("keys inserted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRulesWaitingRoom: a waiting room is kept as its JSON and read back
// as it was, none as "" and read back as nil; a rate JSON cannot write is
// refused before any store writes it, and a column that does not parse
// is an error, not a sale without a room.
func TestRulesWaitingRoom(t *testing.T) {
	for _, room := range []*flashsale.WaitingRoom{nil, {PrequeueMinutes: 30, AdmitPerSecond: 0.3, AdmissionSeconds: 60}} {
		r, err := RulesOf(&flashsale.Sale{WaitingRoom: room})
		if err != nil {
			t.Fatalf("RulesOf(room %+v): %v", room, err)
		}
		if room == nil && r.WaitingRoom != "" {
			t.Errorf("no room kept as %q, want ''", r.WaitingRoom)
		}
		var got flashsale.Sale
		if err := r.Apply(&got); err != nil {
			t.Fatalf("Apply(%q): %v", r.WaitingRoom, err)
		}
		if diff := cmp.Diff(room, got.WaitingRoom); diff != "" {
			t.Errorf("room kept as %q read back (-want +got):\n%s", r.WaitingRoom, diff)
		}
	}
	if _, err := RulesOf(&flashsale.Sale{ID: "s1", WaitingRoom: &flashsale.WaitingRoom{AdmitPerSecond: math.NaN(), AdmissionSeconds: 60}}); err == nil {
		t.Error("RulesOf kept a NaN rate")
	}
	r := Rules{WaitingRoom: `{"admission_seconds":`}
	if err := r.Apply(&flashsale.Sale{}); err == nil {
		t.Error("Apply read a broken waiting room")
	}
}

// TestRulesStayRules: the nights' stay rules are kept as one JSON object
// of the nights with any, keyed by date, and read back onto the nights of
// those dates; no rules at all are kept as "". A date that is no night of
// the sale is ignored, and a column that does not parse is an error, not
// nights without rules.
func TestRulesStayRules(t *testing.T) {
	nights := func(rules ...flashsale.StayRules) []flashsale.Night {
		ns := make([]flashsale.Night, len(rules))
		for i, r := range rules {
			ns[i] = flashsale.Night{Date: fmt.Sprintf("2030-01-%02d", i+1), Stock: 5, StayRules: r}
		}
		return ns
	}
	for _, tc := range []struct {
		name   string
		nights []flashsale.Night
		stored string
	}{
		{"None", nights(flashsale.StayRules{}, flashsale.StayRules{}), ""},
		{"Some", nights(flashsale.StayRules{MinStay: 2, MaxStay: 3}, flashsale.StayRules{}, flashsale.StayRules{StopSell: true}),
			`{"2030-01-01":{"min_stay":2,"max_stay":3},"2030-01-03":{"stop_sell":true}}`},
		{"Every", nights(flashsale.StayRules{ClosedToArrival: true}, flashsale.StayRules{ClosedToDeparture: true}),
			`{"2030-01-01":{"closed_to_arrival":true},"2030-01-02":{"closed_to_departure":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := RulesOf(&flashsale.Sale{Nights: tc.nights})
			if err != nil {
				t.Fatalf("RulesOf: %v", err)
			}
			if r.StayRules != tc.stored {
				t.Errorf("kept as %q, want %q", r.StayRules, tc.stored)
			}
			got := flashsale.Sale{Nights: nights(make([]flashsale.StayRules, len(tc.nights))...)}
			got.Nights[0].StopSell = true // what ApplyNights must overwrite
			if err := r.ApplyNights(&got); err != nil {
				t.Fatalf("ApplyNights(%q): %v", r.StayRules, err)
			}
			if diff := cmp.Diff(tc.nights, got.Nights); diff != "" {
				t.Errorf("kept as %q read back (-want +got):\n%s", r.StayRules, diff)
			}
		})
	}
	t.Run("DateNotANight", func(t *testing.T) {
		r := Rules{StayRules: `{"2030-01-02":{"stop_sell":true},"2031-01-01":{"min_stay":2}}`}
		got := flashsale.Sale{Nights: nights(flashsale.StayRules{}, flashsale.StayRules{})}
		if err := r.ApplyNights(&got); err != nil {
			t.Fatalf("ApplyNights: %v", err)
		}
		if diff := cmp.Diff(nights(flashsale.StayRules{}, flashsale.StayRules{StopSell: true}), got.Nights); diff != "" {
			t.Errorf("read back (-want +got):\n%s", diff)
		}
	})
	t.Run("Broken", func(t *testing.T) {
		r := Rules{StayRules: `{"2030-01-01":{"stop_sell":`}
		if err := r.ApplyNights(&flashsale.Sale{Nights: nights(flashsale.StayRules{})}); err == nil {
			t.Error("ApplyNights read broken stay rules")
		}
	})
}

// TestRulesKind: the kind is kept as given, "" for a sale that names
// none (a stay, as every sale from before kinds), and read back so.
func TestRulesKind(t *testing.T) {
	for _, k := range []flashsale.Kind{"", flashsale.KindStay, flashsale.KindSlot} {
		r, err := RulesOf(&flashsale.Sale{Kind: k})
		if err != nil {
			t.Fatalf("RulesOf(kind %q): %v", k, err)
		}
		if r.Kind != string(k) {
			t.Errorf("kind %q kept as %q", k, r.Kind)
		}
		got := flashsale.Sale{Kind: "bogus"}
		if err := r.Apply(&got); err != nil || got.Kind != k {
			t.Errorf("kind %q read back as %q (%v)", k, got.Kind, err)
		}
	}
}
