package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestSaleAsSlots: a bench sale as slots keeps its places in all, spread
// evenly over up to four slots of its night's date, in the order of
// their starts, each named as a purchase names it.
func TestSaleAsSlots(t *testing.T) {
	for _, tt := range []struct {
		stock int
		want  []int
	}{
		{100, []int{25, 25, 25, 25}},
		{10, []int{3, 3, 2, 2}},
		{2, []int{1, 1}},
		{0, []int{0}},
		{AcceptedStock, []int{250_000, 250_000, 250_000, 250_000}},
	} {
		stay := NewSale(tt.stock, 10)
		s := stay.AsSlots()
		var got []int
		for i, n := range s.Nights {
			got = append(got, n.Stock)
			if n.Date != stay.Nights[0].Date || n.Time != SlotTimes[i] || n.Minutes != SlotMinutes {
				t.Errorf("stock %d: slot %d is %+v", tt.stock, i, n)
			}
		}
		if !slices.Equal(got, tt.want) || s.Kind != flashsale.KindSlot || s.TimeZone != SlotTimeZone || !s.PurchaseToken || s.PerUserLimit != 1 {
			t.Errorf("stock %d: %+v, places %v, want %v", tt.stock, s, got, tt.want)
		}
		names := s.SlotNames()
		if len(names) != len(tt.want) || names[0] != stay.Nights[0].Date+"T12:00" {
			t.Errorf("stock %d: slot names %v", tt.stock, names)
		}
		if stay.SlotNames() != nil || stay.Kind != "" {
			t.Errorf("the stay %+v names slots", stay)
		}
	}
}

// TestRunSlots: against a server that answers as the ceiling does, every
// purchase of a slot run names a slot, quantity 1, the sessions spread
// evenly over the slots (normal guests, scalpers, the sold-out and the
// accepted loops alike), and the broken client's forged token comes with
// its slot, so that the token is what is refused.
func TestRunSlots(t *testing.T) { testRunSlots(t, nil) }

// TestRunSeats is TestRunSlots of a seats sale: every purchase names its
// departure, seats 1 (the departures of 2, 1 and 2 vehicles spread evenly
// over the sessions all the same), and the result keeps the vehicles for
// the check.
func TestRunSeats(t *testing.T) { testRunSlots(t, []int{2, 1, 2}) }

// testRunSlots is TestRunSlots, of a seats sale with vehicles.
func testRunSlots(t *testing.T, vehicles []int) {
	slots := []string{"2026-12-24T12:00", "2026-12-24T13:30", "2026-12-24T19:00"}
	seats := vehicles != nil
	var (
		mu     sync.Mutex
		bodies []purchaseBody
		forged int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/purchase") {
			b, _ := io.ReadAll(r.Body)
			var p purchaseBody
			if json.Unmarshal(b, &p) == nil && (p.Slot != "" || p.Departure != "") {
				if seats {
					if p.Slot != "" || p.Quantity != 0 {
						p.Seats = -1 // a slot's body: refused below
					}
					p.Slot, p.Quantity = p.Departure, p.Seats
				} else if p.Departure != "" || p.Seats != 0 {
					p.Quantity = -1
				}
				mu.Lock()
				if p.Token == forgedToken {
					forged++
				} else {
					bodies = append(bodies, p)
				}
				mu.Unlock()
			}
			r.Body = io.NopCloser(strings.NewReader(""))
		}
		CeilingHandler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := NewClient(srv.URL, "", "s", 8)
	defer c.CloseIdle()
	for _, tt := range []struct {
		name  string
		shape Shape
		mix   Mix
	}{
		{"Normal", Burst(30), Mix{Normal: 1}},
		{"Scalper", Burst(30), Mix{Scalper: 1}},
		{"Broken", Burst(70), Mix{Broken: 1}},
		{"SoldOut", Loop{Path: LoopSoldOut, Conns: 2, Duration: 50e6}, Mix{}},
		{"Accepted", Loop{Path: LoopAccepted, Conns: 3, Duration: 50e6}, Mix{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			bodies, forged = nil, 0
			mu.Unlock()
			res, err := Run(t.Context(), Config{Client: c, SaleID: "x", Shape: tt.shape, Mix: tt.mix, Hammer: 1, Slots: slots, Vehicles: vehicles})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(res.Slots, slots) || !slices.Equal(res.Vehicles, vehicles) {
				t.Errorf("result's slots %v, vehicles %v", res.Slots, res.Vehicles)
			}
			if tt.name == "Broken" {
				if forged != 10 || len(bodies) != 0 {
					t.Errorf("%d forged tokens with a slot, %d other slot purchases: want 10, 0", forged, len(bodies))
				}
				return
			}
			per := map[string]int{}
			for _, b := range bodies {
				if b.Quantity != 1 || !slices.Contains(slots, b.Slot) {
					t.Errorf("purchase body %+v", b)
				}
				per[b.Slot]++
			}
			if len(bodies) == 0 {
				t.Fatal("no purchase named a slot")
			}
			if tt.name == "SoldOut" {
				if per[slots[0]] != len(bodies) {
					t.Errorf("the sold-out loop's one guest named %v: want the first slot alone", per)
				}
				return
			}
			for _, s := range slots {
				if n := per[s]; n < len(bodies)/len(slots) || n > len(bodies)/len(slots)+1 {
					t.Errorf("slot %s named %d times of %d: %v, want them spread evenly", s, n, len(bodies), per)
				}
			}
		})
	}
}

