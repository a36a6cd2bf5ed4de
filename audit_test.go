package flashsale_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
)

var auditNow = time.Date(2026, 12, 1, 20, 30, 0, 0, time.UTC)

const auditGrace = time.Minute

// auditSale has two nights of 5 rooms, a limit of 2 rooms a user and 30 s holds.
func auditSale() *flashsale.Sale {
	return fixture.Sale(fixture.ID("s1"), fixture.Stock(5, 5), fixture.Window(auditNow.Add(-time.Hour), auditNow.Add(time.Hour)), fixture.Limit(2))
}

// reservation is an order reserved ten minutes ago: well past the grace.
func reservation(id, user, key string, first, nights, rooms int, active bool) flashsale.Reservation {
	return flashsale.Reservation{
		OrderID: id, SaleID: "s1", UserID: user, IdempotencyKey: key, FirstNight: first, Nights: nights, Rooms: rooms,
		HoldExpiresAt: auditNow.Add(-10*time.Minute + 30*time.Second), Active: active,
	}
}

// reservedAgo moves a reservation's reserve time to d before auditNow.
func reservedAgo(r flashsale.Reservation, d time.Duration) flashsale.Reservation {
	r.HoldExpiresAt = auditNow.Add(-d + 30*time.Second)
	return r
}

// healthyBooks is a sale in balance: o1 held, o2 paid over both nights, o3
// expired and o4 failed (both released in the engine), o5 held with a key.
// Database night 0: held 2 (o1, o5), sold 2 (o2); night 1: sold 2 (o2).
// Engine: 5-4 = 1 and 5-2 = 3 left.
func healthyBooks() flashsale.AuditInput {
	sale := auditSale()
	db := []flashsale.Reservation{
		reservation("o1", "u1", "", 0, 1, 1, true),
		reservation("o2", "u2", "", 0, 2, 2, true),
		reservation("o3", "u3", "", 1, 1, 1, false),
		reservation("o4", "u4", "", 0, 1, 1, false),
		reservation("o5", "u5", "k5", 0, 1, 1, true),
	}
	return flashsale.AuditInput{
		DB: &flashsale.StockSnapshot{Sale: sale, Nights: []flashsale.NightStock{
			{Date: testenv.Night(0), Stock: 5, Available: 1, Held: 2, Sold: 2},
			{Date: testenv.Night(1), Stock: 5, Available: 3, Held: 0, Sold: 2},
		}, Reservations: db},
		Engine: &flashsale.StockSnapshot{
			Nights: []flashsale.NightStock{{Available: 1}, {Available: 3}},
			// The engine lists its records in no particular order.
			Reservations: []flashsale.Reservation{db[4], db[2], db[0], db[3], db[1]},
		},
		Now: auditNow, Grace: auditGrace,
	}
}

// found is the part of a finding a test names.
type found struct {
	Kind                   flashsale.FindingKind
	Night, OrderID, UserID string
}

func foundOf(fs []flashsale.Finding) []found {
	out := []found{}
	for _, f := range fs {
		out = append(out, found{f.Kind, f.Night, f.OrderID, f.UserID})
	}
	return out
}

// engineOrder returns the engine's record of id, to change it.
func engineOrder(in *flashsale.AuditInput, id string) *flashsale.Reservation {
	for i := range in.Engine.Reservations {
		if in.Engine.Reservations[i].OrderID == id {
			return &in.Engine.Reservations[i]
		}
	}
	panic("no engine order " + id)
}

func dropEngineOrder(in *flashsale.AuditInput, id string) {
	in.Engine.Reservations = slices.DeleteFunc(in.Engine.Reservations, func(r flashsale.Reservation) bool { return r.OrderID == id })
}

