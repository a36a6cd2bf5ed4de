package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// Client speaks flashsale's HTTP API as guests and as the operator do. It
// signs user JWTs itself, as the platform in front of flashsale would, so
// a load test needs only the server's JWT secret and admin token.
type Client struct {
	Base string // "http://host:port", no trailing slash
	// Issuer and Audience go into every guest's JWT as iss and aud, for
	// a server that requires them (FLASHSALE_JWT_ISSUER,
	// FLASHSALE_JWT_AUDIENCE); set them before the first JWT.
	Issuer, Audience string
	admin            string
	key              []byte
	http             *http.Client

	mu   sync.Mutex
	jwts map[string]string
}

// NewClient returns a client of the server at base. conns caps the
// connections it opens to it (and keeps idle): a load generator must not
// open one per guest, nor queue every guest behind a handful.
func NewClient(base, adminToken, jwtSecret string, conns int) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost = conns, conns, conns
	return &Client{
		Base: base, admin: adminToken, key: []byte(jwtSecret),
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		jwts: map[string]string{},
	}
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

// JWT returns user's token (HS256, sub, exp in an hour, tier gold), signed
// once and then cached: signing is the client's work, not the server's.
func (c *Client) JWT(user string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.jwts[user]; ok {
		return t
	}
	claims := jwt.MapClaims{"sub": user, "tier": "gold", "exp": time.Now().Add(time.Hour).Unix()}
	if c.Issuer != "" {
		claims["iss"] = c.Issuer
	}
	if c.Audience != "" {
		claims["aud"] = c.Audience
	}
	t, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(c.key)
	if err != nil {
		panic(err) // HS256 with a []byte key does not fail
	}
	c.jwts[user] = t
	return t
}

// Response is one answer: its status, the error code of an error answer,
// the Retry-After it asked for and the body.
type Response struct {
	Status     int
	Code       string
	RetryAfter time.Duration
	Body       []byte
}

// Do sends one request with a bearer token (none when empty) and reads the
// whole answer. body is sent as it is: a load generator sends bytes, some
// of them deliberately malformed. An error is a transport error; any
// answer, whatever its status, is a Response.
func (c *Client) Do(ctx context.Context, method, path, bearer string, body []byte, header http.Header) (Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return Response{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{Status: resp.StatusCode}, err
	}
	r := Response{Status: resp.StatusCode, Body: b}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		r.RetryAfter = time.Duration(s) * time.Second
	}
	if r.Status >= 400 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil {
			r.Code = e.Error.Code
		}
	}
	return r, nil
}

// doJSON sends in (nil: no body) and decodes a 2xx answer into out.
func (c *Client) doJSON(ctx context.Context, method, path, bearer string, in, out any) (Response, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return Response{}, err
		}
	}
	r, err := c.Do(ctx, method, path, bearer, body, nil)
	if err != nil {
		return r, err
	}
	if out != nil && r.Status/100 == 2 {
		if err := json.Unmarshal(r.Body, out); err != nil {
			return r, fmt.Errorf("%s %s: decode %d answer: %w", method, path, r.Status, err)
		}
	}
	return r, nil
}

// admin sends an operator request and wants the status want.
func (c *Client) adminJSON(ctx context.Context, method, path string, in, out any, want int) error {
	r, err := c.doJSON(ctx, method, path, c.admin, in, out)
	if err != nil {
		return err
	}
	if r.Status != want {
		return fmt.Errorf("%s %s: %d %s: %.200s", method, path, r.Status, r.Code, r.Body)
	}
	return nil
}

// Night is one night of a sale: its date and rooms; of a slot sale, one
// slot: its date, start (Time, in the sale's time zone), length and places.
type Night struct {
	Date    string `json:"date"`
	Time    string `json:"time,omitempty"`
	Minutes int    `json:"minutes,omitempty"`
	Stock   int    `json:"stock"`
}

