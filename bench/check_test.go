package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestJudge: each way the books can be wrong breaks its invariant and
// only that one (the mutation check of Verify's verdict).
func TestJudge(t *testing.T) {
	audit := func(stock, held, sold int, findings ...string) Audit {
		a := Audit{Nights: []AuditNight{{Date: testenv.Night(0), Stock: stock, Held: held, Sold: sold, InFlight: new(int)}}}
		for _, f := range findings {
			a.Findings = append(a.Findings, Finding{Kind: f})
		}
		return a
	}
	acc := func(id, user, key string) Accepted { return Accepted{OrderID: id, User: user, Key: key} }
	held := func(rooms int) Order { return Order{Status: "held", Rooms: rooms} }
	for _, tt := range []struct {
		name     string
		audit    Audit
		accepted []Accepted
		orders   map[string]Order
		unknown  int
		drained  bool
		broken   string // the invariants that break, comma-separated; "" = all hold
		detail   string
	}{
		{name: "OK", audit: audit(2, 1, 1), accepted: []Accepted{acc("o1", "a", "k"), acc("o2", "b", "k")},
			orders: map[string]Order{"o1": held(1), "o2": {Status: "paid", Rooms: 1}}, drained: true},
		{name: "OKExpiredAndRetried", audit: audit(1, 1, 0),
			accepted: []Accepted{acc("o1", "a", "k"), acc("o1", "a", "k"), acc("o2", "b", "")},
			orders:   map[string]Order{"o1": held(1), "o2": {Status: "expired", Rooms: 1}}, drained: true},
		{name: "OKUnknownOutcome", audit: audit(2, 2, 0), accepted: []Accepted{acc("o1", "a", "")},
			orders: map[string]Order{"o1": held(1)}, unknown: 1, drained: true},
		{name: "OversoldOnServer", audit: audit(1, 1, 1), accepted: []Accepted{acc("o1", "a", ""), acc("o2", "b", "")},
			orders: map[string]Order{"o1": held(1), "o2": held(1)}, drained: true, broken: InvOversold, detail: "held 1 + sold 1 > stock 1"},
		{name: "OversoldByThe202s", audit: audit(1, 1, 0), accepted: []Accepted{acc("o1", "a", ""), acc("o2", "b", "")},
			orders: map[string]Order{"o1": held(1), "o2": held(1)}, drained: true, broken: InvOversold + "," + InvLost, detail: "2 active 202s for 1 rooms"},
		{name: "Lost", audit: audit(2, 1, 0), accepted: []Accepted{acc("o1", "a", ""), acc("o2", "b", "")},
			orders: map[string]Order{"o1": held(1), "o2": {}}, drained: true, broken: InvLost, detail: "o2 (a 202 to b) cannot be read"},
		{name: "FailedWithRoom", audit: audit(2, 1, 0), accepted: []Accepted{acc("o1", "a", ""), acc("o2", "b", "")},
			orders: map[string]Order{"o1": held(1), "o2": {Status: "failed", Rooms: 1}}, drained: true, broken: InvLost, detail: "failed with rooms left"},
		{name: "ServerForgot", audit: audit(2, 1, 0), accepted: []Accepted{acc("o1", "a", ""), acc("o2", "b", "")},
			orders: map[string]Order{"o1": held(1), "o2": held(1)}, drained: true, broken: InvLost, detail: "counts 1 rooms held or sold, the 202s' orders 2"},
		{name: "Duplicate", audit: audit(2, 1, 0), accepted: []Accepted{acc("o1", "a", ""), acc("o1", "b", "")},
			orders: map[string]Order{"o1": held(1)}, drained: true, broken: InvDuplicate, detail: "o1 answered 202 to a and to b"},
		{name: "DuplicateWithoutKey", audit: audit(2, 1, 0), accepted: []Accepted{acc("o1", "a", ""), acc("o1", "a", "")},
			orders: map[string]Order{"o1": held(1)}, drained: true, broken: InvDuplicate},
		{name: "OverLimit", audit: audit(5, 2, 0), accepted: []Accepted{acc("o1", "s", ""), acc("o2", "s", "")},
			orders: map[string]Order{"o1": held(1), "o2": held(1)}, drained: true, broken: InvOverLimit, detail: "s holds 2 rooms, limit 1"},
		{name: "Phantom", audit: audit(5, 3, 0), accepted: []Accepted{acc("o1", "a", "")},
			orders: map[string]Order{"o1": held(1)}, unknown: 1, drained: true, broken: InvBooks, detail: "counts 3 rooms"},
		{name: "AuditDrift", audit: audit(5, 1, 0, "units_drift"), accepted: []Accepted{acc("o1", "a", "")},
			orders: map[string]Order{"o1": held(1)}, drained: true, broken: InvBooks, detail: "finds units_drift"},
		{name: "Undrained", audit: audit(5, 0, 0), accepted: []Accepted{acc("o1", "a", "")},
			orders: map[string]Order{"o1": {Status: "pending", Rooms: 1}}, broken: InvDrained, detail: "1 202s pending"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			byOrder := map[string][]Accepted{}
			for _, a := range tt.accepted {
				byOrder[a.OrderID] = append(byOrder[a.OrderID], a)
			}
			ck := judge(tt.audit, byOrder, tt.orders, 1, tt.unknown, tt.drained, nil)
			if got := strings.Join(ck.Broken(), ","); got != tt.broken {
				t.Fatalf("broken %q, want %q: %+v", got, tt.broken, ck.Invariants)
			}
			first, _, _ := strings.Cut(tt.broken, ",")
			for _, inv := range ck.Invariants {
				if inv.Name == first && !strings.Contains(inv.Detail, tt.detail) {
					t.Errorf("%s: %q, want it to say %q", inv.Name, inv.Detail, tt.detail)
				}
			}
		})
	}
}