// addOrder records r in both views: a row in the database (counted in
// held if active) and the engine's record (its units taken if active).
func addOrder(in *flashsale.AuditInput, r flashsale.Reservation) {
	in.DB.Reservations = append(in.DB.Reservations, r)
	in.Engine.Reservations = append(in.Engine.Reservations, r)
	if r.Active {
		for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
			in.DB.Nights[i].Held += r.Rooms
			in.Engine.Nights[i].Available -= r.Rooms
		}
	}
}

// reserveOnly records r in the engine alone, as a reservation whose order
// row is not written (yet).
func reserveOnly(in *flashsale.AuditInput, r flashsale.Reservation) {
	in.Engine.Reservations = append(in.Engine.Reservations, r)
	for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
		in.Engine.Nights[i].Available -= r.Rooms
	}
}

func TestAuditSale(t *testing.T) {
	n0, n1 := testenv.Night(0), testenv.Night(1)
	tests := []struct {
		name   string
		mutate func(in *flashsale.AuditInput)
		want   []found
	}{
		{"Healthy", func(in *flashsale.AuditInput) {}, nil},
		{"InFlightYoung", func(in *flashsale.AuditInput) {
			// A 202 whose order the queue has not written yet is no drift.
			reserveOnly(in, reservedAgo(reservation("o6", "u6", "", 0, 1, 1, true), 5*time.Second))
		}, nil},
		{"InFlightInOutboxYoung", func(in *flashsale.AuditInput) {
			r := reservedAgo(reservation("o6", "u6", "", 0, 1, 1, true), 5*time.Second)
			reserveOnly(in, r)
			in.Unconfirmed = []flashsale.Reservation{r}
		}, nil},
		{"InFlightInOutboxBacklog", func(in *flashsale.AuditInput) {
			r := reservation("o6", "u6", "", 0, 1, 1, true)
			reserveOnly(in, r)
			in.Unconfirmed = []flashsale.Reservation{r}
			in.Backlog = true
		}, nil},
		{"InFlightJustSent", func(in *flashsale.AuditInput) {
			// A repair has just republished it: old by nature.
			r := reservation("o6", "u6", "", 0, 1, 1, true)
			reserveOnly(in, r)
			in.Sent = []flashsale.Reservation{r}
		}, nil},
		{"StrandedInOutbox", func(in *flashsale.AuditInput) {
			// The relay republishes within seconds: an entry older than
			// the grace, with the queue empty, is one it is not delivering.
			r := reservation("o6", "u6", "", 0, 1, 1, true)
			reserveOnly(in, r)
			in.Unconfirmed = []flashsale.Reservation{r}
		}, []found{{flashsale.FindingStranded, "", "o6", "u6"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"StrandedSentForAnotherSale", func(in *flashsale.AuditInput) {
			r := reservation("o6", "u6", "", 0, 1, 1, true)
			reserveOnly(in, r)
			r.SaleID = "s2"
			in.Sent = []flashsale.Reservation{r}
		}, []found{{flashsale.FindingStranded, "", "o6", "u6"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"ReleasedWithoutRow", func(in *flashsale.AuditInput) {
			// The order path refused it (a 503): the units went back, the key stays bound.
			in.Engine.Reservations = append(in.Engine.Reservations, reservation("o6", "u6", "k6", 0, 1, 1, false))
		}, nil},
		{"DuplicateKeyOfOtherUsers", func(in *flashsale.AuditInput) {
			addOrder(in, reservation("o6", "u6", "k5", 0, 1, 1, false))
		}, nil},
		{"Stranded", func(in *flashsale.AuditInput) {
			reserveOnly(in, reservation("o6", "u6", "", 0, 1, 1, true))
		}, []found{{flashsale.FindingStranded, "", "o6", "u6"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"StrandedAtGrace", func(in *flashsale.AuditInput) {
			reserveOnly(in, reservedAgo(reservation("o6", "u6", "", 0, 1, 1, true), auditGrace))
		}, []found{{flashsale.FindingStranded, "", "o6", "u6"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"StrandedNoHoldTime", func(in *flashsale.AuditInput) {
			r := reservation("o6", "u6", "", 0, 1, 1, true)
			r.HoldExpiresAt = time.Time{}
			reserveOnly(in, r)
		}, []found{{flashsale.FindingStranded, "", "o6", "u6"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"StrandedOutboxOfAnotherSale", func(in *flashsale.AuditInput) {
			r := reservation("o6", "u6", "", 0, 1, 1, true)
			reserveOnly(in, r)
			r.SaleID = "s2"
			in.Unconfirmed = []flashsale.Reservation{r}
		}, []found{{flashsale.FindingStranded, "", "o6", "u6"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"PhantomRooms", func(in *flashsale.AuditInput) {
			in.Engine.Nights[1].Available += 3
		}, []found{{flashsale.FindingUnitsDrift, n1, "", ""}}},
		{"EngineShort", func(in *flashsale.AuditInput) {
			in.Engine.Nights[0].Available--
		}, []found{{flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"EngineNegative", func(in *flashsale.AuditInput) {
			in.Engine.Nights[0].Available = -1
		}, []found{{flashsale.FindingEngineNegative, n0, "", ""}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"EngineNights", func(in *flashsale.AuditInput) {
			in.Engine.Nights = in.Engine.Nights[:1]
		}, []found{{flashsale.FindingUnitsDrift, "", "", ""}}},
		{"EngineActiveDBExpired", func(in *flashsale.AuditInput) {
			engineOrder(in, "o3").Active = true
			in.Engine.Nights[1].Available--
		}, []found{{flashsale.FindingEngineActiveDBFinal, "", "o3", "u3"}, {flashsale.FindingUnitsDrift, n1, "", ""}}},
		{"EngineActiveDBFailed", func(in *flashsale.AuditInput) {
			engineOrder(in, "o4").Active = true
			in.Engine.Nights[0].Available--
		}, []found{{flashsale.FindingEngineActiveDBFinal, "", "o4", "u4"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"DBActiveEngineReleased", func(in *flashsale.AuditInput) {
			// Released behind the database's back: the units went back too.
			engineOrder(in, "o1").Active = false
			in.Engine.Nights[0].Available++
		}, []found{{flashsale.FindingDBActiveEngineInactive, "", "o1", "u1"}, {flashsale.FindingUnitsDrift, n0, "", ""}}},
		{"DBActiveEngineFlagOnly", func(in *flashsale.AuditInput) {
			// The record alone says released; the engine's counts still hold the room.
			engineOrder(in, "o1").Active = false
		}, []found{{flashsale.FindingDBActiveEngineInactive, "", "o1", "u1"}}},
		{"DBActiveEngineReleasedStay", func(in *flashsale.AuditInput) {
			engineOrder(in, "o2").Active = false
			in.Engine.Nights[0].Available += 2
			in.Engine.Nights[1].Available += 2
		}, []found{{flashsale.FindingDBActiveEngineInactive, "", "o2", "u2"},
			{flashsale.FindingUnitsDrift, n0, "", ""}, {flashsale.FindingUnitsDrift, n1, "", ""}}},
		{"DBActiveEngineUnknown", func(in *flashsale.AuditInput) {
			dropEngineOrder(in, "o5")
		}, []found{{flashsale.FindingDBActiveEngineInactive, "", "o5", "u5"}}},
		{"DBOversold", func(in *flashsale.AuditInput) {
			in.DB.Nights[1].Stock = 1
			in.Engine.Nights[1].Available = -1
		}, []found{{flashsale.FindingEngineNegative, n1, "", ""}, {flashsale.FindingDBOversold, n1, "", ""}}},
		{"DBCountersDrift", func(in *flashsale.AuditInput) {
			// An order's status changed without its counter: held still counts it.
			in.DB.Reservations[0].Active = false
			engineOrder(in, "o1").Active = false
			in.Engine.Nights[0].Available++
		}, []found{{flashsale.FindingUnitsDrift, n0, "", ""}, {flashsale.FindingDBCountersDrift, n0, "", ""}}},
		{"UserOverLimit", func(in *flashsale.AuditInput) {
			addOrder(in, reservation("o6", "u1", "", 1, 1, 2, true))
		}, []found{{flashsale.FindingUserOverLimit, "", "", "u1"}}},
		{"UserAtLimit", func(in *flashsale.AuditInput) {
			addOrder(in, reservation("o6", "u1", "", 1, 1, 1, true))
			addOrder(in, reservation("o7", "u1", "", 1, 1, 3, false)) // released rooms do not count
		}, nil},
		{"DuplicateKey", func(in *flashsale.AuditInput) {
			addOrder(in, reservation("o6", "u5", "k5", 1, 1, 1, false))
		}, []found{{flashsale.FindingDuplicateKey, "", "o6", "u5"}}},
		{"EngineNotLoaded", func(in *flashsale.AuditInput) {
			in.Engine = nil
		}, []found{{flashsale.FindingEngineNotLoaded, "", "", ""}}},
		{"EngineNotLoadedEnded", func(in *flashsale.AuditInput) {
			in.Engine = nil
			in.Now = in.DB.Sale.EndsAt
		}, nil},
		{"DatabaseOnly", func(in *flashsale.AuditInput) {
			in.DatabaseOnly = true
			in.Engine.Nights[0].Available += 3
			engineOrder(in, "o3").Active = true
			in.DB.Nights[1].Held++
		}, []found{{flashsale.FindingDBCountersDrift, n1, "", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := healthyBooks()
			tt.mutate(&in)
			a := flashsale.AuditSale(in)
			want := tt.want
			if want == nil {
				want = []found{}
			}
			if diff := cmp.Diff(want, foundOf(a.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\nreport: %+v", diff, a.Findings)
			}
			if got, want := a.Balanced(), len(tt.want) == 0; got != want {
				t.Errorf("Balanced() = %v, want %v", got, want)
			}
			for _, f := range a.Findings {
				if f.Detail == "" || strings.Contains(f.Detail, "%!") {
					t.Errorf("%s: detail %q", f.Kind, f.Detail)
				}
			}
		})
	}
}

// TestAuditSaleNights checks the figures a report carries per night, and
// that what is in flight is counted where it belongs.
func TestAuditSaleNights(t *testing.T) {
	in := healthyBooks()
	r := reservedAgo(reservation("o6", "u6", "", 0, 2, 1, true), time.Second)
	reserveOnly(&in, r)
	a := flashsale.AuditSale(in)
	if !a.Balanced() || !a.Engine || a.SaleID != "s1" || !a.At.Equal(auditNow) {
		t.Fatalf("audit = %+v", a)
	}
	want := []flashsale.AuditNight{
		{Date: testenv.Night(0), Stock: 5, EngineAvailable: 0, Held: 2, Sold: 2, InFlight: 1},
		{Date: testenv.Night(1), Stock: 5, EngineAvailable: 2, Held: 0, Sold: 2, InFlight: 1},
	}
	if diff := cmp.Diff(want, a.Nights); diff != "" {
		t.Errorf("nights (-want +got):\n%s", diff)
	}
	for _, n := range a.Nights {
		if n.Drift() != 0 || n.Expected() != n.EngineAvailable {
			t.Errorf("night %s: expected %d, drift %d", n.Date, n.Expected(), n.Drift())
		}
	}

	in.Engine.Nights[1].Available += 3
	a = flashsale.AuditSale(in)
	if got := a.Nights[1].Drift(); got != 3 {
		t.Errorf("drift after 3 phantom rooms = %d, want 3", got)
	}

	in.Engine = nil
	a = flashsale.AuditSale(in)
	if a.Engine {
		t.Errorf("Engine = true without an engine view")
	}
	if a.Nights[0].InFlight != 0 || a.Nights[0].Held != 2 {
		t.Errorf("night without engine: %+v", a.Nights[0])
	}
}
