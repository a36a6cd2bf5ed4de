package amqp

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flashsale/flashsale"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, r := range []flashsale.Reservation{
		{OrderID: "01J0000000000000000000000A", SaleID: "s1", UserID: "u1", FirstNight: 0, Nights: 1, Rooms: 1, Amount: 0, HoldExpiresAt: time.Unix(1_800_000_000, 123456789).UTC(), Active: true},
		{OrderID: "o", SaleID: "s", UserID: "u", IdempotencyKey: "key-ü", FirstNight: 365, Nights: 1, Rooms: 1_000_000, Amount: 1 << 40, HoldExpiresAt: time.Date(2026, 12, 24, 20, 0, 30, 0, time.UTC)},
	} {
		b, err := appendReservation(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeReservation(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
		if len(b) > 100 {
			t.Errorf("encoding is %d bytes, want a compact message", len(b))
		}
	}
}

func TestMessageInvalid(t *testing.T) {
	good := flashsale.Reservation{OrderID: "o", SaleID: "s", UserID: "u", Nights: 1, Rooms: 1, HoldExpiresAt: time.Unix(1, 0)}
	for name, mutate := range map[string]func(*flashsale.Reservation){
		"NoOrderID":  func(r *flashsale.Reservation) { r.OrderID = "" },
		"ZeroNights": func(r *flashsale.Reservation) { r.Nights = 0 },
		"ZeroRooms":  func(r *flashsale.Reservation) { r.Rooms = 0 },
		"Negative":   func(r *flashsale.Reservation) { r.Amount = -1 },
		"LongKey":    func(r *flashsale.Reservation) { r.IdempotencyKey = string(make([]byte, maxField+1)) },
	} {
		t.Run(name, func(t *testing.T) {
			r := good
			mutate(&r)
			if _, err := appendReservation(nil, &r); !errors.Is(err, errMessage) {
				t.Errorf("appendReservation error = %v, want errMessage", err)
			}
		})
	}
	b, _ := appendReservation(nil, &good)
	for name, body := range map[string][]byte{
		"Empty":     nil,
		"Version":   append([]byte{9}, b[1:]...),
		"Truncated": b[:len(b)-1],
		"Trailing":  append(b[:len(b):len(b)], 0),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeReservation(body); !errors.Is(err, errMessage) {
				t.Errorf("decodeReservation error = %v, want errMessage", err)
			}
		})
	}
}

// FuzzDecodeReservation checks that any body either fails cleanly or
// decodes to a reservation that encodes back to the same bytes.
func FuzzDecodeReservation(f *testing.F) {
	r := flashsale.Reservation{OrderID: "o1", SaleID: "s1", UserID: "u1", IdempotencyKey: "k", Nights: 2, Rooms: 1, Amount: 500, HoldExpiresAt: time.Unix(1_800_000_000, 5), Active: true}
	b, _ := appendReservation(nil, &r)
	f.Add(b)
	f.Add([]byte{1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeReservation(body)
		if err != nil {
			if !errors.Is(err, errMessage) {
				t.Fatalf("error %v does not wrap errMessage", err)
			}
			return
		}
		again, err := appendReservation(nil, &r)
		if err != nil {
			t.Fatalf("decoded reservation does not encode: %v", err)
		}
		back, err := decodeReservation(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, back); diff != "" {
			t.Fatalf("re-encoding changed the reservation:\n%s", diff)
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	r := flashsale.Reservation{OrderID: "01J0000000000000000000000A", SaleID: "01J0000000000000000000000B", UserID: "user-123456", IdempotencyKey: "key", Nights: 2, Rooms: 1, Amount: 500, HoldExpiresAt: time.Now()}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = appendReservation(buf[:0], &r)
	}
}
