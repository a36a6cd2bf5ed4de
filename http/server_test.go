package http_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	fshttp "github.com/flashsale/flashsale/http"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

const (
	jwtSecret  = "e2e-jwt-secret"
	adminToken = "e2e-admin-token"
)

// Server is the real API over the real embedded service: SQLite in a
// temporary directory, the in-process stock engine, the group-commit
// writer.
type Server struct {
	*httptest.Server
	Store  *sqlite.Store
	Engine *inmem.Engine
	Svc    *funnel.Service
}

// MustOpenServer starts a Server on 127.0.0.1:0 and closes everything at
// cleanup; mods adjust the service's configuration.
func MustOpenServer(tb testing.TB, mods ...func(*funnel.Config)) *Server {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "flashsale.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		store.Close()
		tb.Fatal(err)
	}
	engine := inmem.NewEngine()
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	cfg := funnel.Config{
		Store: store.Roles(), Engine: engine.Roles(), Writer: writer,
		Secret: []byte("e2e-token-secret"), Now: time.Now,
		// No hold expires during a test; the reaper must not change counters
		// between the before and after snapshots.
		ReapInterval: time.Hour,
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	svc := funnel.New(cfg)
	if err := svc.Start(ctx); err != nil {
		writer.Close()
		store.Close()
		tb.Fatal(err)
	}
	h := fshttp.NewServer(svc.Roles(), fshttp.Config{
		JWTSecret: []byte(jwtSecret), AdminToken: adminToken, Demo: true,
	})
	s := &Server{Server: httptest.NewServer(h.Handler()), Store: store, Engine: engine, Svc: svc}
	tb.Cleanup(func() {
		s.Server.Close()
		svc.Close()
		writer.Close()
		store.Close()
	})
	return s
}

// userJWT returns a valid user token for id.
func userJWT(tb testing.TB, id string, tier flashsale.Tier) string {
	tb.Helper()
	return signJWT(tb, jwt.SigningMethodHS256, []byte(jwtSecret),
		jwt.MapClaims{"sub": id, "tier": string(tier), "exp": time.Now().Add(time.Hour).Unix()})
}

func signJWT(tb testing.TB, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	tb.Helper()
	tok, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// response is a decoded answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) code() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(r.Body, &e)
	return e.Error.Code
}