// TestSaleAsSeats: a bench sale as seats keeps its places in all as a
// shuttle: up to four departures of its night's date of two vehicles each
// (fewer with fewer seats), the seats spread evenly over the departures
// and then their vehicles, each departure named once as a purchase names
// it, its vehicles counted.
func TestSaleAsSeats(t *testing.T) {
	for _, tt := range []struct {
		stock    int
		want     []int
		vehicles []int
	}{
		{100, []int{13, 12, 13, 12, 13, 12, 13, 12}, []int{2, 2, 2, 2}},
		{20, []int{3, 2, 3, 2, 3, 2, 3, 2}, []int{2, 2, 2, 2}},
		{10, []int{2, 1, 2, 1, 1, 1, 1, 1}, []int{2, 2, 2, 2}},
		{8, []int{1, 1, 1, 1, 1, 1, 1, 1}, []int{2, 2, 2, 2}},
		{7, []int{2, 2, 2, 1}, []int{1, 1, 1, 1}},
		{2, []int{1, 1}, []int{1, 1}},
		{0, []int{0}, []int{1}},
		{AcceptedStock, []int{125_000, 125_000, 125_000, 125_000, 125_000, 125_000, 125_000, 125_000}, []int{2, 2, 2, 2}},
	} {
		stay := NewSale(tt.stock, 10)
		s := stay.AsSeats()
		var got []int
		for i, n := range s.Nights {
			got = append(got, n.Stock)
			d := i / tt.vehicles[0]
			if n.Date != stay.Nights[0].Date || n.Time != SlotTimes[d] || n.Minutes != SlotMinutes {
				t.Errorf("stock %d: vehicle %d is %+v", tt.stock, i, n)
			}
		}
		if !slices.Equal(got, tt.want) || s.Kind != flashsale.KindSeats || s.TimeZone != SlotTimeZone || !s.PurchaseToken || s.PerUserLimit != 1 {
			t.Errorf("stock %d: %+v, seats %v, want %v", tt.stock, s, got, tt.want)
		}
		if v := s.Vehicles(); !slices.Equal(v, tt.vehicles) {
			t.Errorf("stock %d: vehicles %v, want %v", tt.stock, v, tt.vehicles)
		}
		names := s.SlotNames()
		if len(names) != len(tt.vehicles) || names[0] != stay.Nights[0].Date+"T12:00" || names[len(names)-1] != stay.Nights[0].Date+"T"+SlotTimes[len(names)-1] {
			t.Errorf("stock %d: departure names %v", tt.stock, names)
		}
		if stay.Vehicles() != nil || stay.AsSlots().Vehicles() != nil {
			t.Errorf("the stay or its slots have vehicles")
		}
	}
}

// TestJudgeSeats: the check of a seats sale adds up a departure's
// vehicles: an order failed while its departure's other vehicle has room
// is lost, one failed on a full departure is not, and a departure
// oversold is its vehicles' seats in all exceeded.
func TestJudgeSeats(t *testing.T) {
	deps := []string{"2026-12-24T12:00", "2026-12-24T19:00"}
	units := (&Result{Slots: deps, Vehicles: []int{2, 1}}).units()
	if want := []string{deps[0], deps[0], deps[1]}; !slices.Equal(units, want) {
		t.Fatalf("units %v, want %v", units, want)
	}
	audit := func(h0, h1, h2 int) Audit {
		return Audit{Nights: []AuditNight{
			{Date: testenv.Night(0), Stock: 1, Held: h0, InFlight: new(int)},
			{Date: testenv.Night(0), Stock: 1, Held: h1, InFlight: new(int)},
			{Date: testenv.Night(0), Stock: 2, Held: h2, InFlight: new(int)},
		}}
	}
	acc := func(id, dep string) Accepted { return Accepted{OrderID: id, User: "u" + id, Slot: dep} }
	held := func(dep string) Order { return Order{Status: "held", Rooms: 1, Slot: dep} }
	failed := func(dep string) Order { return Order{Status: "failed", Rooms: 1, Slot: dep} }
	for _, tt := range []struct {
		name     string
		audit    Audit
		accepted []Accepted
		orders   map[string]Order
		broken   string
		detail   string
	}{
		{name: "OK", audit: audit(1, 1, 0), accepted: []Accepted{acc("o1", deps[0]), acc("o2", deps[0])},
			orders: map[string]Order{"o1": held(deps[0]), "o2": held(deps[0])}},
		{name: "FailedOnFullDeparture", audit: audit(1, 1, 0), accepted: []Accepted{acc("o1", deps[0]), acc("o2", deps[0]), acc("o3", deps[0])},
			orders: map[string]Order{"o1": held(deps[0]), "o2": held(deps[0]), "o3": failed(deps[0])}},
		{name: "FailedWithAVehicleLeft", audit: audit(1, 0, 0), accepted: []Accepted{acc("o1", deps[0]), acc("o2", deps[0])},
			orders: map[string]Order{"o1": held(deps[0]), "o2": failed(deps[0])},
			broken: InvLost, detail: "order o2 (a 202) failed with rooms left"},
		{name: "DepartureOversold", audit: audit(1, 1, 1), accepted: []Accepted{acc("o1", deps[0]), acc("o2", deps[0]), acc("o3", deps[0])},
			orders: map[string]Order{"o1": held(deps[0]), "o2": held(deps[0]), "o3": held(deps[0])},
			broken: InvOversold, detail: "3 active 202s of the slot 2026-12-24T12:00 for 2 places"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			byOrder := map[string][]Accepted{}
			for _, a := range tt.accepted {
				byOrder[a.OrderID] = append(byOrder[a.OrderID], a)
			}
			ck := judge(tt.audit, byOrder, tt.orders, 9, 0, true, units)
			if got := strings.Join(ck.Broken(), ","); got != tt.broken {
				t.Fatalf("broken %q, want %q: %+v", got, tt.broken, ck.Invariants)
			}
			if ck.Stock != 4 {
				t.Errorf("stock %d: want the vehicles' 4 seats", ck.Stock)
			}
			for _, inv := range ck.Invariants {
				if inv.Name == tt.broken && !strings.Contains(inv.Detail, tt.detail) {
					t.Errorf("%s: %q, want it to say %q", inv.Name, inv.Detail, tt.detail)
				}
			}
		})
	}
}

