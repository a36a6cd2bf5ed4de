package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/bench"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

const (
	testAdminToken = "test-admin-token-0123456789abcdef"
	testJWTSecret  = "test-jwt-secret-0123456789abcdefg"
)

// MustRunMain runs the real program in-process on a free port with a fresh
// data dir, closing it when the test ends.
func MustRunMain(tb testing.TB, mod func(*app.Config)) (*app.Main, *client) {
	tb.Helper()
	cfg, err := app.ParseConfig(nil, nil, func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.DataDir = tb.TempDir()
	cfg.DatabaseURL = "sqlite://" + cfg.DataDir + "/flashsale.db"
	cfg.AdminToken, cfg.JWTSecret = testAdminToken, testJWTSecret
	if mod != nil {
		mod(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := app.NewMain(cfg, logger, io.Discard)
	if err := m.Open(tb.Context()); err != nil {
		m.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Error(err)
		}
	})
	return m, newClient("http://"+m.Addr(), cfg.AdminToken, cfg.JWTSecret)
}

// client is bench's API client with the helpers tests want: bodies and
// answers as Go values, failures through testing.TB. Requests, headers and
// connections are bench.Client's, so the tests and flashsale bench speak
// the API the same way.
type client struct {
	*bench.Client
	admin string // the operator's bearer token, for admin requests sent by hand
}

// A client opens up to testConns connections to its server, enough for a
// storm's guests without one each, and keeps testIdle of them between
// requests, as the tests always have (http.DefaultTransport's cap). With
// all 512 kept, BenchmarkDistributed's ceilings no longer pay for a burst's
// new connections (their CPU per burst fell from about 200 to 130 ms) and
// its burst ratios rose: a change of method, not of flashsale.
const (
	testConns = 512
	testIdle  = 100
)

func newClient(base, admin, secret string) *client {
	c := bench.NewClient(base, admin, secret, testConns)
	c.KeepIdle(testIdle)
	return &client{Client: c, admin: admin}
}

// jwt returns a user token signed like a platform would.
func (c *client) jwt(user string) string { return c.JWT(user) }

// do sends body as JSON (nil: none) with a bearer token and decodes the
// answer, whatever its status, into out.
func (c *client) do(ctx context.Context, method, path, bearer string, body any, header map[string]string, out any) (int, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	var h http.Header
	if len(header) > 0 {
		h = http.Header{}
		for k, v := range header {
			h.Set(k, v)
		}
	}
	r, err := c.Do(ctx, method, path, bearer, b, h)
	if err != nil {
		return r.Status, err
	}
	return r.Status, decodeAnswer(method, path, r, out)
}

// decodeAnswer decodes r's body, if it has one, into out (nil: skip).
func decodeAnswer(method, path string, r bench.Response, out any) error {
	if out == nil || len(r.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		return fmt.Errorf("decode %s %s (%d): %w: %s", method, path, r.Status, err, r.Body)
	}
	return nil
}

type apiError struct {
	Error struct{ Code, Message string } `json:"error"`
}

type orderJSON struct {
	OrderID string `json:"order_id"`
	UserID  string `json:"user_id"`
	Status  string `json:"status"`
	CheckIn string `json:"check_in"`
	Nights  int    `json:"nights"`
	Rooms   int    `json:"rooms"`
	Amount  int64  `json:"amount"`
	apiError
}

type adminSaleJSON struct {
	ID     string       `json:"id"`
	Nights []adminNight `json:"nights"`
}

// adminNight is one night of the operators' view of a sale.
type adminNight struct {
	Date                         string
	Stock, Available, Held, Sold int
}

// createSale posts a sale as the operator and returns its id.
func (c *client) createSale(tb testing.TB, sale map[string]any) string {
	tb.Helper()
	var out struct {
		ID string `json:"id"`
		apiError
	}
	status, err := c.do(context.Background(), "POST", "/api/admin/sales", c.admin, sale, nil, &out)
	if err != nil || status != http.StatusCreated {
		tb.Fatalf("create sale: %d %v %+v", status, err, out.Error)
	}
	return out.ID
}

// adminSale reads the operators' view of a sale, retrying a 503 for up to
// 30 s as an operator's tool would: while the stock engine is rebuilt
// (after a fault) the view cannot say what is available and says so
// (CI: TestFaultRedisStalled read it at that moment).
func (c *client) adminSale(tb testing.TB, id string) adminSaleJSON {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out adminSaleJSON
		status, err := c.do(context.Background(), "GET", "/api/admin/sales/"+id, c.admin, nil, nil, &out)
		if err == nil && status == 200 {
			return out
		}
		if err != nil || status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			tb.Fatalf("admin sale: %d %v", status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// purchase gets a token if needed and buys; it returns the status and answer.
func (c *client) purchase(ctx context.Context, saleID, user string, withToken bool, body map[string]any, key string) (int, orderJSON, error) {
	var from *client
	if withToken {
		from = c
	}
	return buy(ctx, from, c, saleID, user, body, key)
}

// purchaseAcross takes a token from instance a and buys at instance b.
func purchaseAcross(ctx context.Context, a, b *client, saleID, user string) (int, orderJSON, error) {
	return buy(ctx, a, b, saleID, user, nil, "")
}

// buy is user's purchase at instance at with body (nil: {}) under the
// idempotency key (empty: none), with a token taken first from instance
// from (nil: no token). A refused token is the answer.
func buy(ctx context.Context, from, at *client, saleID, user string, body map[string]any, key string) (int, orderJSON, error) {
	if body == nil {
		body = map[string]any{}
	}
	if from != nil {
		tok, r, err := from.Token(ctx, saleID, user, "", "")
		if err != nil || r.Status != http.StatusCreated {
			var o orderJSON
			if err == nil {
				err = decodeAnswer("POST", "/api/sales/"+saleID+"/token", r, &o)
			}
			return r.Status, o, err
		}
		body["token"] = tok
	}
	var h map[string]string
	if key != "" {
		h = map[string]string{"Idempotency-Key": key}
	}
	var o orderJSON
	status, err := at.do(ctx, "POST", "/api/sales/"+saleID+"/purchase", at.jwt(user), body, h, &o)
	return status, o, err
}

func saleJSON(stock []int, limit int, token bool) map[string]any {
	nights := make([]map[string]any, len(stock))
	for i, n := range stock {
		nights[i] = map[string]any{"date": testenv.Night(i), "stock": n}
	}
	return map[string]any{
		"title": "Storm", "hotel": "Harbour View", "room_type": "Deluxe King", "nights": nights,
		"price": 39900, "original_price": 69900, "currency": "CNY",
		"starts_at": time.Now().Add(-time.Second).Format(time.RFC3339), "ends_at": time.Now().Add(time.Hour).Format(time.RFC3339),
		"per_user_limit": limit, "hold_seconds": 300, "purchase_token": token,
	}
}

func TestDemo(t *testing.T) {
	ctx := t.Context()
	_, c := MustRunMain(t, func(c *app.Config) { c.Demo = true })
	var list struct {
		Sales []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"sales"`
	}
	if status, err := c.do(ctx, "GET", "/api/sales", "", nil, nil, &list); err != nil || status != 200 || len(list.Sales) != 1 {
		t.Fatalf("sales: %d %v %+v", status, err, list)
	}
	id := list.Sales[0].ID
	var login struct {
		Token string `json:"token"`
	}
	if status, err := c.do(ctx, "POST", "/api/demo/login", "", map[string]any{"user_id": "alice"}, nil, &login); err != nil || status != 200 || login.Token == "" {
		t.Fatalf("login: %d %v", status, err)
	}
	c.SetJWT("alice", login.Token)
	status, o, err := c.purchase(ctx, id, "alice", true, nil, "")
	if err != nil || status != http.StatusAccepted || o.Status != "held" {
		t.Fatalf("purchase: %d %v %+v", status, err, o)
	}
	var paid orderJSON
	if status, err := c.do(ctx, "POST", "/api/orders/"+o.OrderID+"/paid", c.admin, map[string]any{"payment_ref": "pay_1"}, nil, &paid); err != nil || status != 200 || paid.Status != "paid" {
		t.Fatalf("paid: %d %v %+v", status, err, paid)
	}
	// A user token is no admin token.
	if status, _ := c.do(ctx, "POST", "/api/orders/"+o.OrderID+"/paid", login.Token, map[string]any{"payment_ref": "x"}, nil, nil); status != 401 && status != 403 {
		t.Fatalf("user on admin route: %d", status)
	}
}

// TestDemoLoginOnlyInDemo: the login endpoint does not exist without --demo.
func TestDemoLoginOnlyInDemo(t *testing.T) {
	_, c := MustRunMain(t, nil)
	status, _ := c.do(t.Context(), "POST", "/api/demo/login", "", map[string]any{"user_id": "alice"}, nil, nil)
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		t.Fatalf("login without --demo: %d", status)
	}
}

// TestStorm: stock 100, 10 000 concurrent purchases (token + purchase each)
// from 2 000 users over real HTTP. Exactly 100 rooms are taken, nobody gets
// two, every 202 is one order row, and the database equals the engine.
func TestStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("storm skipped in -short")
	}
	ctx := t.Context()
	m, c := MustRunMain(t, nil)
	id := c.createSale(t, saleJSON([]int{100}, 1, true))

	const users, attempts = 2000, 10000
	var (
		mu       sync.Mutex
		accepted = map[string]string{} // order -> user
		perUser  = map[string]int{}
		codes    = map[string]int{}
	)
	bench.Together(attempts, func(i int) error {
		user := fmt.Sprintf("guest-%04d", i%users)
		status, o, err := c.purchase(ctx, id, user, true, nil, "")
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			t.Errorf("%s: %v", user, err)
		case status == http.StatusAccepted:
			if _, dup := accepted[o.OrderID]; dup {
				t.Errorf("order %s accepted twice", o.OrderID)
			}
			accepted[o.OrderID] = user
			perUser[user]++
		default:
			codes[o.Error.Code]++
		}
		return nil
	})
	t.Logf("accepted %d, refused %v", len(accepted), codes)
	if len(accepted) != 100 {
		t.Fatalf("accepted %d purchases, want exactly 100", len(accepted))
	}
	for u, n := range perUser {
		if n > 1 {
			t.Errorf("user %s got %d rooms, limit 1", u, n)
		}
	}
	for code := range codes {
		if code != "sold_out" && code != "limit_exceeded" {
			t.Errorf("unexpected refusal %q", code)
		}
	}
	n := c.adminSale(t, id).Nights[0]
	if n.Held != 100 || n.Sold != 0 || n.Available != 0 {
		t.Fatalf("night = %+v, want held 100, available 0", n)
	}
	snap, err := m.Store().Snapshot(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, r := range snap.Reservations {
		if rows[r.OrderID] {
			t.Fatalf("duplicate row %s", r.OrderID)
		}
		rows[r.OrderID] = true
		if r.Active && accepted[r.OrderID] != r.UserID {
			t.Errorf("active order %s (%s) was never answered 202", r.OrderID, r.UserID)
		}
	}
	for o := range accepted {
		if !rows[o] {
			t.Errorf("202 order %s has no row", o)
		}
	}
}