// TestVerifyDrains: Verify waits while orders are on their way (pending
// to their owners, or in flight in the audit: either alone is not yet
// settled) and judges the books once they have landed; when they do not
// land within the drain, drained breaks.
func TestVerifyDrains(t *testing.T) {
	for _, tt := range []struct {
		name          string
		land, drain   time.Duration
		broken, state string
	}{
		{"Lands", 200 * time.Millisecond, 10 * time.Second, "", "held"},
		{"NeverLands", time.Hour, 300 * time.Millisecond, InvDrained, "pending"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Until land the owners read pending and the audit has
				// nothing in flight; for as long again the owners read
				// held while one of the two is still in flight; then both
				// are held and nothing is in flight.
				held, inFlight, status := 0, 0, "pending"
				switch since := time.Since(start); {
				case since >= 2*tt.land:
					held, status = 2, "held"
				case since >= tt.land:
					held, inFlight, status = 1, 1, "held"
				}
				w.Header().Set("Content-Type", "application/json")
				if strings.HasSuffix(r.URL.Path, "/audit") {
					fmt.Fprintf(w, `{"balanced":true,"nights":[{"date":%q,"stock":5,"held":%d,"sold":0,"in_flight":%d}],"findings":[]}`, testenv.Night(0), held, inFlight)
					return
				}
				fmt.Fprintf(w, `{"order_id":%q,"status":%q,"rooms":1}`, strings.TrimPrefix(r.URL.Path, "/api/orders/"), status)
			}))
			defer srv.Close()
			c := NewClient(srv.URL, "a", "s", 4)
			defer c.CloseIdle()
			res := &Result{Accepted: []Accepted{{OrderID: "o1", User: "a"}, {OrderID: "o2", User: "b"}}}
			ck, err := Verify(t.Context(), c, "s1", 1, res, tt.drain)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(ck.Broken(), ","); got != tt.broken || ck.Orders[tt.state] != 2 {
				t.Fatalf("broken %q, orders %v; want broken %q and both orders %s: %+v", got, ck.Orders, tt.broken, tt.state, ck.Invariants)
			}
		})
	}
}
