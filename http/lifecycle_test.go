package http

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/google/go-cmp/cmp"
)

// lifecycleCalls is what the lifecycle handlers passed to the stub.
type lifecycleCalls struct {
	id      string
	patch   flashsale.SalePatch
	delta   flashsale.StockDelta
	rules   flashsale.StayRulesPatch
	date    string
	sales   flashsale.SaleQuery
	orders  flashsale.OrderQuery
	action  string
	next    string // the cursor the stub's lists answer with
	ordersN int    // orders per page of the stub's order list
	// deliveries is the delivery log's query (notice_test.go).
	deliveries flashsale.DeliveryQuery
}

func (s *stubService) lifeRecord(id string, f func(l *lifecycleCalls)) error {
	if err := s.record(flashsale.User{}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.life.id = id
	f(&s.life)
	return nil
}

func (s *stubService) ListSales(ctx context.Context, q flashsale.SaleQuery) ([]*flashsale.SaleView, string, error) {
	if err := s.lifeRecord("", func(l *lifecycleCalls) { l.sales = q }); err != nil {
		return nil, "", err
	}
	return []*flashsale.SaleView{s.view()}, s.life.next, nil
}

func (s *stubService) UpdateSale(ctx context.Context, id string, p flashsale.SalePatch) (*flashsale.SaleView, error) {
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.patch = p }); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) PauseSale(ctx context.Context, id string, paused bool) (*flashsale.SaleView, error) {
	s.sawDeadline(ctx)
	act := "resume"
	if paused {
		act = "pause"
	}
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.action = act }); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) CloseSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.action = "close" }); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) SetNightRules(ctx context.Context, id, date string, p flashsale.StayRulesPatch) (*flashsale.SaleView, error) {
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.rules, l.date = p, date }); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) AdjustStock(ctx context.Context, id string, d flashsale.StockDelta) (*flashsale.SaleView, error) {
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.delta = d }); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) DeleteSale(ctx context.Context, id string) error {
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.action = "delete" }); err != nil {
		return err
	}
	if id != "s1" {
		return flashsale.ErrNotTestSale
	}
	return nil
}

func (s *stubService) SaleChanges(ctx context.Context, id string) ([]flashsale.SaleChange, error) {
	if err := s.lifeRecord(id, func(*lifecycleCalls) {}); err != nil {
		return nil, err
	}
	return []flashsale.SaleChange{{SaleID: id, At: t0, Kind: flashsale.ChangePause, Revision: 1, Detail: "pause"}}, nil
}