// Sale is what CreateSale posts: the fields a load test chooses. Its JSON
// is the API's NewSale.
type Sale struct {
	Title    string `json:"title"`
	Hotel    string `json:"hotel"`
	RoomType string `json:"room_type"`
	// Kind is what the sale sells, stay (""), slot (AsSlots) or seats
	// (AsSeats), and TimeZone the venue's, which those two require.
	Kind          flashsale.Kind `json:"kind,omitempty"`
	TimeZone      string         `json:"time_zone,omitempty"`
	Nights        []Night        `json:"nights"`
	Price         int64          `json:"price"`
	OriginalPrice int64          `json:"original_price"`
	Currency      string         `json:"currency"`
	StartsAt      time.Time      `json:"starts_at"`
	EndsAt        time.Time      `json:"ends_at"`
	PerUserLimit  int            `json:"per_user_limit"`
	HoldSeconds   int            `json:"hold_seconds"`
	PurchaseToken bool           `json:"purchase_token"`
	// Test makes it a test sale: hidden from the public list, marked in
	// metrics and events, deletable with its orders (DeleteSale).
	Test      bool `json:"test,omitempty"`
	Challenge *struct {
		Difficulty int `json:"difficulty"`
	} `json:"challenge,omitempty"`
}

// NewSale is a one-night sale of stock rooms, open from a second ago for
// an hour, one room per guest, held holdSeconds, tokens required: the
// flash sale the source describes.
func NewSale(stock, holdSeconds int) Sale {
	now := time.Now().UTC().Truncate(time.Second)
	return Sale{
		Title: "flashsale bench", Hotel: "Bench Hotel", RoomType: "Deluxe King",
		Nights: []Night{{Date: now.AddDate(0, 1, 0).Format(time.DateOnly), Stock: stock}},
		Price:  39900, OriginalPrice: 69900, Currency: "CNY",
		StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour),
		PerUserLimit: 1, HoldSeconds: holdSeconds, PurchaseToken: true, Test: true,
	}
}

// SlotTimes are the starts of a bench slot sale's slots on its day, in
// SlotTimeZone: a restaurant's two lunch and two dinner services, far from
// the hours the clocks skip or repeat.
var SlotTimes = []string{"12:00", "13:30", "19:00", "20:30"}

// A bench slot sale's venue's zone and its slots' length.
const (
	SlotTimeZone = "Europe/Paris"
	SlotMinutes  = 90
)

// AsSlots is s, a sale of one night, as a slot sale of the same places in
// all on the night's date (a month ahead: no slot has started): one slot
// per SlotTimes, fewer when there are fewer places than slots (one for
// none), the places spread evenly over them, the first ones taking the
// remainder. A load spread evenly over its slots sells it out as it
// would the night.
func (s Sale) AsSlots() Sale {
	stock := 0
	for _, n := range s.Nights {
		stock += n.Stock
	}
	date := s.Nights[0].Date
	k := min(len(SlotTimes), max(1, stock))
	s.Kind, s.TimeZone = flashsale.KindSlot, SlotTimeZone
	s.Hotel, s.RoomType = "Bench Bistro", "Table"
	s.Nights = make([]Night, k)
	for i := range k {
		s.Nights[i] = Night{Date: date, Time: SlotTimes[i], Minutes: SlotMinutes, Stock: stock / k}
		if i < stock%k {
			s.Nights[i].Stock++
		}
	}
	return s
}

// SeatsVehicles is how many vehicles a bench seats sale's departure has.
const SeatsVehicles = 2

// AsSeats is s, a sale of one night, as a shuttle's seats sale of the
// same places in all on the night's date: one departure per SlotTimes of
// SeatsVehicles vehicles each, fewer departures when there are fewer
// seats than departures (one for none) and one vehicle each when there
// are fewer than two a departure. The seats are spread evenly over the
// departures, the first ones taking the remainder, then over each one's
// vehicles: no two vehicles, nor two departures, differ by more than a
// seat. A load spread evenly over its departures sells it out.
func (s Sale) AsSeats() Sale {
	stock := 0
	for _, n := range s.Nights {
		stock += n.Stock
	}
	date := s.Nights[0].Date
	k := min(len(SlotTimes), max(1, stock))
	v := SeatsVehicles
	if stock < v*k {
		v = 1
	}
	s.Kind, s.TimeZone = flashsale.KindSeats, SlotTimeZone
	s.Hotel, s.RoomType = "Bench Shuttle", "Seat"
	s.Nights = make([]Night, 0, k*v)
	for i := range k {
		seats := stock / k
		if i < stock%k {
			seats++
		}
		for j := range v {
			n := Night{Date: date, Time: SlotTimes[i], Minutes: SlotMinutes, Stock: seats / v}
			if j < seats%v {
				n.Stock++
			}
			s.Nights = append(s.Nights, n)
		}
	}
	return s
}

