package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/api"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

// stubService records what the handlers pass and answers with canned
// values, so routing, auth and decoding are tested without a store.
type stubService struct {
	mu       sync.Mutex
	n        int
	purchase flashsale.PurchaseRequest
	token    flashsale.TokenRequest
	user     flashsale.User
	err      error // returned by every method when set
	paidRef  string
	forced   flashsale.BreakerForce
	life     lifecycleCalls  // lifecycle_test.go
	deadline time.Time       // the context deadline of the last Purchase or PauseSale
	soldOut  bool            // RefuseSoldOut's answer
	refused  int             // RefuseSoldOut's true answers
	joined   map[string]bool // the users who joined the waiting room (queue_test.go)
	place    flashsale.QueueState
	moved    chan struct{}
}

// sawDeadline keeps ctx's deadline (zero when it has none).
func (s *stubService) sawDeadline(ctx context.Context) {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.deadline = d
	s.mu.Unlock()
}

func (s *stubService) record(u flashsale.User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.user = u
	return s.err
}

func (s *stubService) calls() int { s.mu.Lock(); defer s.mu.Unlock(); return s.n }

var stubSale = fixture.Sale(fixture.ID("s1"), fixture.Window(t0, t0.Add(time.Hour)), fixture.Token(), fixture.Created(t0))

func (s *stubService) CreateSale(ctx context.Context, sale *flashsale.Sale) (*flashsale.Sale, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	c := *sale
	c.ID = "s1"
	return &c, nil
}

func (s *stubService) view() *flashsale.SaleView {
	return &flashsale.SaleView{Sale: stubSale, Status: flashsale.SaleActive, ServerTime: t0,
		Nights: []flashsale.NightStock{{Date: testenv.Night(0), Stock: 5, Available: 4, Held: 1}}}
}

func (s *stubService) AdminSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) PublicSale(ctx context.Context, id string) (*flashsale.SaleView, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return s.view(), nil
}

func (s *stubService) Sales(ctx context.Context) ([]*flashsale.SaleView, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return []*flashsale.SaleView{s.view()}, nil
}

func (s *stubService) Preheat(ctx context.Context, id string) error {
	return s.record(flashsale.User{})
}

func (s *stubService) IssueToken(ctx context.Context, u flashsale.User, req flashsale.TokenRequest) (*flashsale.PurchaseToken, error) {
	if err := s.record(u); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.token = req
	s.mu.Unlock()
	return &flashsale.PurchaseToken{Token: "tok", ExpiresAt: t0.Add(time.Minute)}, nil
}

func (s *stubService) Challenge(ctx context.Context, u flashsale.User, saleID string) (*flashsale.Puzzle, error) {
	if err := s.record(u); err != nil {
		return nil, err
	}
	return &flashsale.Puzzle{Challenge: "puzzle", Difficulty: 16, ExpiresAt: t0.Add(time.Minute), Algorithm: "sha256"}, nil
}

func (s *stubService) order(u flashsale.User, id string) *flashsale.Order {
	return &flashsale.Order{ID: id, SaleID: "s1", UserID: u.ID, Status: flashsale.OrderHeld, CheckIn: testenv.Night(0),
		Nights: 1, Rooms: 1, Amount: 39900, Currency: "CNY", HoldExpiresAt: t0.Add(30 * time.Second)}
}

func (s *stubService) Purchase(ctx context.Context, u flashsale.User, req flashsale.PurchaseRequest) (*flashsale.Order, error) {
	s.sawDeadline(ctx)
	if err := s.record(u); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.purchase = req
	s.mu.Unlock()
	return s.order(u, "o1"), nil
}

func (s *stubService) RefuseSoldOut(ctx context.Context, saleID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.soldOut {
		s.refused++
	}
	return s.soldOut
}

func (s *stubService) OrderByID(ctx context.Context, id string) (*flashsale.Order, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return s.order(flashsale.User{ID: "alice"}, id), nil
}

func (s *stubService) Order(ctx context.Context, u flashsale.User, id string) (*flashsale.Order, error) {
	if err := s.record(u); err != nil {
		return nil, err
	}
	return s.order(u, id), nil
}

func (s *stubService) Cancel(ctx context.Context, u flashsale.User, id string) (*flashsale.Order, error) {
	if err := s.record(u); err != nil {
		return nil, err
	}
	o := s.order(u, id)
	o.Status = flashsale.OrderCancelled
	return o, nil
}

func (s *stubService) MarkPaid(ctx context.Context, id, paymentRef string) (*flashsale.Order, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.paidRef = paymentRef
	s.mu.Unlock()
	o := s.order(flashsale.User{ID: "alice"}, id)
	o.Status, o.PaymentRef = flashsale.OrderPaid, paymentRef
	return o, nil
}