// SaleOrders answers pages of ordersN orders (3 by default) numbered
// down from o9, the cursor being the last ID, until o1.
func (s *stubService) SaleOrders(ctx context.Context, id string, q flashsale.OrderQuery) ([]*flashsale.Order, string, error) {
	if err := s.lifeRecord(id, func(l *lifecycleCalls) { l.orders = q }); err != nil {
		return nil, "", err
	}
	per := max(s.life.ordersN, 3)
	n := 10
	if q.Before != "" {
		n = int(q.Before[1] - '0')
	}
	var out []*flashsale.Order
	for i := n - 1; i >= 1 && len(out) < per; i-- {
		o := &flashsale.Order{ID: "o" + string(rune('0'+i)), SaleID: id, UserID: "u,\"q\"", Status: flashsale.OrderHeld,
			CheckIn: testenv.Night(0), Nights: 1, Rooms: 1, Amount: 39900, Currency: "CNY", HoldExpiresAt: t0, CreatedAt: t0, UpdatedAt: t0}
		if i == 5 { // what a guest and a payment platform may choose
			o.UserID, o.PaymentRef = "=cmd|' /C calc'!A0", "@SUM(1+1)"
		}
		out = append(out, o)
	}
	next := ""
	if len(out) == per && out[len(out)-1].ID != "o1" {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

func TestLifecycleRoutes(t *testing.T) {
	svc := &stubService{}
	srv := newStubServer(svc)
	admin := func(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
		t.Helper()
		return do(t, srv, method, path, "admin", body, hdr...)
	}
	t.Run("List", func(t *testing.T) {
		svc.life.next = "s0"
		w := admin("GET", "/api/admin/sales?status=paused&hotel=Harbour+View&limit=7&cursor=s9", "")
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		want := flashsale.SaleQuery{Status: flashsale.SalePaused, Hotel: "Harbour View", Before: "s9", Limit: 7}
		if diff := cmp.Diff(want, svc.life.sales); diff != "" {
			t.Errorf("query (-want +got):\n%s", diff)
		}
		var got struct {
			Sales []struct {
				ID       string `json:"id"`
				Revision int64  `json:"revision"`
			} `json:"sales"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got.Sales) != 1 || got.Sales[0].ID != "s1" || got.NextCursor != "s0" {
			t.Errorf("body %s (%v)", w.Body, err)
		}
	})
	t.Run("Patch", func(t *testing.T) {
		w := admin("PATCH", "/api/admin/sales/s1", `{"title":"New","ends_at":"2026-12-25T20:00:00+08:00","limits":{"per_user":"5/s,10"},"nights":[{"date":"`+testenv.Night(0)+`","stock":9}]}`)
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		p := svc.life.patch
		ends := time.Date(2026, 12, 25, 12, 0, 0, 0, time.UTC)
		if *p.Title != "New" || !p.EndsAt.Equal(ends) || p.Limits.PerUser.N != 5 || p.Limits.PerSale != nil ||
			len(p.Nights) != 1 || p.Nights[0].Stock != 9 || p.Hotel != nil || p.StartsAt != nil || p.Eligibility != nil {
			t.Errorf("patch = %+v", p)
		}
	})
	for _, act := range []string{"pause", "resume", "close"} {
		t.Run(act, func(t *testing.T) {
			w := admin("POST", "/api/admin/sales/s1/"+act, "")
			if w.Code != 200 || svc.life.action != act || svc.life.id != "s1" {
				t.Fatalf("status %d action %q id %q: %s", w.Code, svc.life.action, svc.life.id, w.Body)
			}
		})
	}
	t.Run("Delete", func(t *testing.T) {
		if w := admin("DELETE", "/api/admin/sales/s1", ""); w.Code != 204 || svc.life.action != "delete" {
			t.Fatalf("DELETE test sale: %d %s", w.Code, w.Body)
		}
		wantError(t, admin("DELETE", "/api/admin/sales/real", ""), 409, flashsale.EConflict)
		if w := do(t, srv, "DELETE", "/api/admin/sales/s1", "alice", ""); w.Code != 403 && w.Code != 401 {
			t.Errorf("a user's DELETE = %d", w.Code)
		}
	})
	t.Run("Stock", func(t *testing.T) {
		w := admin("POST", "/api/admin/sales/s1/nights/"+testenv.Night(0)+"/stock", `{"delta":-2}`)
		if w.Code != 200 || svc.life.delta != (flashsale.StockDelta{Date: testenv.Night(0), Delta: -2}) {
			t.Fatalf("status %d delta %+v: %s", w.Code, svc.life.delta, w.Body)
		}
	})
	t.Run("NightRules", func(t *testing.T) {
		w := admin("PATCH", "/api/admin/sales/s1/nights/"+testenv.Night(0), `{"stop_sell":true,"min_stay":2}`)
		yes, two := true, 2
		if w.Code != 200 || svc.life.date != testenv.Night(0) || !cmp.Equal(svc.life.rules, flashsale.StayRulesPatch{StopSell: &yes, MinStay: &two}) {
			t.Fatalf("status %d date %s rules %+v: %s", w.Code, svc.life.date, svc.life.rules, w.Body)
		}
		if w := do(t, srv, "PATCH", "/api/admin/sales/s1/nights/"+testenv.Night(0), "alice", `{"stop_sell":true}`); w.Code != 403 && w.Code != 401 {
			t.Errorf("a user's stop-sell = %d", w.Code)
		}
	})
	t.Run("Changes", func(t *testing.T) {
		w := admin("GET", "/api/admin/sales/s1/changes", "")
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"kind":"pause"`) {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
	t.Run("Orders", func(t *testing.T) {
		w := admin("GET", "/api/admin/sales/s1/orders?status=held&limit=3", "")
		if w.Code != 200 || svc.life.orders != (flashsale.OrderQuery{Status: flashsale.OrderHeld, Limit: 3}) {
			t.Fatalf("status %d query %+v: %s", w.Code, svc.life.orders, w.Body)
		}
		if !strings.Contains(w.Body.String(), `"next_cursor":"o7"`) {
			t.Errorf("body %s, want next_cursor o7", w.Body)
		}
	})
	t.Run("OrdersCSV", func(t *testing.T) {
		// Every order, page after page, with a header row; fields are
		// quoted as CSV wants (the user ID has a comma and quotes).
		w := admin("GET", "/api/admin/sales/s1/orders", "", "Accept", "text/csv")
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/csv") {
			t.Fatalf("status %d type %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		rows, err := csv.NewReader(bytes.NewReader(w.Body.Bytes())).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 10 || rows[0][0] != "order_id" || rows[1][0] != "o9" || rows[9][0] != "o1" || rows[1][1] != `u,"q"` {
			t.Errorf("rows = %q", rows)
		}
		// A cell a spreadsheet would run as a formula is text.
		if o5 := rows[5]; len(o5) < 10 || o5[0] != "o5" || o5[1] != `'=cmd|' /C calc'!A0` || o5[9] != "'@SUM(1+1)" {
			t.Errorf("order o5's row = %q, want the formulas neutralised", o5)
		}
	})
}

// TestLifecycleBadInput is the table of bad lifecycle requests: each is
// a 4xx with a message, and none reaches the service.
func TestLifecycleBadInput(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"ListBadStatus", "GET", "/api/admin/sales?status=open", "", 400, "status must be one of"},
		{"ListLimitZero", "GET", "/api/admin/sales?limit=0", "", 400, "limit must be"},
		{"ListLimitHuge", "GET", "/api/admin/sales?limit=1001", "", 400, "limit must be"},
		{"ListLimitNaN", "GET", "/api/admin/sales?limit=ten", "", 400, "limit must be"},
		{"ListCursorBinary", "GET", "/api/admin/sales?cursor=%00%01", "", 400, "cursor"},
		{"ListHotelLong", "GET", "/api/admin/sales?hotel=" + strings.Repeat("h", 201), "", 400, "hotel"},
		{"PatchEmpty", "PATCH", "/api/admin/sales/s1", "", 400, "empty"},
		{"PatchArray", "PATCH", "/api/admin/sales/s1", `[]`, 400, "JSON object"},
		{"PatchUnknown", "PATCH", "/api/admin/sales/s1", `{"paused":true}`, 400, "paused"},
		{"PatchRevision", "PATCH", "/api/admin/sales/s1", `{"revision":3}`, 400, "revision"},
		{"PatchCase", "PATCH", "/api/admin/sales/s1", `{"TITLE":"x"}`, 400, "TITLE"},
		{"PatchDuplicate", "PATCH", "/api/admin/sales/s1", `{"title":"a","title":"b"}`, 400, "duplicate"},
		{"PatchBadTime", "PATCH", "/api/admin/sales/s1", `{"ends_at":"tomorrow"}`, 400, "ends_at"},
		{"PatchBadLimit", "PATCH", "/api/admin/sales/s1", `{"limits":{"per_ip":"fast"}}`, 400, "limits.per_ip"},
		{"PatchWrongType", "PATCH", "/api/admin/sales/s1", `{"price":"cheap"}`, 400, "price"},
		{"PatchWaitingRoomUnknown", "PATCH", "/api/admin/sales/s1", `{"waiting_room":{"admission_seconds":60,"seed":1}}`, 400, `unknown field \"seed\" in waiting_room`},
		{"PatchWaitingRoomWrongType", "PATCH", "/api/admin/sales/s1", `{"waiting_room":{"admission_seconds":"60"}}`, 400, "waiting_room.admission_seconds must be an integer"},
		{"PatchWaitingRoomNotObject", "PATCH", "/api/admin/sales/s1", `{"waiting_room":false}`, 400, "waiting_room must be an object"},
		{"PatchWaitingRoomDuplicate", "PATCH", "/api/admin/sales/s1", `{"waiting_room":null,"waiting_room":{"admission_seconds":60}}`, 400, "duplicate"},
		{"PatchTooLarge", "PATCH", "/api/admin/sales/s1", `{"title":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, 413, "larger"},
		{"StockNoDelta", "POST", "/api/admin/sales/s1/nights/" + testenv.Night(0) + "/stock", `{}`, 400, "delta is required"},
		{"StockZero", "POST", "/api/admin/sales/s1/nights/" + testenv.Night(0) + "/stock", `{"delta":0}`, 400, "non-zero"},
		{"StockHuge", "POST", "/api/admin/sales/s1/nights/" + testenv.Night(0) + "/stock", `{"delta":1000001}`, 400, "between"},
		{"StockFloat", "POST", "/api/admin/sales/s1/nights/" + testenv.Night(0) + "/stock", `{"delta":1.5}`, 400, "delta"},
		{"StockBadDate", "POST", "/api/admin/sales/s1/nights/Dec24/stock", `{"delta":1}`, 400, "date"},
		{"StockBadTime", "POST", "/api/admin/sales/s1/nights/" + testenv.Night(0) + "/stock", `{"delta":1,"time":"7pm"}`, 400, "time must be"},
		{"StockExtra", "POST", "/api/admin/sales/s1/nights/" + testenv.Night(0) + "/stock", `{"delta":1,"why":"x"}`, 400, "why"},
		{"RulesEmpty", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{}`, 400, "at least one rule"},
		{"RulesNoBody", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), "", 400, "empty"},
		{"RulesUnknown", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{"closed":true}`, 400, "closed"},
		{"RulesNegative", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{"min_stay":-1}`, 400, "min_stay must be between"},
		{"RulesTooLong", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{"max_stay":367}`, 400, "max_stay must be between"},
		{"RulesWrongType", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{"stop_sell":"yes"}`, 400, "stop_sell"},
		{"RulesFloat", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{"min_stay":1.5}`, 400, "min_stay"},
		{"RulesDuplicate", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `{"stop_sell":true,"stop_sell":false}`, 400, "duplicate"},
		{"RulesBadDate", "PATCH", "/api/admin/sales/s1/nights/Dec24", `{"stop_sell":true}`, 400, "date"},
		{"RulesArray", "PATCH", "/api/admin/sales/s1/nights/" + testenv.Night(0), `[true]`, 400, "JSON object"},
		{"PauseBody", "POST", "/api/admin/sales/s1/pause", `{"now":true}`, 400, "now"},
		{"OrdersBadStatus", "GET", "/api/admin/sales/s1/orders?status=pending", "", 400, "status must be one of"},
		{"OrdersBadLimit", "GET", "/api/admin/sales/s1/orders?limit=-1", "", 400, "limit"},
		{"LongID", "PATCH", "/api/admin/sales/" + strings.Repeat("s", 129), `{"title":"x"}`, 404, "not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := &stubService{}
			w := do(t, newStubServer(svc), c.method, c.path, "admin", c.body)
			if w.Code != c.status || !strings.Contains(w.Body.String(), c.msg) {
				t.Errorf("%s %s = %d %s, want %d containing %q", c.method, c.path, w.Code, w.Body, c.status, c.msg)
			}
			if n := svc.calls(); n != 0 {
				t.Errorf("the service was called %d times", n)
			}
		})
	}
	t.Run("UserTokenForbidden", func(t *testing.T) {
		svc := &stubService{}
		srv := newStubServer(svc)
		for _, path := range []string{"/api/admin/sales/s1/pause", "/api/admin/sales/s1/close"} {
			w := do(t, srv, "POST", path, "alice", "")
			if w.Code != http.StatusForbidden && w.Code != http.StatusUnauthorized {
				t.Errorf("user token on %s = %d, want 401/403", path, w.Code)
			}
		}
		if svc.calls() != 0 {
			t.Error("the service was called")
		}
	})
}

// TestDecodeSalePatchWaitingRoom: an edit's waiting_room absent leaves
// the room alone (nil), null turns it off (a pointer to nil), an object
// sets it as sent (Apply validates it with the rest of the sale).
func TestDecodeSalePatchWaitingRoom(t *testing.T) {
	for _, c := range []struct {
		name, body string
		sent       bool
		want       *flashsale.WaitingRoom
	}{
		{"Absent", `{"title":"x"}`, false, nil},
		{"Null", `{"waiting_room":null}`, true, nil},
		{"Value", `{"waiting_room":{"prequeue_minutes":15,"admit_per_second":0.5,"admission_seconds":90}}`, true,
			&flashsale.WaitingRoom{PrequeueMinutes: 15, AdmitPerSecond: 0.5, AdmissionSeconds: 90}},
		{"Empty", `{"waiting_room":{}}`, true, &flashsale.WaitingRoom{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := decodeSalePatch(strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.WaitingRoom != nil; got != c.sent {
				t.Fatalf("waiting room sent = %v, want %v", got, c.sent)
			}
			if c.sent {
				if diff := cmp.Diff(c.want, *p.WaitingRoom); diff != "" {
					t.Errorf("waiting room (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// FuzzDecodeSalePatch: no input panics, a decoded edit names only valid
// times and rates, and applied to a sale before its start it is either
// refused as invalid or leaves a sale that validates.
func FuzzDecodeSalePatch(f *testing.F) {
	for _, s := range []string{`{"title":"x"}`, `{"ends_at":"2026-12-25T20:00:00Z"}`, `{"nights":null}`,
		`{"limits":{"per_sale":"off"}}`, `{"eligibility":{"channels":["a"]}}`, `{}`, `{"price":1e99}`,
		`{"waiting_room":null}`, `{"waiting_room":{"prequeue_minutes":30,"admit_per_second":2.5,"admission_seconds":60}}`,
		`{"waiting_room":{}}`, `{"waiting_room":{"admit_per_second":-1e-300,"admission_seconds":60}}`} {
		f.Add(s)
	}
	start := testenv.NightTime(0).Add(20 * time.Hour)
	sale := fixture.Sale(fixture.Window(start, start.Add(time.Hour)), fixture.Token())
	f.Fuzz(func(t *testing.T, body string) {
		p, err := decodeSalePatch(strings.NewReader(body))
		if err != nil {
			if flashsale.ErrorCode(err) != flashsale.EInvalid && flashsale.ErrorCode(err) != flashsale.ETooLarge {
				t.Fatalf("error %v has code %q", err, flashsale.ErrorCode(err))
			}
			return
		}
		if p.EndsAt != nil && p.EndsAt.IsZero() {
			t.Fatalf("zero ends_at accepted from %q", body)
		}
		next, _, err := p.Apply(sale, start.Add(-time.Hour))
		if err != nil {
			if flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Fatalf("Apply: error %v has code %q", err, flashsale.ErrorCode(err))
			}
			return
		}
		if err := next.Validate(); err != nil {
			t.Fatalf("Apply left an invalid sale: %v", err)
		}
	})
}

// FuzzDecodeStock: a decoded delta is always within bounds and non-zero.
func FuzzDecodeStock(f *testing.F) {
	for _, s := range []string{`{"delta":1}`, `{"delta":-5}`, `{"delta":0}`, `{"delta":1e9}`, `{"delta":null}`} {
		f.Add(s, testenv.Night(0))
	}
	f.Fuzz(func(t *testing.T, body, date string) {
		d, err := decodeStock(strings.NewReader(body), date)
		if err != nil {
			return
		}
		if d.Delta == 0 || d.Delta > flashsale.MaxStock || d.Delta < -flashsale.MaxStock {
			t.Fatalf("delta %d accepted from %q", d.Delta, body)
		}
	})
}

// FuzzDecodeNightRules: a decoded patch names at least one rule, and its
// lengths of stay are in range.
func FuzzDecodeNightRules(f *testing.F) {
	for _, s := range []string{`{"stop_sell":true}`, `{"min_stay":2,"max_stay":3}`, `{"closed_to_arrival":false}`,
		`{}`, `{"min_stay":-1}`, `{"max_stay":1e9}`, `{"closed_to_departure":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := decodeNightRules(strings.NewReader(body))
		if err != nil {
			if c := flashsale.ErrorCode(err); c != flashsale.EInvalid && c != flashsale.ETooLarge {
				t.Fatalf("error %v has code %q", err, c)
			}
			return
		}
		if p == (flashsale.StayRulesPatch{}) {
			t.Fatalf("an empty patch accepted from %q", body)
		}
		for _, v := range []*int{p.MinStay, p.MaxStay} {
			if v != nil && (*v < 0 || *v > flashsale.MaxNights) {
				t.Fatalf("length of stay %d accepted from %q", *v, body)
			}
		}
	})
}

// TestSalesPools: the public list narrowed to one room type's pools.
func TestSalesPools(t *testing.T) {
	srv := newStubServer(&stubService{})
	for q, want := range map[string]int{
		"": 1, "?hotel=Harbour+View": 1, "?hotel=Harbour+View&room_type=Deluxe+King": 1,
		"?hotel=Other": 0, "?room_type=Twin": 0, "?hotel=harbour+view": 0,
	} {
		w := do(t, srv, "GET", "/api/sales"+q, "", "")
		var got struct {
			Sales []struct{ ID string } `json:"sales"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != 200 || err != nil || len(got.Sales) != want {
			t.Errorf("GET /api/sales%s = %d %s, want %d sales", q, w.Code, w.Body, want)
		}
	}
	if w := do(t, srv, "GET", "/api/sales?hotel="+strings.Repeat("h", 201), "", ""); w.Code != 400 {
		t.Errorf("a 201-character hotel = %d, want 400", w.Code)
	}
}

// TestAdminDeadline: the operators' routes wait adminTimeout (or the
// request deadline, when that is longer), a guest's purchase the request
// deadline: a pause in the storm is not shed for being slow.
func TestAdminDeadline(t *testing.T) {
	for _, tt := range []struct {
		name          string
		timeout       time.Duration
		purchase, mgr time.Duration
	}{
		{"short", 50 * time.Millisecond, 50 * time.Millisecond, adminTimeout},
		{"long", time.Minute, time.Minute, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &stubService{}
			s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, AdminToken: testAdmin, RequestTimeout: tt.timeout, Now: func() time.Time { return t0 }})
			left := func(method, path, auth string) time.Duration {
				t.Helper()
				start := time.Now()
				if w := do(t, s, method, path, auth, ""); w.Code >= 300 {
					t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
				}
				svc.mu.Lock()
				defer svc.mu.Unlock()
				return svc.deadline.Sub(start)
			}
			// The deadline is set a moment after start: within 100 ms of it.
			near := func(got, want time.Duration) bool {
				return got > want-100*time.Millisecond && got < want+100*time.Millisecond
			}
			if got := left("POST", "/api/sales/s1/purchase", "alice"); !near(got, tt.purchase) {
				t.Errorf("purchase deadline %v away, want %v", got, tt.purchase)
			}
			if got := left("POST", "/api/admin/sales/s1/pause", "admin"); !near(got, tt.mgr) {
				t.Errorf("pause deadline %v away, want %v", got, tt.mgr)
			}
		})
	}
}
