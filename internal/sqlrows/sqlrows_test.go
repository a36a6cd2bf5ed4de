package sqlrows

import (
	"errors"
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