// Do sends one request. auth is a bearer token ("" for none).
func (s *Server) Do(tb testing.TB, method, path, auth string, body io.Reader, header ...string) response {
	tb.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// MustDo sends a request that must answer want, and decodes the body into v.
func (s *Server) MustDo(tb testing.TB, want int, method, path, auth, body string, v any, header ...string) {
	tb.Helper()
	r := s.Do(tb, method, path, auth, strings.NewReader(body), header...)
	if r.Status != want {
		tb.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	if v != nil {
		if err := json.Unmarshal(r.Body, v); err != nil {
			tb.Fatalf("%s %s: %v: %s", method, path, err, r.Body)
		}
	}
}

type saleResp struct {
	ID     string                 `json:"id"`
	Status string                 `json:"status"`
	Nights []flashsale.NightStock `json:"nights"`
}

type orderResp struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	UserID  string `json:"user_id"`
	Rooms   int    `json:"rooms"`
	Nights  int    `json:"nights"`
	CheckIn string `json:"check_in"`
	Amount  int64  `json:"amount"`
}

// CreateSale creates a sale through the admin API: a night per stock
// (testenv.Night(i) with stock[i]), started a minute ago unless extra sets
// starts_at. extra is spliced into the JSON body.
func (s *Server) CreateSale(tb testing.TB, extra string, stock ...int) string {
	tb.Helper()
	var nights []string
	for i, n := range stock {
		nights = append(nights, fmt.Sprintf(`{"date":%q,"stock":%d}`, testenv.Night(i), n))
	}
	body := fmt.Sprintf(`{"title":"Flash","hotel":"Harbour View","room_type":"Deluxe King","nights":[%s],
		"price":39900,"original_price":69900,"currency":"CNY",%s
		"ends_at":%q}`, strings.Join(nights, ","), extra, time.Now().Add(2*time.Hour).Format(time.RFC3339))
	if !strings.Contains(extra, "starts_at") {
		body = strings.Replace(body, `"ends_at"`, fmt.Sprintf(`"starts_at":%q,"ends_at"`, time.Now().Add(-time.Minute).Format(time.RFC3339)), 1)
	}
	var sale saleResp
	s.MustDo(tb, http.StatusCreated, "POST", "/api/admin/sales", adminToken, body, &sale)
	return sale.ID
}

// state is everything a rejected request must leave alone: the sale's
// counters (database and engine) and every order that names a user.
type state struct {
	Nights []flashsale.NightStock
	Orders []flashsale.Reservation
	Sales  int
}

func (s *Server) State(tb testing.TB, saleID string) state {
	tb.Helper()
	var sale saleResp
	s.MustDo(tb, http.StatusOK, "GET", "/api/admin/sales/"+saleID, adminToken, "", &sale)
	snap, err := s.Store.Snapshot(context.Background(), saleID)
	if err != nil {
		tb.Fatal(err)
	}
	sales, err := s.Store.Sales(context.Background(), time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return state{Nights: sale.Nights, Orders: snap.Reservations, Sales: len(sales)}
}

func TestServer_PurchaseFlow(t *testing.T) {
	s := MustOpenServer(t)
	saleID := s.CreateSale(t, `"per_user_limit":2,`, 5, 3)
	alice := userJWT(t, "alice", flashsale.TierGold)

	var pub map[string]any
	r := s.Do(t, "GET", "/api/sales/"+saleID, "", nil)
	if r.Status != http.StatusOK || r.Header.Get("Cache-Control") != "public, max-age=1" {
		t.Fatalf("public sale: %d %q %s", r.Status, r.Header.Get("Cache-Control"), r.Body)
	}
	json.Unmarshal(r.Body, &pub)
	if pub["status"] != "active" || pub["id"] != saleID {
		t.Fatalf("public sale = %v", pub)
	}
	var list struct{ Sales []saleResp }
	s.MustDo(t, http.StatusOK, "GET", "/api/sales", "", "", &list)
	if len(list.Sales) != 1 || list.Sales[0].ID != saleID {
		t.Fatalf("sales = %+v", list)
	}

	var tok flashsale.PurchaseToken
	s.MustDo(t, http.StatusCreated, "POST", "/api/sales/"+saleID+"/token", alice, "", &tok)

	var accepted orderResp
	body := fmt.Sprintf(`{"token":%q,"check_in":%q,"nights":2,"rooms":1}`, tok.Token, testenv.Night(0))
	s.MustDo(t, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", alice, body, &accepted, "Idempotency-Key", "k1")
	if accepted.Status != "held" || accepted.Amount != 2*39900 {
		t.Fatalf("accepted = %+v", accepted)
	}

	// The same key returns the same order, even though the token is spent.
	var again orderResp
	s.MustDo(t, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", alice, body, &again, "Idempotency-Key", "k1")
	if again.OrderID != accepted.OrderID {
		t.Fatalf("replay answered order %s, want %s", again.OrderID, accepted.OrderID)
	}
	// Without the key the spent token is refused.
	if r := s.Do(t, "POST", "/api/sales/"+saleID+"/purchase", alice, strings.NewReader(body)); r.Status != 403 || r.code() != flashsale.ETokenInvalid {
		t.Fatalf("spent token: %d %s", r.Status, r.Body)
	}

	var o orderResp
	s.MustDo(t, http.StatusOK, "GET", "/api/orders/"+accepted.OrderID, alice, "", &o)
	if diff := cmp.Diff(orderResp{OrderID: accepted.OrderID, Status: "held", UserID: "alice", Rooms: 1, Nights: 2,
		CheckIn: testenv.Night(0), Amount: 2 * 39900}, o); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	// Someone else's order does not exist for bob.
	if r := s.Do(t, "GET", "/api/orders/"+accepted.OrderID, userJWT(t, "bob", ""), nil); r.Status != 404 || r.code() != flashsale.ENotFound {
		t.Fatalf("bob reads alice's order: %d %s", r.Status, r.Body)
	}

	s.MustDo(t, http.StatusOK, "POST", "/api/orders/"+accepted.OrderID+"/paid", adminToken, `{"payment_ref":"pay-1"}`, &o)
	if o.Status != "paid" {
		t.Fatalf("after paid: %+v", o)
	}
	st := s.State(t, saleID)
	want := []flashsale.NightStock{
		{Date: testenv.Night(0), Stock: 5, Available: 4, Sold: 1},
		{Date: testenv.Night(1), Stock: 3, Available: 2, Sold: 1},
	}
	if diff := cmp.Diff(want, st.Nights); diff != "" {
		t.Fatalf("nights (-want +got):\n%s", diff)
	}

	t.Run("Cancel", func(t *testing.T) {
		var tok flashsale.PurchaseToken
		s.MustDo(t, http.StatusCreated, "POST", "/api/sales/"+saleID+"/token", alice, "", &tok)
		var a orderResp
		s.MustDo(t, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", alice, fmt.Sprintf(`{"token":%q}`, tok.Token), &a)
		var c orderResp
		s.MustDo(t, http.StatusOK, "POST", "/api/orders/"+a.OrderID+"/cancel", alice, "", &c)
		if c.Status != "cancelled" {
			t.Fatalf("cancelled order = %+v", c)
		}
		if diff := cmp.Diff(want, s.State(t, saleID).Nights); diff != "" {
			t.Fatalf("cancel did not give the room back (-want +got):\n%s", diff)
		}
	})
}

// TestServer_BadInput sends every endpoint that reads untrusted input a
// table of bad requests and checks each is answered with the right status
// and code and changes nothing (I7).
func TestServer_BadInput(t *testing.T) {
	s := MustOpenServer(t)
	saleID := s.CreateSale(t, `"purchase_token":false,`, 5, 3)
	tokenSale := s.CreateSale(t, ``, 5)
	upcoming := s.CreateSale(t, fmt.Sprintf(`"purchase_token":false,"starts_at":%q,`, time.Now().Add(time.Hour).Format(time.RFC3339)), 5)
	alice := userJWT(t, "alice", flashsale.TierGold)
	bob := userJWT(t, "bob", flashsale.TierGold)

	// alice holds one room so order endpoints have something to refuse.
	var held orderResp
	s.MustDo(t, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", alice, `{}`, &held)

	now := time.Now()
	expired := signJWT(t, jwt.SigningMethodHS256, []byte(jwtSecret), jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Minute).Unix()})
	noExp := signJWT(t, jwt.SigningMethodHS256, []byte(jwtSecret), jwt.MapClaims{"sub": "alice"})
	forged := signJWT(t, jwt.SigningMethodHS256, []byte("not-the-secret"), jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix()})
	hs512 := signJWT(t, jwt.SigningMethodHS512, []byte(jwtSecret), jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix()})
	algNone := signJWT(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix()})
	tampered := func() string {
		p := strings.Split(alice, ".")
		c, _ := json.Marshal(jwt.MapClaims{"sub": "bob", "exp": now.Add(time.Hour).Unix()})
		p[1] = base64.RawURLEncoding.EncodeToString(c)
		return strings.Join(p, ".")
	}()
	big := `{"token":"` + strings.Repeat("a", fshttp.MaxBodyBytes) + `"}`
	validSale := fmt.Sprintf(`{"title":"T","hotel":"H","room_type":"R","nights":[{"date":%q,"stock":1}],
		"currency":"CNY","starts_at":%q,"ends_at":%q}`, testenv.Night(0), now.Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	purchase := "/api/sales/" + saleID + "/purchase"

	tests := []struct {
		name, method, path, auth, body string
		header                         []string
		status                         int
		code                           string
	}{
		// Purchase.
		{"PurchaseMalformed", "POST", purchase, alice, `{"rooms":1`, nil, 400, flashsale.EInvalid},
		{"PurchaseNotObject", "POST", purchase, alice, `[1]`, nil, 400, flashsale.EInvalid},
		{"PurchaseUnknownField", "POST", purchase, alice, `{"rooms":1,"price":1}`, nil, 400, flashsale.EInvalid},
		{"PurchaseWrongType", "POST", purchase, alice, `{"rooms":"one"}`, nil, 400, flashsale.EInvalid},
		{"PurchaseTrailing", "POST", purchase, alice, `{"rooms":1} {"rooms":1}`, nil, 400, flashsale.EInvalid},
		{"PurchaseRooms0", "POST", purchase, alice, `{"rooms":0}`, nil, 400, flashsale.EInvalid},
		{"PurchaseRoomsNegative", "POST", purchase, alice, `{"rooms":-1}`, nil, 400, flashsale.EInvalid},
		{"PurchaseNights0", "POST", purchase, alice, `{"nights":0}`, nil, 400, flashsale.EInvalid},
		{"PurchaseNightsOutsideSale", "POST", purchase, alice, `{"check_in":"` + testenv.Night(0) + `","nights":3}`, nil, 400, flashsale.EInvalid},
		{"PurchaseStayPastLastNight", "POST", purchase, alice, `{"check_in":"` + testenv.Night(1) + `","nights":2}`, nil, 400, flashsale.EInvalid},
		{"PurchaseCheckInNotSaleNight", "POST", purchase, alice, `{"check_in":"` + testenv.Night(2) + `"}`, nil, 400, flashsale.EInvalid},
		{"PurchaseCheckInNotDate", "POST", purchase, alice, `{"check_in":"tomorrow"}`, nil, 400, flashsale.EInvalid},
		{"PurchaseTooLarge", "POST", purchase, alice, big, nil, 413, flashsale.ETooLarge},
		{"PurchaseBadIdempotencyKey", "POST", purchase, alice, `{}`, []string{"Idempotency-Key", strings.Repeat("k", 129)}, 400, flashsale.EInvalid},
		{"PurchaseUnknownSale", "POST", "/api/sales/01JUNKNOWNSALE0000000000000/purchase", alice, `{}`, nil, 404, flashsale.ENotFound},
		{"PurchaseNoAuth", "POST", purchase, "", `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseForgedJWT", "POST", purchase, forged, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseTamperedJWT", "POST", purchase, tampered, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseExpiredJWT", "POST", purchase, expired, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseNoExpJWT", "POST", purchase, noExp, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseAlgNoneJWT", "POST", purchase, algNone, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseHS512JWT", "POST", purchase, hs512, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseAdminToken", "POST", purchase, adminToken, `{}`, nil, 401, flashsale.EUnauthenticated},
		{"PurchaseLimitExceeded", "POST", purchase, alice, `{}`, nil, 409, flashsale.ELimitExceeded},
		{"PurchaseNotStarted", "POST", "/api/sales/" + upcoming + "/purchase", alice, `{}`, nil, 409, flashsale.ENotStarted},
		{"PurchaseNoToken", "POST", "/api/sales/" + tokenSale + "/purchase", alice, `{}`, nil, 403, flashsale.ETokenInvalid},
		{"PurchaseForgedToken", "POST", "/api/sales/" + tokenSale + "/purchase", alice, `{"token":"AAAA.BBBB"}`, nil, 403, flashsale.ETokenInvalid},
		// Sale creation.
		{"CreateSaleMalformed", "POST", "/api/admin/sales", adminToken, `{"title":`, nil, 400, flashsale.EInvalid},
		{"CreateSaleUnknownField", "POST", "/api/admin/sales", adminToken, strings.Replace(validSale, `"title"`, `"id":"mine","title"`, 1), nil, 400, flashsale.EInvalid},
		{"CreateSaleWrongType", "POST", "/api/admin/sales", adminToken, strings.Replace(validSale, `"stock":1`, `"stock":"1"`, 1), nil, 400, flashsale.EInvalid},
		{"CreateSaleInvalid", "POST", "/api/admin/sales", adminToken, strings.Replace(validSale, `"CNY"`, `"cny"`, 1), nil, 400, flashsale.EInvalid},
		{"CreateSaleLimit0", "POST", "/api/admin/sales", adminToken, strings.Replace(validSale, `"title"`, `"per_user_limit":0,"title"`, 1), nil, 400, flashsale.EInvalid},
		{"CreateSaleTooLarge", "POST", "/api/admin/sales", adminToken, big, nil, 413, flashsale.ETooLarge},
		{"CreateSaleUserJWT", "POST", "/api/admin/sales", alice, validSale, nil, 403, flashsale.EForbidden},
		{"CreateSaleNoAuth", "POST", "/api/admin/sales", "", validSale, nil, 401, flashsale.EUnauthenticated},
		{"CreateSaleForgedJWT", "POST", "/api/admin/sales", forged, validSale, nil, 401, flashsale.EUnauthenticated},
		// Admin sale and preheat.
		{"AdminSaleUserJWT", "GET", "/api/admin/sales/" + saleID, alice, "", nil, 403, flashsale.EForbidden},
		{"AdminSaleUnknown", "GET", "/api/admin/sales/nope", adminToken, "", nil, 404, flashsale.ENotFound},
		{"PreheatUserJWT", "POST", "/api/admin/sales/" + saleID + "/preheat", alice, "", nil, 403, flashsale.EForbidden},
		{"PreheatUnknown", "POST", "/api/admin/sales/nope/preheat", adminToken, "", nil, 404, flashsale.ENotFound},
		{"PreheatStarted", "POST", "/api/admin/sales/" + saleID + "/preheat", adminToken, "", nil, 409, flashsale.EAlreadyStarted},
		// Audit and repair.
		{"AuditUserJWT", "GET", "/api/admin/sales/" + saleID + "/audit", alice, "", nil, 403, flashsale.EForbidden},
		{"AuditUnknown", "GET", "/api/admin/sales/01JUNKNOWNSALE0000000000000/audit", adminToken, "", nil, 404, flashsale.ENotFound},
		{"AuditBadID", "GET", "/api/admin/sales/no%20such/audit", adminToken, "", nil, 404, flashsale.ENotFound},
		{"RepairUserJWT", "POST", "/api/admin/sales/" + saleID + "/audit/repair", alice, "", nil, 403, flashsale.EForbidden},
		{"RepairForgedJWT", "POST", "/api/admin/sales/" + saleID + "/audit/repair", forged, "", nil, 401, flashsale.EUnauthenticated},
		{"RepairUnknown", "POST", "/api/admin/sales/nope/audit/repair", adminToken, "", nil, 404, flashsale.ENotFound},
		// Public views and tokens.
		{"PublicSaleUnknown", "GET", "/api/sales/nope", "", "", nil, 404, flashsale.ENotFound},
		{"PublicSaleLongID", "GET", "/api/sales/" + strings.Repeat("x", 300), "", "", nil, 404, flashsale.ENotFound},
		{"TokenUnknownSale", "POST", "/api/sales/nope/token", alice, "", nil, 404, flashsale.ENotFound},
		{"TokenNotStarted", "POST", "/api/sales/" + upcoming + "/token", alice, "", nil, 409, flashsale.ENotStarted},
		{"TokenForgedJWT", "POST", "/api/sales/" + saleID + "/token", forged, "", nil, 401, flashsale.EUnauthenticated},
		// Orders.
		{"OrderOtherUser", "GET", "/api/orders/" + held.OrderID, bob, "", nil, 404, flashsale.ENotFound},
		{"OrderUnknown", "GET", "/api/orders/nope", alice, "", nil, 404, flashsale.ENotFound},
		{"OrderExpiredJWT", "GET", "/api/orders/" + held.OrderID, expired, "", nil, 401, flashsale.EUnauthenticated},
		{"CancelOtherUser", "POST", "/api/orders/" + held.OrderID + "/cancel", bob, "", nil, 404, flashsale.ENotFound},
		{"CancelUnknown", "POST", "/api/orders/nope/cancel", alice, "", nil, 404, flashsale.ENotFound},
		{"CancelAlgNone", "POST", "/api/orders/" + held.OrderID + "/cancel", algNone, "", nil, 401, flashsale.EUnauthenticated},
		{"PaidUserJWT", "POST", "/api/orders/" + held.OrderID + "/paid", alice, `{"payment_ref":"p"}`, nil, 403, flashsale.EForbidden},
		{"PaidNoAuth", "POST", "/api/orders/" + held.OrderID + "/paid", "", `{"payment_ref":"p"}`, nil, 401, flashsale.EUnauthenticated},
		{"PaidMalformed", "POST", "/api/orders/" + held.OrderID + "/paid", adminToken, `{"payment_ref":"p"`, nil, 400, flashsale.EInvalid},
		{"PaidUnknownField", "POST", "/api/orders/" + held.OrderID + "/paid", adminToken, `{"payment_ref":"p","status":"paid"}`, nil, 400, flashsale.EInvalid},
		{"PaidWrongType", "POST", "/api/orders/" + held.OrderID + "/paid", adminToken, `{"payment_ref":7}`, nil, 400, flashsale.EInvalid},
		{"PaidEmptyRef", "POST", "/api/orders/" + held.OrderID + "/paid", adminToken, `{"payment_ref":""}`, nil, 400, flashsale.EInvalid},
		{"PaidTooLarge", "POST", "/api/orders/" + held.OrderID + "/paid", adminToken, big, nil, 413, flashsale.ETooLarge},
		{"PaidUnknownOrder", "POST", "/api/orders/nope/paid", adminToken, `{"payment_ref":"p"}`, nil, 404, flashsale.ENotFound},
		// Demo login.
		{"LoginMalformed", "POST", "/api/demo/login", "", `{"user_id":`, nil, 400, flashsale.EInvalid},
		{"LoginBadUser", "POST", "/api/demo/login", "", `{"user_id":"a b"}`, nil, 400, flashsale.EInvalid},
		{"LoginBadTier", "POST", "/api/demo/login", "", `{"user_id":"a","tier":"diamond"}`, nil, 400, flashsale.EInvalid},
		{"LoginTooLarge", "POST", "/api/demo/login", "", big, nil, 413, flashsale.ETooLarge},
		// Routing.
		{"UnknownRoute", "GET", "/api/nope", "", "", nil, 404, flashsale.ENotFound},
		{"WrongMethod", "GET", purchase, alice, "", nil, 405, fshttp.EMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.State(t, saleID)
			beforeToken := s.State(t, tokenSale)
			r := s.Do(t, tt.method, tt.path, tt.auth, strings.NewReader(tt.body), tt.header...)
			if r.Status != tt.status || r.code() != tt.code {
				t.Fatalf("got %d %q, want %d %q: %s", r.Status, r.code(), tt.status, tt.code, r.Body)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content-type %q", ct)
			}
			if diff := cmp.Diff(before, s.State(t, saleID)); diff != "" {
				t.Fatalf("state changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(beforeToken, s.State(t, tokenSale)); diff != "" {
				t.Fatalf("token sale state changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestServer_NoOversell races more buyers than rooms over HTTP (I1).
func TestServer_NoOversell(t *testing.T) {
	s := MustOpenServer(t)
	saleID := s.CreateSale(t, `"purchase_token":false,`, 5, 5)
	const buyers = 40
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[string]int{}
	)
	for i := range buyers {
		wg.Go(func() {
			r := s.Do(t, "POST", "/api/sales/"+saleID+"/purchase", userJWT(t, fmt.Sprintf("u%d", i), ""), strings.NewReader(`{"rooms":1}`))
			key := fmt.Sprint(r.Status)
			if r.Status != http.StatusAccepted {
				key += " " + r.code()
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if diff := cmp.Diff(map[string]int{"202": 5, "409 sold_out": buyers - 5}, counts); diff != "" {
		t.Fatalf("answers (-want +got):\n%s", diff)
	}
	st := s.State(t, saleID)
	if n := st.Nights[0]; n.Held != 5 || n.Available != 0 || n.Held+n.Sold > n.Stock {
		t.Fatalf("night 0 = %+v", n)
	}
	if got := len(st.Orders); got != 5 {
		t.Fatalf("%d orders, want 5", got)
	}
}

// TestServer_Audit: the audit over HTTP balances a healthy sale, names the
// order the engine released behind the database's back, and the repair
// retakes it.
func TestServer_Audit(t *testing.T) {
	s := MustOpenServer(t)
	saleID := s.CreateSale(t, `"purchase_token":false,`, 5, 5)
	var held orderResp
	s.MustDo(t, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", userJWT(t, "alice", ""), `{}`, &held)
	type audit struct {
		Balanced bool `json:"balanced"`
		Nights   []struct {
			Date            string `json:"date"`
			Held            int    `json:"held"`
			EngineAvailable *int   `json:"engine_available"`
			Drift           *int   `json:"drift"`
		} `json:"nights"`
		Findings []struct {
			Kind    string `json:"kind"`
			OrderID string `json:"order_id"`
		} `json:"findings"`
		Repairs []struct {
			Action  string `json:"action"`
			OrderID string `json:"order_id"`
			OK      bool   `json:"ok"`
		} `json:"repairs"`
	}
	var a audit
	s.MustDo(t, http.StatusOK, "GET", "/api/admin/sales/"+saleID+"/audit", adminToken, "", &a)
	if !a.Balanced || len(a.Findings) != 0 || len(a.Nights) != 2 || a.Nights[0].Held != 1 || *a.Nights[0].EngineAvailable != 4 {
		t.Fatalf("healthy audit = %+v", a)
	}

	if err := s.Engine.Release(context.Background(), saleID, held.OrderID); err != nil {
		t.Fatal(err)
	}
	a = audit{}
	s.MustDo(t, http.StatusOK, "GET", "/api/admin/sales/"+saleID+"/audit", adminToken, "", &a)
	if a.Balanced || len(a.Findings) != 2 || a.Findings[0].Kind != "db_active_engine_inactive" || a.Findings[0].OrderID != held.OrderID ||
		a.Findings[1].Kind != "units_drift" || *a.Nights[0].Drift != 1 {
		t.Fatalf("audit after the engine's wrong release = %+v", a)
	}
	a = audit{}
	s.MustDo(t, http.StatusOK, "POST", "/api/admin/sales/"+saleID+"/audit/repair", adminToken, "", &a)
	if !a.Balanced || len(a.Repairs) != 1 || a.Repairs[0].Action != "retake" || a.Repairs[0].OrderID != held.OrderID || !a.Repairs[0].OK {
		t.Fatalf("repair = %+v", a)
	}
}

func TestServer_Readyz(t *testing.T) {
	s := MustOpenServer(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := s.Do(t, "GET", p, "", nil); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"ok"`)) {
			t.Fatalf("%s: %d %s", p, r.Status, r.Body)
		}
	}
}

// BenchmarkPurchaseSoldOut measures the cheapest common answer of a flash
// sale, sold out, over loopback HTTP through the whole stack.
func BenchmarkPurchaseSoldOut(b *testing.B) {
	s := MustOpenServer(b)
	saleID := s.CreateSale(b, `"purchase_token":false,`, 1)
	s.MustDo(b, http.StatusAccepted, "POST", "/api/sales/"+saleID+"/purchase", userJWT(b, "winner", ""), `{}`, nil)

	tok := "Bearer " + userJWT(b, "loser", "")
	url := s.URL + "/api/sales/" + saleID + "/purchase"
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(client.CloseIdleConnections)
	body := []byte(`{"rooms":1}`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Authorization", tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