// stubAudit is an unbalanced audit with one repair step of each outcome.
var stubAudit = &flashsale.Audit{
	SaleID: "s1", At: t0, Engine: true,
	Nights: []flashsale.AuditNight{{Date: testenv.Night(0), Stock: 5, EngineAvailable: 4, Held: 1}},
	Findings: []flashsale.Finding{{Kind: flashsale.FindingUnitsDrift, Night: testenv.Night(0), Detail: "the engine has 4 rooms left"},
		{Kind: flashsale.FindingStranded, OrderID: "o1", UserID: "alice", Detail: "stranded"}},
}

func (s *stubService) Audit(ctx context.Context, saleID string) (*flashsale.Audit, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return stubAudit, nil
}

func (s *stubService) Repair(ctx context.Context, saleID string) (*flashsale.Audit, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	a := *stubAudit
	a.Findings = nil
	a.Repairs = []flashsale.RepairStep{{Action: flashsale.RepairRepublish, OrderID: "o1"}, {Action: flashsale.RepairRebuild, Err: errors.New("rebuild: busy")}}
	return &a, nil
}

func (s *stubService) Ready(ctx context.Context) *flashsale.Readiness {
	if err := s.record(flashsale.User{}); err != nil {
		return &flashsale.Readiness{Engine: "ok", Database: "unavailable", DatabaseErr: err}
	}
	return &flashsale.Readiness{Ready: true, Engine: "ok", Database: "ok", Breaker: &flashsale.BreakerStatus{
		State: flashsale.BreakerClosed, Forced: flashsale.BreakerAuto, Since: t0}}
}

func (s *stubService) Breaker(ctx context.Context) (*flashsale.BreakerStatus, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return &flashsale.BreakerStatus{State: flashsale.BreakerClosed, Forced: flashsale.BreakerAuto, Since: t0}, nil
}

func (s *stubService) ForceBreaker(ctx context.Context, f flashsale.BreakerForce) (*flashsale.BreakerStatus, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.forced = f
	s.mu.Unlock()
	return &flashsale.BreakerStatus{State: flashsale.BreakerOpen, Forced: f, Since: t0}, nil
}

// do sends one request through the handler. auth is "admin", "alice" (a
// user JWT), "" for none, or a literal Authorization header.
func do(tb testing.TB, s *Server, method, path, auth, body string, header ...string) *httptest.ResponseRecorder {
	tb.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	switch auth {
	case "":
	case "admin":
		r.Header.Set("Authorization", "Bearer "+testAdmin)
	case "alice", "bob":
		r.Header.Set("Authorization", "Bearer "+sign(tb, jwt.SigningMethodHS256, testSecret,
			jwt.MapClaims{"sub": auth, "tier": "gold", "exp": t0.Add(time.Hour).Unix()}))
	default:
		r.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w
}

// wantError checks a response is a JSON error with status and code.
func wantError(tb testing.TB, w *httptest.ResponseRecorder, status int, code string) {
	tb.Helper()
	if w.Code != status {
		tb.Fatalf("status = %d, want %d: %s", w.Code, status, w.Body)
	}
	if got, want := w.Header().Get("Content-Type"), "application/json"; got != want {
		tb.Fatalf("content-type = %q, want %q", got, want)
	}
	var e errorJSON
	dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		tb.Fatalf("error body %q: %v", w.Body, err)
	}
	if e.Error.Code != code {
		tb.Fatalf("code = %q, want %q (message %q)", e.Error.Code, code, e.Error.Message)
	}
	if e.Error.Message == "" {
		tb.Fatalf("error %q has no message", code)
	}
}

func newStubServer(svc *stubService) *Server {
	return NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 }})
}

func TestRoutes(t *testing.T) {
	s := newStubServer(&stubService{})
	tests := []struct {
		method, path, auth, body string
		status                   int
	}{
		{"POST", "/api/admin/sales", "admin", `{"title":"T","hotel":"H","room_type":"R","nights":[{"date":"` + testenv.Night(0) + `","stock":5}],
			"price":100,"original_price":200,"currency":"CNY","starts_at":"2026-12-01T20:00:00Z","ends_at":"2026-12-01T21:00:00Z"}`, http.StatusCreated},
		{"GET", "/api/admin/sales/s1", "admin", "", http.StatusOK},
		{"POST", "/api/admin/sales/s1/preheat", "admin", "", http.StatusOK},
		{"GET", "/api/admin/sales/s1/audit", "admin", "", http.StatusOK},
		{"POST", "/api/admin/sales/s1/audit/repair", "admin", "", http.StatusOK},
		{"GET", "/api/admin/breaker", "admin", "", http.StatusOK},
		{"POST", "/api/admin/breaker", "admin", `{"force":"open"}`, http.StatusOK},
		{"GET", "/api/sales", "", "", http.StatusOK},
		{"GET", "/api/sales/s1", "", "", http.StatusOK},
		{"POST", "/api/sales/s1/token", "alice", "", http.StatusCreated},
		{"POST", "/api/sales/s1/purchase", "alice", "", http.StatusAccepted},
		{"GET", "/api/orders/o1", "alice", "", http.StatusOK},
		{"POST", "/api/orders/o1/cancel", "alice", "", http.StatusOK},
		{"POST", "/api/orders/o1/paid", "admin", `{"payment_ref":"pay-1"}`, http.StatusOK},
		{"GET", "/healthz", "", "", http.StatusOK},
		{"GET", "/readyz", "", "", http.StatusOK},
		{"GET", "/api/openapi.yaml", "", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := do(t, s, tt.method, tt.path, tt.auth, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.path == "/api/openapi.yaml" {
				if got := w.Header().Get("Content-Type"); got != "application/yaml" {
					t.Errorf("content-type = %q", got)
				}
				if !bytes.Equal(w.Body.Bytes(), api.OpenAPI) {
					t.Errorf("served document differs from api.OpenAPI")
				}
				return
			}
			if got := w.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("content-type = %q", got)
			}
			if !json.Valid(w.Body.Bytes()) {
				t.Errorf("body is not JSON: %s", w.Body)
			}
		})
	}
}