// SlotNames are a slot sale's slots, or a seats sale's departures, as a
// purchase names them ("2026-12-24T19:00"), in the sale's order, which is
// its audit's (a departure once for its vehicles); nil for a stay.
func (s Sale) SlotNames() []string {
	if s.Kind != flashsale.KindSlot && s.Kind != flashsale.KindSeats {
		return nil
	}
	var names []string
	for _, n := range s.Nights {
		if name := n.Date + "T" + n.Time; len(names) == 0 || s.Kind == flashsale.KindSlot || names[len(names)-1] != name {
			names = append(names, name)
		}
	}
	return names
}

// Vehicles are a seats sale's vehicles per departure, SlotNames' order;
// nil for any other kind.
func (s Sale) Vehicles() []int {
	if s.Kind != flashsale.KindSeats {
		return nil
	}
	var vs []int
	for i, n := range s.Nights {
		if i > 0 && n.Date == s.Nights[i-1].Date && n.Time == s.Nights[i-1].Time {
			vs[len(vs)-1]++
		} else {
			vs = append(vs, 1)
		}
	}
	return vs
}

// CreateSale creates s as the operator and returns its ID.
func (c *Client) CreateSale(ctx context.Context, s Sale) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	if err := c.adminJSON(ctx, "POST", "/api/admin/sales", s, &out, http.StatusCreated); err != nil {
		return "", fmt.Errorf("create sale: %w", err)
	}
	return out.ID, nil
}

// DeleteSale deletes a test sale with its orders (the server refuses a
// real one).
func (c *Client) DeleteSale(ctx context.Context, saleID string) error {
	if err := c.adminJSON(ctx, "DELETE", "/api/admin/sales/"+saleID, nil, nil, http.StatusNoContent); err != nil {
		return fmt.Errorf("delete sale: %w", err)
	}
	return nil
}

// View is the guest's sale page, GET /api/sales/{id}.
func (c *Client) View(ctx context.Context, saleID string) (Response, error) {
	return c.Do(ctx, "GET", "/api/sales/"+saleID, "", nil, nil)
}

// Token asks for a purchase token as user; challenge and solution are a
// solved proof-of-work puzzle for a sale that wants one, else empty. The
// token is set on a 201.
func (c *Client) Token(ctx context.Context, saleID, user, challenge, solution string) (string, Response, error) {
	var in any
	if challenge != "" {
		in = map[string]string{"challenge": challenge, "solution": solution}
	}
	var out struct {
		Token string `json:"token"`
	}
	r, err := c.doJSON(ctx, "POST", "/api/sales/"+saleID+"/token", c.JWT(user), in, &out)
	return out.Token, r, err
}

// Puzzle is a proof-of-work challenge from POST /api/sales/{id}/challenge.
type Puzzle struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
}

// Challenge asks for a proof-of-work puzzle as user.
func (c *Client) Challenge(ctx context.Context, saleID, user string) (Puzzle, Response, error) {
	var p Puzzle
	r, err := c.doJSON(ctx, "POST", "/api/sales/"+saleID+"/challenge", c.JWT(user), nil, &p)
	return p, r, err
}

// Order is an order as its owner reads it (and as a 202 names it).
type Order struct {
	OrderID string `json:"order_id"`
	UserID  string `json:"user_id"`
	Status  string `json:"status"`
	Rooms   int    `json:"rooms"`
	// Slot is a slot sale's order's slot, or a seats sale's departure, as
	// the purchase named it.
	Slot string `json:"slot,omitempty"`
}

// Purchase buys one room as user with token (empty: none) under the
// idempotency key (empty: none). The order is set on a 202.
func (c *Client) Purchase(ctx context.Context, saleID, user, token, key string) (Order, Response, error) {
	return c.PurchaseSlot(ctx, saleID, user, token, key, "")
}

// PurchaseSlot is Purchase of one place of a slot sale's slot
// ("2026-12-24T19:00", quantity 1); with no slot, one room of a stay.
func (c *Client) PurchaseSlot(ctx context.Context, saleID, user, token, key, slot string) (Order, Response, error) {
	body := []byte(`{}`)
	switch {
	case slot != "":
		body = slotBody(token, slot, false)
	case token != "":
		body, _ = json.Marshal(map[string]string{"token": token})
	}
	return c.purchase(ctx, saleID, user, key, body)
}

// PurchaseDeparture is Purchase of one seat of a seats sale's departure
// ("2026-12-24T09:00", seats 1): the server takes it from the first of
// the departure's vehicles with room.
func (c *Client) PurchaseDeparture(ctx context.Context, saleID, user, token, key, departure string) (Order, Response, error) {
	return c.purchase(ctx, saleID, user, key, slotBody(token, departure, true))
}