// TestJudgeSlots: the check of a slot sale adds up its slots, and breaks
// when a slot holds more 202s than its places or a 202's order is of
// another slot; an order failed on a full slot is not lost while another
// slot has places.
func TestJudgeSlots(t *testing.T) {
	slots := []string{"2026-12-24T12:00", "2026-12-24T19:00"}
	audit := func(held0, held1 int) Audit {
		return Audit{Nights: []AuditNight{
			{Date: testenv.Night(0), Stock: 1, Held: held0, InFlight: new(int)},
			{Date: testenv.Night(0), Stock: 3, Held: held1, InFlight: new(int)},
		}}
	}
	acc := func(id, slot string) Accepted { return Accepted{OrderID: id, User: "u" + id, Slot: slot} }
	held := func(slot string) Order { return Order{Status: "held", Rooms: 1, Slot: slot} }
	for _, tt := range []struct {
		name     string
		audit    Audit
		accepted []Accepted
		orders   map[string]Order
		broken   string
		detail   string
	}{
		{name: "OK", audit: audit(1, 1), accepted: []Accepted{acc("o1", slots[0]), acc("o2", slots[1])},
			orders: map[string]Order{"o1": held(slots[0]), "o2": held(slots[1])}},
		{name: "FailedOnFullSlot", audit: audit(1, 0), accepted: []Accepted{acc("o1", slots[0]), acc("o2", slots[0])},
			orders: map[string]Order{"o1": held(slots[0]), "o2": {Status: "failed", Rooms: 1, Slot: slots[0]}}},
		{name: "FailedWithPlacesLeft", audit: audit(1, 0), accepted: []Accepted{acc("o1", slots[0]), acc("o2", slots[1])},
			orders: map[string]Order{"o1": held(slots[0]), "o2": {Status: "failed", Rooms: 1, Slot: slots[1]}},
			broken: InvLost, detail: "order o2 (a 202) failed with rooms left"},
		{name: "SlotOversold", audit: audit(1, 1), accepted: []Accepted{acc("o1", slots[0]), acc("o2", slots[0])},
			orders: map[string]Order{"o1": held(slots[0]), "o2": held(slots[0])},
			broken: InvOversold, detail: "2 active 202s of the slot 2026-12-24T12:00 for 1 places"},
		{name: "WrongSlot", audit: audit(0, 1), accepted: []Accepted{acc("o1", slots[0])},
			orders: map[string]Order{"o1": held(slots[1])},
			broken: InvLost, detail: `(a 202 for the slot 2026-12-24T12:00) is of the slot "2026-12-24T19:00"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			byOrder := map[string][]Accepted{}
			for _, a := range tt.accepted {
				byOrder[a.OrderID] = append(byOrder[a.OrderID], a)
			}
			ck := judge(tt.audit, byOrder, tt.orders, 1, 0, true, slots)
			if got := strings.Join(ck.Broken(), ","); got != tt.broken {
				t.Fatalf("broken %q, want %q: %+v", got, tt.broken, ck.Invariants)
			}
			if ck.Stock != 4 {
				t.Errorf("stock %d: want the slots' 4 places", ck.Stock)
			}
			for _, inv := range ck.Invariants {
				if inv.Name == tt.broken && !strings.Contains(inv.Detail, tt.detail) {
					t.Errorf("%s: %q, want it to say %q", inv.Name, inv.Detail, tt.detail)
				}
			}
		})
	}
}