func TestRouteFallbacks(t *testing.T) {
	s := newStubServer(&stubService{})
	t.Run("NotFound", func(t *testing.T) {
		for _, p := range []string{"/", "/api", "/api/nope", "/api/sales/s1/nope", "/api/admin"} {
			wantError(t, do(t, s, "GET", p, "", ""), http.StatusNotFound, flashsale.ENotFound)
		}
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		for _, tt := range []struct{ method, path, allow string }{
			{"GET", "/api/sales/s1/purchase", "POST"},
			{"DELETE", "/api/sales/s1", "GET, HEAD"},
			{"PUT", "/api/admin/sales", "GET, HEAD, POST"},
			{"POST", "/healthz", "GET, HEAD"},
		} {
			w := do(t, s, tt.method, tt.path, "alice", "")
			wantError(t, w, http.StatusMethodNotAllowed, EMethodNotAllowed)
			if got := w.Header().Get("Allow"); got != tt.allow {
				t.Errorf("%s %s: Allow = %q, want %q", tt.method, tt.path, got, tt.allow)
			}
		}
	})
}

func TestPublicCacheControl(t *testing.T) {
	s := newStubServer(&stubService{})
	for _, p := range []string{"/api/sales", "/api/sales/s1"} {
		w := do(t, s, "GET", p, "", "")
		if got, want := w.Header().Get("Cache-Control"), "public, max-age=1"; got != want {
			t.Errorf("%s: Cache-Control = %q, want %q", p, got, want)
		}
	}
	svc := &stubService{err: flashsale.ErrNotFound}
	w := do(t, newStubServer(svc), "GET", "/api/sales/nope", "", "")
	wantError(t, w, http.StatusNotFound, flashsale.ENotFound)
	if got := w.Header().Get("Cache-Control"); got != "" {
		t.Errorf("error response is cacheable: %q", got)
	}
}

func TestPublicSaleJSON(t *testing.T) {
	w := do(t, newStubServer(&stubService{}), "GET", "/api/sales/s1", "", "")
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"currency", "eligibility", "ends_at", "hotel", "id", "kind", "nights", "original_price", "per_user_limit",
		"price", "purchase_token", "room_type", "server_time", "starts_at", "status", "title"}
	if diff := cmp.Diff(want, slices.Sorted(mapsKeys(got))); diff != "" {
		t.Fatalf("public sale fields (-want +got):\n%s", diff)
	}
	nights := got["nights"].([]any)
	if diff := cmp.Diff(map[string]any{"date": testenv.Night(0), "available": float64(4)}, nights[0]); diff != "" {
		t.Fatalf("night (-want +got):\n%s", diff)
	}
}