// purchase posts body as user's purchase under key (empty: none).
func (c *Client) purchase(ctx context.Context, saleID, user, key string, body []byte) (Order, Response, error) {
	var h http.Header
	if key != "" {
		h = http.Header{"Idempotency-Key": {key}}
	}
	r, err := c.Do(ctx, "POST", "/api/sales/"+saleID+"/purchase", c.JWT(user), body, h)
	var o Order
	if err == nil && r.Status == http.StatusAccepted {
		if err = json.Unmarshal(r.Body, &o); err != nil {
			err = fmt.Errorf("purchase: decode 202 answer: %w", err)
		}
	}
	return o, r, err
}

// purchaseBody is a slot purchase's body (slot, quantity) or a seats
// purchase's (departure, seats).
type purchaseBody struct {
	Token     string `json:"token,omitempty"`
	Slot      string `json:"slot,omitempty"`
	Quantity  int    `json:"quantity,omitempty"`
	Departure string `json:"departure,omitempty"`
	Seats     int    `json:"seats,omitempty"`
}

// slotBody is the body of a purchase of one place of slot, as a seats
// sale's departure when seats.
func slotBody(token, slot string, seats bool) []byte {
	p := purchaseBody{Token: token, Slot: slot, Quantity: 1}
	if seats {
		p = purchaseBody{Token: token, Departure: slot, Seats: 1}
	}
	b, _ := json.Marshal(p)
	return b
}

// Order reads one of user's orders as user.
func (c *Client) Order(ctx context.Context, user, orderID string) (Order, Response, error) {
	var o Order
	r, err := c.doJSON(ctx, "GET", "/api/orders/"+orderID, c.JWT(user), nil, &o)
	return o, r, err
}

// Pay is the payment platform's callback for an order (admin token).
func (c *Client) Pay(ctx context.Context, orderID, ref string) (Response, error) {
	return c.doJSON(ctx, "POST", "/api/orders/"+orderID+"/paid", c.admin, map[string]string{"payment_ref": ref}, nil)
}

// Cancel cancels user's held order.
func (c *Client) Cancel(ctx context.Context, user, orderID string) (Response, error) {
	return c.Do(ctx, "POST", "/api/orders/"+orderID+"/cancel", c.JWT(user), nil, nil)
}

// AuditNight is one night of the server's audit.
type AuditNight struct {
	Date     string `json:"date"`
	Stock    int    `json:"stock"`
	Held     int    `json:"held"`
	Sold     int    `json:"sold"`
	InFlight *int   `json:"in_flight"`
}

// Audit is the server's audit of a sale, GET /api/admin/sales/{id}/audit.
type Audit struct {
	Balanced bool         `json:"balanced"`
	Nights   []AuditNight `json:"nights"`
	Findings []Finding    `json:"findings"`
}

// Finding is one thing the server's audit found that does not balance.
type Finding struct {
	Kind    string `json:"kind"`
	OrderID string `json:"order_id"`
	UserID  string `json:"user_id"`
	Detail  string `json:"detail"`
}

// Audit reads the server's audit of a sale.
func (c *Client) Audit(ctx context.Context, saleID string) (Audit, error) {
	var a Audit
	if err := c.adminJSON(ctx, "GET", "/api/admin/sales/"+saleID+"/audit", nil, &a, http.StatusOK); err != nil {
		return a, fmt.Errorf("audit: %w", err)
	}
	return a, nil
}

// ForceBreaker sets the server's override of its circuit breaker in front
// of the stock engine: "open", "closed" or "auto" (POST /api/admin/breaker).
// The embedded shape has no breaker: 404.
func (c *Client) ForceBreaker(ctx context.Context, force string) error {
	if err := c.adminJSON(ctx, "POST", "/api/admin/breaker", map[string]string{"force": force}, nil, http.StatusOK); err != nil {
		return fmt.Errorf("force breaker %s: %w", force, err)
	}
	return nil
}

// SetJWT makes token user's token from now on, in place of one the client
// would sign: a token issued elsewhere (the demo's login) is sent as it is.
func (c *Client) SetJWT(user, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jwts[user] = token
}

// KeepIdle caps the idle connections the client keeps between requests at
// n (NewClient keeps as many as it may open). Fewer means a burst after a
// burst dials again, as fresh guests would: the server pays for accepting
// them. Call it before the first request.
func (c *Client) KeepIdle(n int) { c.http.Transport.(*http.Transport).MaxIdleConns = n }