func TestAdminSaleJSON(t *testing.T) {
	w := do(t, newStubServer(&stubService{}), "GET", "/api/admin/sales/s1", "admin", "")
	var got struct {
		ID         string                 `json:"id"`
		Status     string                 `json:"status"`
		ServerTime time.Time              `json:"server_time"`
		Nights     []flashsale.NightStock `json:"nights"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "s1" || got.Status != "active" || !got.ServerTime.Equal(t0) {
		t.Fatalf("admin sale = %+v", got)
	}
	if diff := cmp.Diff([]flashsale.NightStock{{Date: testenv.Night(0), Stock: 5, Available: 4, Held: 1}}, got.Nights); diff != "" {
		t.Fatalf("nights (-want +got):\n%s", diff)
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestPurchasePassesThrough checks what the handler hands the service:
// absent fields as zero values (the service's defaults), present ones as sent.
func TestPurchasePassesThrough(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		header []string
		want   flashsale.PurchaseRequest
	}{
		{"EmptyBody", "", nil, flashsale.PurchaseRequest{SaleID: "s1"}},
		{"EmptyObject", "{}", nil, flashsale.PurchaseRequest{SaleID: "s1"}},
		{"NullFields", `{"nights":null,"rooms":null}`, nil, flashsale.PurchaseRequest{SaleID: "s1"}},
		{"All", `{"token":"t","check_in":"` + testenv.Night(1) + `","nights":2,"rooms":3}`, []string{"Idempotency-Key", "k-1 x"},
			flashsale.PurchaseRequest{SaleID: "s1", IdempotencyKey: "k-1 x", Token: "t", CheckIn: testenv.Night(1), Nights: 2, Rooms: 3}},
		{"Key128", "{}", []string{"Idempotency-Key", strings.Repeat("k", 128)},
			flashsale.PurchaseRequest{SaleID: "s1", IdempotencyKey: strings.Repeat("k", 128)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &stubService{}
			w := do(t, newStubServer(svc), "POST", "/api/sales/s1/purchase", "alice", tt.body, tt.header...)
			if w.Code != http.StatusAccepted {
				t.Fatalf("status = %d: %s", w.Code, w.Body)
			}
			tt.want.ClientIP = "192.0.2.1" // httptest's peer
			if diff := cmp.Diff(tt.want, svc.purchase); diff != "" {
				t.Fatalf("request (-want +got):\n%s", diff)
			}
			if got, want := svc.user, (flashsale.User{ID: "alice", Tier: "gold", Claimed: flashsale.FactTier}); got != want {
				t.Fatalf("user = %+v, want %+v", got, want)
			}
			var got map[string]any
			json.Unmarshal(w.Body.Bytes(), &got)
			if diff := cmp.Diff([]string{"amount", "currency", "hold_expires_at", "order_id", "status"}, slices.Sorted(mapsKeys(got))); diff != "" {
				t.Fatalf("accepted fields (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadInputNeverReachesService checks every rejected input is answered
// before the service is called.
func TestBadInputNeverReachesService(t *testing.T) {
	big := `{"token":"` + strings.Repeat("a", MaxBodyBytes) + `"}`
	tests := []struct {
		name, method, path, auth, body string
		header                         []string
		status                         int
		code                           string
	}{
		{"PurchaseMalformed", "POST", "/api/sales/s1/purchase", "alice", `{"rooms":`, nil, 400, flashsale.EInvalid},
		{"PurchaseUnknownField", "POST", "/api/sales/s1/purchase", "alice", `{"room":1}`, nil, 400, flashsale.EInvalid},
		{"PurchaseWrongType", "POST", "/api/sales/s1/purchase", "alice", `{"rooms":"1"}`, nil, 400, flashsale.EInvalid},
		{"PurchaseRooms0", "POST", "/api/sales/s1/purchase", "alice", `{"rooms":0}`, nil, 400, flashsale.EInvalid},
		{"PurchaseRoomsNegative", "POST", "/api/sales/s1/purchase", "alice", `{"rooms":-1}`, nil, 400, flashsale.EInvalid},
		{"PurchaseNights0", "POST", "/api/sales/s1/purchase", "alice", `{"nights":0}`, nil, 400, flashsale.EInvalid},
		{"PurchaseTrailing", "POST", "/api/sales/s1/purchase", "alice", `{}{}`, nil, 400, flashsale.EInvalid},
		{"PurchaseTooLarge", "POST", "/api/sales/s1/purchase", "alice", big, nil, 413, flashsale.ETooLarge},
		{"PurchaseKeyEmpty", "POST", "/api/sales/s1/purchase", "alice", `{}`, []string{"Idempotency-Key", ""}, 400, flashsale.EInvalid},
		{"PurchaseKey129", "POST", "/api/sales/s1/purchase", "alice", `{}`, []string{"Idempotency-Key", strings.Repeat("k", 129)}, 400, flashsale.EInvalid},
		{"PurchaseKeyNonASCII", "POST", "/api/sales/s1/purchase", "alice", `{}`, []string{"Idempotency-Key", "ключ"}, 400, flashsale.EInvalid},
		{"PurchaseKeyTwice", "POST", "/api/sales/s1/purchase", "alice", `{}`, []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, 400, flashsale.EInvalid},
		{"PurchaseNoAuth", "POST", "/api/sales/s1/purchase", "", `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseLongID", "POST", "/api/sales/" + strings.Repeat("x", 200) + "/purchase", "alice", `{}`, nil, 404, flashsale.ENotFound},
		{"CreateSaleEmpty", "POST", "/api/admin/sales", "admin", ``, nil, 400, flashsale.EInvalid},
		{"CreateSaleInvalid", "POST", "/api/admin/sales", "admin", `{"title":"x"}`, nil, 400, flashsale.EInvalid},
		{"CreateSaleUser", "POST", "/api/admin/sales", "alice", `{}`, nil, 403, flashsale.EForbidden},
		{"CreateSaleTooLarge", "POST", "/api/admin/sales", "admin", big, nil, 413, flashsale.ETooLarge},
		{"PaidEmptyRef", "POST", "/api/orders/o1/paid", "admin", `{"payment_ref":""}`, nil, 400, flashsale.EInvalid},
		{"PaidLongRef", "POST", "/api/orders/o1/paid", "admin", `{"payment_ref":"` + strings.Repeat("p", 129) + `"}`, nil, 400, flashsale.EInvalid},
		{"PaidControlChar", "POST", "/api/orders/o1/paid", "admin", `{"payment_ref":"a\u0000b"}`, nil, 400, flashsale.EInvalid},
		{"PaidUser", "POST", "/api/orders/o1/paid", "alice", `{"payment_ref":"p"}`, nil, 403, flashsale.EForbidden},
		{"PaidNoAuth", "POST", "/api/orders/o1/paid", "", `{"payment_ref":"p"}`, nil, 401, flashsale.EUnauthenticated},
		{"TokenNoAuth", "POST", "/api/sales/s1/token", "", ``, nil, 401, flashsale.EUnauthenticated},
		{"CancelNoAuth", "POST", "/api/orders/o1/cancel", "", ``, nil, 401, flashsale.EUnauthenticated},
		{"PreheatUser", "POST", "/api/admin/sales/s1/preheat", "alice", ``, nil, 403, flashsale.EForbidden},
		{"AuditUser", "GET", "/api/admin/sales/s1/audit", "alice", ``, nil, 403, flashsale.EForbidden},
		{"AuditNoAuth", "GET", "/api/admin/sales/s1/audit", "", ``, nil, 401, flashsale.EUnauthenticated},
		{"AuditLongID", "GET", "/api/admin/sales/" + strings.Repeat("x", 200) + "/audit", "admin", ``, nil, 404, flashsale.ENotFound},
		{"AuditWrongMethod", "DELETE", "/api/admin/sales/s1/audit", "admin", ``, nil, 405, EMethodNotAllowed},
		{"RepairUser", "POST", "/api/admin/sales/s1/audit/repair", "alice", ``, nil, 403, flashsale.EForbidden},
		{"RepairNoAuth", "POST", "/api/admin/sales/s1/audit/repair", "", ``, nil, 401, flashsale.EUnauthenticated},
		{"RepairLongID", "POST", "/api/admin/sales/" + strings.Repeat("x", 200) + "/audit/repair", "admin", ``, nil, 404, flashsale.ENotFound},
		{"RepairGET", "GET", "/api/admin/sales/s1/audit/repair", "admin", ``, nil, 405, EMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &stubService{}
			w := do(t, newStubServer(svc), tt.method, tt.path, tt.auth, tt.body, tt.header...)
			wantError(t, w, tt.status, tt.code)
			if n := svc.calls(); n != 0 {
				t.Fatalf("service called %d times", n)
			}
		})
	}
}

func TestPaidPassesRef(t *testing.T) {
	svc := &stubService{}
	w := do(t, newStubServer(svc), "POST", "/api/orders/o1/paid", "admin", `{"payment_ref":"支付-1"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d: %s", w.Code, w.Body)
	}
	if svc.paidRef != "支付-1" {
		t.Fatalf("payment_ref = %q", svc.paidRef)
	}
	var o orderJSON
	json.Unmarshal(w.Body.Bytes(), &o)
	if o.Status != flashsale.OrderPaid || o.PaymentRef != "支付-1" {
		t.Fatalf("order = %+v", o)
	}
}

// TestErrorMapping runs every code through the real handler path.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		err        error
		status     int
		code       string
		retryAfter bool
	}{
		{flashsale.ErrInvalid, 400, flashsale.EInvalid, false},
		{flashsale.Errorf(flashsale.EUnauthenticated, "x"), 401, flashsale.EUnauthenticated, false},
		{flashsale.Errorf(flashsale.EForbidden, "x"), 403, flashsale.EForbidden, false},
		{flashsale.ErrNotEligible, 403, flashsale.ENotEligible, false},
		{flashsale.ErrTokenInvalid, 403, flashsale.ETokenInvalid, false},
		{flashsale.ErrNotFound, 404, flashsale.ENotFound, false},
		{flashsale.ErrSoldOut, 409, flashsale.ESoldOut, false},
		{flashsale.ErrLimitExceeded, 409, flashsale.ELimitExceeded, false},
		{flashsale.ErrNotStarted, 409, flashsale.ENotStarted, false},
		{flashsale.ErrEnded, 409, flashsale.EEnded, false},
		{flashsale.ErrHoldExpired, 409, flashsale.EHoldExpired, false},
		{flashsale.ErrAlreadyStarted, 409, flashsale.EAlreadyStarted, false},
		{flashsale.ErrStale, 409, flashsale.EConflict, false},
		{flashsale.ErrOrderPending, 409, flashsale.EOrderPending, true},
		{flashsale.ErrKeyReused, 422, flashsale.EKeyReused, false},
		{flashsale.Errorf(flashsale.ETooLarge, "x"), 413, flashsale.ETooLarge, false},
		{flashsale.Errorf(flashsale.ERateLimited, "slow down"), 429, flashsale.ERateLimited, true},
		{flashsale.ErrUnavailable, 503, flashsale.EUnavailable, true},
		{fmt.Errorf("reserve: sale=s1: %w", flashsale.ErrNotLoaded), 503, flashsale.EUnavailable, true},
		{errors.New("disk on fire"), 500, flashsale.EInternal, false},
		{flashsale.Errorf("brand_new_code", "x"), 500, flashsale.EInternal, false},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			var logs bytes.Buffer
			svc := &stubService{err: tt.err}
			s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, Now: func() time.Time { return t0 },
				Logger: newTestLogger(&logs)})
			w := do(t, s, "POST", "/api/sales/s1/purchase", "alice", "")
			wantError(t, w, tt.status, tt.code)
			if got := w.Header().Get("Retry-After") == "1"; got != tt.retryAfter {
				t.Errorf("Retry-After = %q", w.Header().Get("Retry-After"))
			}
			if tt.code == flashsale.EInternal {
				if strings.Contains(w.Body.String(), "fire") {
					t.Errorf("internal cause leaked: %s", w.Body)
				}
				if !strings.Contains(logs.String(), "internal error") {
					t.Errorf("internal error not logged: %q", logs.String())
				}
			} else if want := flashsale.ErrorMessage(tt.err); !strings.Contains(w.Body.String(), want) {
				t.Errorf("body %s lacks message %q", w.Body, want)
			}
		})
	}
}

func TestReadyz(t *testing.T) {
	w := do(t, newStubServer(&stubService{err: errors.New("database gone")}), "GET", "/readyz", "", "")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("not ready: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if got, want := strings.TrimSpace(w.Body.String()), `{"ready":false,"engine":"ok","database":"unavailable"}`; got != want {
		t.Fatalf("not ready body = %s, want %s", got, want)
	}
	w = do(t, newStubServer(&stubService{}), "GET", "/readyz", "", "")
	if got, want := strings.TrimSpace(w.Body.String()),
		`{"ready":true,"engine":"ok","database":"ok","breaker":{"state":"closed","forced":"auto","since":"`+t0.Format(time.RFC3339Nano)+`","consecutive_failures":0}}`; w.Code != http.StatusOK || got != want {
		t.Fatalf("ready = %d %s, want 200 %s", w.Code, got, want)
	}
	w = do(t, newStubServer(&stubService{}), "GET", "/healthz", "", "")
	if got, want := strings.TrimSpace(w.Body.String()), `{"status":"ok"}`; got != want {
		t.Fatalf("healthz = %s, want %s", got, want)
	}
}

// TestBreakerEndpoints: an operator reads and pins the breaker; a bad body
// changes nothing; only the admin may.
func TestBreakerEndpoints(t *testing.T) {
	svc := &stubService{}
	s := newStubServer(svc)
	w := do(t, s, "POST", "/api/admin/breaker", "admin", `{"force":"open"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"forced":"open"`) || svc.forced != flashsale.BreakerForceOpen {
		t.Fatalf("force open: %d %s (service got %q)", w.Code, w.Body, svc.forced)
	}
	for _, body := range []string{``, `{}`, `{"force":""}`, `{"force":"half-open"}`, `{"force":"OPEN"}`,
		`{"force":1}`, `{"force":"open","mode":"db"}`, `{"force":"open"}{}`, `[]`} {
		svc.forced = "unchanged"
		wantError(t, do(t, s, "POST", "/api/admin/breaker", "admin", body), http.StatusBadRequest, flashsale.EInvalid)
		if svc.forced != "unchanged" {
			t.Fatalf("%s reached the service: %q", body, svc.forced)
		}
	}
	wantError(t, do(t, s, "POST", "/api/admin/breaker", "alice", `{"force":"open"}`), http.StatusForbidden, flashsale.EForbidden)
	wantError(t, do(t, s, "GET", "/api/admin/breaker", "", ""), http.StatusUnauthorized, flashsale.EUnauthenticated)
}

func TestPanicIsInternal(t *testing.T) {
	var logs bytes.Buffer
	s := NewServer(flashsale.ServiceOf(panicService{}), Config{JWTSecret: testSecret, Logger: newTestLogger(&logs)})
	wantError(t, do(t, s, "GET", "/api/sales", "", ""), http.StatusInternalServerError, flashsale.EInternal)
	if !strings.Contains(logs.String(), "boom") {
		t.Errorf("panic not logged: %q", logs.String())
	}
}

type panicService struct{ flashsale.Service }

func (panicService) Sales(context.Context) ([]*flashsale.SaleView, error) { panic("boom") }

// TestOpenAPIInSync checks the contract against the code: every route in
// the table is documented with its method and vice versa, and the error
// code table and enum list exactly the codes of the status map, with the
// same statuses.
func TestOpenAPIInSync(t *testing.T) {
	s := NewServer(flashsale.ServiceOf(&stubService{}), Config{Demo: true})
	var routes []string
	for _, rt := range s.routes() {
		routes = append(routes, rt.pattern)
	}
	slices.Sort(routes)

	var (
		documented []string
		path       string
		inPaths    bool
		inEnum     bool
		enum       []string
		table      = map[string]int{}
		pathRE     = regexp.MustCompile(`^  (/\S*):$`)
		methodRE   = regexp.MustCompile(`^    (get|post|put|patch|delete):$`)
		rowRE      = regexp.MustCompile(`^\s*\|\s*([a-z_]+)\s*\|\s*(\d{3})\s*\|$`)
		enumItemRE = regexp.MustCompile(`^        - ([a-z_]+)$`)
	)
	sc := bufio.NewScanner(bytes.NewReader(api.OpenAPI))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "paths:":
			inPaths = true
			continue
		case line == "components:":
			inPaths = false
		case line == "    ErrorCode:":
			inEnum = true
			continue
		}
		if m := rowRE.FindStringSubmatch(line); m != nil {
			var st int
			fmt.Sscan(m[2], &st)
			table[m[1]] = st
		}
		if inEnum {
			if m := enumItemRE.FindStringSubmatch(line); m != nil {
				enum = append(enum, m[1])
			} else if strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") {
				inEnum = false
			}
		}
		if !inPaths {
			continue
		}
		if m := pathRE.FindStringSubmatch(line); m != nil {
			path = m[1]
		} else if m := methodRE.FindStringSubmatch(line); m != nil {
			documented = append(documented, strings.ToUpper(m[1])+" "+path)
		}
	}
	slices.Sort(documented)
	if diff := cmp.Diff(routes, documented); diff != "" {
		t.Errorf("routes (-code +openapi.yaml):\n%s", diff)
	}
	if diff := cmp.Diff(statuses, table); diff != "" {
		t.Errorf("error status table (-code +openapi.yaml):\n%s", diff)
	}
	slices.Sort(enum)
	codes := slices.Sorted(func(yield func(string) bool) {
		for c := range statuses {
			if !yield(c) {
				return
			}
		}
	})
	if diff := cmp.Diff(codes, enum); diff != "" {
		t.Errorf("ErrorCode enum (-code +openapi.yaml):\n%s", diff)
	}
}

// TestOrderJSON checks the order's wire form against the Order schema of
// openapi.yaml, field for field, and that the optional fields appear only
// when set: payment_ref once paid, failure_reason when an order failed
// with a reason.
func TestOrderJSON(t *testing.T) {
	var documented []string
	inOrder, inProps := false, false
	sc := bufio.NewScanner(bytes.NewReader(api.OpenAPI))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "    Order:":
			inOrder = true
		case inOrder && line == "      properties:":
			inProps = true
		case inProps && strings.HasPrefix(line, "        ") && !strings.HasPrefix(line, "         "):
			name, _, _ := strings.Cut(strings.TrimSpace(line), ":")
			documented = append(documented, name)
		case inProps && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "        "):
			inOrder, inProps = false, false
		}
	}
	var fields []string
	typ := reflect.TypeFor[orderJSON]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	slices.Sort(documented)
	slices.Sort(fields)
	if diff := cmp.Diff(fields, documented); diff != "" {
		t.Errorf("order fields (-orderJSON +openapi.yaml Order):\n%s", diff)
	}

	held := (&stubService{}).order(flashsale.User{ID: "alice"}, "o1")
	failed := *held
	failed.Status, failed.FailureReason = flashsale.OrderFailed, flashsale.ESoldOut
	paid := *held
	paid.Status, paid.PaymentRef = flashsale.OrderPaid, "pay-1"
	for _, tc := range []struct {
		name  string
		o     *flashsale.Order
		extra map[string]any
	}{
		{"Held", held, nil},
		{"Failed", &failed, map[string]any{"failure_reason": "sold_out"}},
		{"Paid", &paid, map[string]any{"payment_ref": "pay-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(orderView(tc.o))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"payment_ref", "failure_reason"} {
				if got[k] != tc.extra[k] { // nil for absent
					t.Errorf("%s = %v, want %v", k, got[k], tc.extra[k])
				}
			}
		})
	}
}

// TestAuditJSON checks the audit's wire form against the Audit schema of
// openapi.yaml, and that the engine's figures appear only when the engine
// was compared.
func TestAuditJSON(t *testing.T) {
	props := func(schema, indent string) []string {
		var names []string
		in, inProps := false, false
		sc := bufio.NewScanner(bytes.NewReader(api.OpenAPI))
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "    "+schema+":":
				in = true
			case in && line == indent[:len(indent)-2]+"properties:":
				inProps = true
			case inProps && strings.HasPrefix(line, indent) && !strings.HasPrefix(line, indent+" "):
				name, _, _ := strings.Cut(strings.TrimSpace(line), ":")
				names = append(names, name)
			case inProps && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, indent):
				in, inProps = false, false
			}
		}
		slices.Sort(names)
		return names
	}
	fields := func(typ reflect.Type) []string {
		var names []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			names = append(names, name)
		}
		slices.Sort(names)
		return names
	}
	if diff := cmp.Diff(fields(reflect.TypeFor[auditJSON]()), props("Audit", "        ")); diff != "" {
		t.Errorf("audit fields (-auditJSON +openapi.yaml Audit):\n%s", diff)
	}
	if diff := cmp.Diff(fields(reflect.TypeFor[auditFindingJSON]()), props("AuditFinding", "        ")); diff != "" {
		t.Errorf("finding fields (-auditFindingJSON +openapi.yaml AuditFinding):\n%s", diff)
	}

	w := do(t, newStubServer(&stubService{}), "POST", "/api/admin/sales/s1/audit/repair", "admin", "")
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"sale_id": "s1", "at": "2026-12-01T20:00:00Z", "balanced": true, "engine_compared": true,
		"nights": []any{map[string]any{"date": testenv.Night(0), "stock": 5.0, "held": 1.0, "sold": 0.0,
			"engine_available": 4.0, "in_flight": 0.0, "drift": 0.0}},
		"findings": []any{},
		"repairs": []any{map[string]any{"action": "republish", "order_id": "o1", "ok": true},
			map[string]any{"action": "rebuild", "ok": false, "error": "rebuild: busy"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("repair answer (-want +got):\n%s", diff)
	}

	dbOnly := *stubAudit
	dbOnly.Engine = false
	b, err := json.Marshal(auditView(&dbOnly))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("engine_available")) || bytes.Contains(b, []byte(`"drift"`)) || bytes.Contains(b, []byte("repairs")) {
		t.Errorf("database-only audit shows engine figures or repairs: %s", b)
	}
	for _, kind := range []flashsale.FindingKind{flashsale.FindingEngineNotLoaded, flashsale.FindingDBOversold,
		flashsale.FindingDBCountersDrift, flashsale.FindingEngineNegative, flashsale.FindingUnitsDrift,
		flashsale.FindingEngineActiveDBFinal, flashsale.FindingDBActiveEngineInactive, flashsale.FindingStranded,
		flashsale.FindingUserOverLimit, flashsale.FindingDuplicateKey} {
		if !bytes.Contains(api.OpenAPI, []byte(string(kind)+",")) && !bytes.Contains(api.OpenAPI, []byte(string(kind)+"]")) {
			t.Errorf("finding kind %s is not in the AuditFinding enum", kind)
		}
	}
}

func newTestLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// BenchmarkHandlerPurchaseSoldOut measures this layer alone (routing, auth,
// decoding, the error answer) on the hot path, without a network or service.
func BenchmarkHandlerPurchaseSoldOut(b *testing.B) {
	benchmarkSoldOut(b, newStubServer(&stubService{soldOut: true}))
}

// BenchmarkHandlerPurchaseRefused is a purchase the service refuses sold
// out after the whole path: the guest authenticated, the body decoded (a
// stay whose nights are sold out on a sale with rooms on others).
func BenchmarkHandlerPurchaseRefused(b *testing.B) {
	benchmarkSoldOut(b, newStubServer(&stubService{err: flashsale.ErrSoldOut}))
}

// TestPurchaseSoldOutFirst: a sale the service knows is sold out is
// answered 409 sold_out before anything of the request is looked at (no
// token, a bad body: the answer is the same, and Purchase is not called),
// except a purchase with an Idempotency-Key, whose retry must reach the
// service and find the order it already has.
func TestPurchaseSoldOutFirst(t *testing.T) {
	svc := &stubService{soldOut: true}
	var timed atomic.Int64
	s := NewServer(flashsale.ServiceOf(svc), Config{JWTSecret: testSecret, AdminToken: testAdmin, Now: func() time.Time { return t0 },
		Route: func(pattern string) func(time.Duration) {
			if pattern != purchaseRoute {
				return nil
			}
			return func(time.Duration) { timed.Add(1) }
		}})
	tok := sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	for _, tc := range []struct {
		name, auth, body, requestID string
	}{
		{"a guest", "Bearer " + tok, `{"rooms":1}`, ""},
		{"no token", "", `{"rooms":1}`, ""},
		{"a forged token", "Bearer x.y.z", ``, ""},
		{"a bad body", "Bearer " + tok, `{"ROOMS":5}`, ""},
		{"the client's request id", "Bearer " + tok, `{}`, "lb-7f3a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/sales/s1/purchase", strings.NewReader(tc.body))
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			if tc.requestID != "" {
				r.Header.Set("X-Request-ID", tc.requestID)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `"sold_out"`) {
				t.Fatalf("%d %s, want 409 sold_out", w.Code, w.Body)
			}
			id := w.Header().Get("X-Request-Id")
			if tc.requestID != "" && id != tc.requestID || tc.requestID == "" && len(id) != 16 {
				t.Fatalf("X-Request-Id %q, want the client's %q or a new one", id, tc.requestID)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
	if svc.calls() != 0 || svc.refused != 5 || timed.Load() != 5 {
		t.Fatalf("Purchase called %d times, RefuseSoldOut refused %d, %d timed; want 0, 5 and 5", svc.calls(), svc.refused, timed.Load())
	}

	r := httptest.NewRequest("POST", "/api/sales/s1/purchase", strings.NewReader(`{"rooms":1}`))
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Idempotency-Key", "alice-1")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusAccepted || svc.calls() != 1 || svc.refused != 5 {
		t.Fatalf("a keyed retry: %d %s, Purchase called %d times, refused %d; want 202 from Purchase", w.Code, w.Body, svc.calls(), svc.refused)
	}
}
