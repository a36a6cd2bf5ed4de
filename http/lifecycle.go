package http

import (
	"encoding/csv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The operators' sale lifecycle: list, edit, pause, resume, close, stock
// per night, the change log and the orders (JSON, or CSV for a
// spreadsheet).

// salePatchBody is the wire form of an edit: every field optional, a
// present one replaces the sale's (nights as a whole list).
type salePatchBody struct {
	Title         *string                `json:"title"`
	Description   *string                `json:"description"`
	Hotel         *string                `json:"hotel"`
	RoomType      *string                `json:"room_type"`
	TimeZone      *string                `json:"time_zone"`
	Nights        *[]flashsale.Night     `json:"nights"`
	Price         *int64                 `json:"price"`
	OriginalPrice *int64                 `json:"original_price"`
	PriceTiers    *[]flashsale.PriceTier `json:"price_tiers"`
	Currency      *string                `json:"currency"`
	StartsAt      *string                `json:"starts_at"`
	EndsAt        *string                `json:"ends_at"`
	PerUserLimit  *int                   `json:"per_user_limit"`
	HoldSeconds   *int                   `json:"hold_seconds"`
	PurchaseToken *bool                  `json:"purchase_token"`
	Eligibility   *struct {
		MinTier     flashsale.Tier `json:"min_tier"`
		MinStays30d int            `json:"min_stays_30d"`
		Channels    []string       `json:"channels"`
	} `json:"eligibility"`
	Limits *struct {
		PerSale *string `json:"per_sale"`
		PerUser *string `json:"per_user"`
		PerIP   *string `json:"per_ip"`
	} `json:"limits"`
	Challenge *flashsale.Challenge `json:"challenge"`
	// WaitingRoom null turns the waiting room off; absent leaves it.
	WaitingRoom nullable[flashsale.WaitingRoom] `json:"waiting_room"`
}

// nullable is an edit's field that null clears, which a pointer cannot
// tell from an absent one: Set says the field was sent, Value is nil when
// it was null.
type nullable[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSONFrom is called for a present field only, null included.
// The value is decoded by the same decoder, so its unknown fields and
// wrong types are refused, and named, as anywhere else in the body.
func (n *nullable[T]) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	n.Set = true
	if d.PeekKind() == 'n' {
		_, err := d.ReadToken()
		return err
	}
	n.Value = new(T)
	return jsonv2.UnmarshalDecode(d, n.Value)
}

// decodeSalePatch decodes an edit from untrusted input. The patched sale
// is validated as a whole by the service (SalePatch.Apply).
func decodeSalePatch(r io.Reader) (flashsale.SalePatch, error) {
	var b salePatchBody
	if err := decodeBody(r, &b, false); err != nil {
		return flashsale.SalePatch{}, err
	}
	p := flashsale.SalePatch{
		Title: b.Title, Description: b.Description, Hotel: b.Hotel, RoomType: b.RoomType, TimeZone: b.TimeZone,
		Price: b.Price, OriginalPrice: b.OriginalPrice, Currency: b.Currency,
		PerUserLimit: b.PerUserLimit, HoldSeconds: b.HoldSeconds, PurchaseToken: b.PurchaseToken,
		Challenge: b.Challenge,
	}
	if b.PriceTiers != nil {
		p.PriceTiers = *b.PriceTiers
		if p.PriceTiers == nil {
			p.PriceTiers = []flashsale.PriceTier{} // null: no tiers
		}
	}
	if b.Nights != nil {
		p.Nights = *b.Nights
		if p.Nights == nil {
			p.Nights = []flashsale.Night{} // null: validation says nights are required
		}
	}
	for _, t := range []struct {
		field string
		v     *string
		to    **time.Time
	}{{"starts_at", b.StartsAt, &p.StartsAt}, {"ends_at", b.EndsAt, &p.EndsAt}} {
		if t.v == nil {
			continue
		}
		v, err := parseTime(t.field, *t.v)
		if err != nil {
			return flashsale.SalePatch{}, err
		}
		*t.to = &v
	}
	if b.WaitingRoom.Set {
		p.WaitingRoom = &b.WaitingRoom.Value
	}
	if e := b.Eligibility; e != nil {
		p.Eligibility = &flashsale.Eligibility{MinTier: e.MinTier, MinStays30d: e.MinStays30d, Channels: e.Channels}
	}
	if l := b.Limits; l != nil {
		p.Limits = new(flashsale.SaleLimits)
		var err error
		if p.Limits.PerSale, err = limitRate("per_sale", l.PerSale); err != nil {
			return flashsale.SalePatch{}, err
		}
		if p.Limits.PerUser, err = limitRate("per_user", l.PerUser); err != nil {
			return flashsale.SalePatch{}, err
		}
		if p.Limits.PerIP, err = limitRate("per_ip", l.PerIP); err != nil {
			return flashsale.SalePatch{}, err
		}
	}
	return p, nil
}

// stockBody is a stock change of one night.
type stockBody struct {
	Delta *int `json:"delta"`
	// Time names a slot sale's slot on the date ("19:00").
	Time string `json:"time"`
}

// decodeStock decodes a stock change from untrusted input.
func decodeStock(r io.Reader, date string) (flashsale.StockDelta, error) {
	var b stockBody
	if err := decodeBody(r, &b, false); err != nil {
		return flashsale.StockDelta{}, err
	}
	if b.Delta == nil {
		return flashsale.StockDelta{}, flashsale.Errorf(flashsale.EInvalid, "delta is required: the rooms to add, or (negative) to take back")
	}
	d := flashsale.StockDelta{Date: date, Time: b.Time, Delta: *b.Delta}
	return d, d.Validate()
}

// pageQuery reads the limit and cursor of a list; bad values are 400,
// never silently clamped to something the caller did not ask for.
func pageQuery(r *http.Request) (limit int, cursor string, err error) {
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > flashsale.PageMax {
			return 0, "", flashsale.Errorf(flashsale.EInvalid, "limit must be a number from 1 to %d", flashsale.PageMax)
		}
		limit = n
	}
	cursor = q.Get("cursor")
	if cursor != "" && !printableASCII(cursor, maxIDLen) {
		return 0, "", flashsale.Errorf(flashsale.EInvalid, "cursor must be the next_cursor of the previous page")
	}
	return limit, cursor, nil
}

var saleStatuses = []flashsale.SaleStatus{flashsale.SaleUpcoming, flashsale.SaleActive,
	flashsale.SaleSoldOut, flashsale.SalePaused, flashsale.SaleEnded}

var orderStatuses = []flashsale.OrderStatus{flashsale.OrderHeld, flashsale.OrderPaid,
	flashsale.OrderExpired, flashsale.OrderCancelled, flashsale.OrderFailed}

// oneOf returns v as T when it is one of allowed (or empty), else an
// EInvalid error naming the field and the choices.
func oneOf[T ~string](field, v string, allowed []T) (T, error) {
	if v == "" {
		return "", nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if string(a) == v {
			return a, nil
		}
		names[i] = string(a)
	}
	return "", flashsale.Errorf(flashsale.EInvalid, "%s must be one of %s", field, strings.Join(names, ", "))
}

type saleListJSON struct {
	Sales      []saleJSON `json:"sales"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

func (s *Server) handleListSales(w http.ResponseWriter, r *http.Request) {
	status, err := oneOf("status", r.URL.Query().Get("status"), saleStatuses)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	hotel := r.URL.Query().Get("hotel")
	if len(hotel) > 200 {
		s.writeError(w, r, flashsale.Errorf(flashsale.EInvalid, "hotel must be at most 200 characters"))
		return
	}
	limit, cursor, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views, next, err := s.svc.ListSales(r.Context(), flashsale.SaleQuery{Status: status, Hotel: hotel, Before: cursor, Limit: limit})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := saleListJSON{Sales: make([]saleJSON, len(views)), NextCursor: next}
	for i, v := range views {
		out.Sales[i] = adminView(v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleUpdateSale(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := decodeSalePatch(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeSale(w, r)(s.svc.UpdateSale(r.Context(), id, p))
}

// handleSaleAction serves pause, resume and close, which take no body.
func (s *Server) handleSaleAction(act func(s *Server, r *http.Request, id string) (*flashsale.SaleView, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := decodeBody(r.Body, &struct{}{}, true); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeSale(w, r)(act(s, r, id))
	}
}

func pauseSale(s *Server, r *http.Request, id string) (*flashsale.SaleView, error) {
	return s.svc.PauseSale(r.Context(), id, true)
}

func resumeSale(s *Server, r *http.Request, id string) (*flashsale.SaleView, error) {
	return s.svc.PauseSale(r.Context(), id, false)
}

func closeSale(s *Server, r *http.Request, id string) (*flashsale.SaleView, error) {
	return s.svc.CloseSale(r.Context(), id)
}

func (s *Server) handleAdjustStock(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := decodeStock(r.Body, r.PathValue("date"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeSale(w, r)(s.svc.AdjustStock(r.Context(), id, d))
}

// handleNightRules changes one night's stay rules: the body names the
// rules to set ({"stop_sell": true} closes the night at once); the others
// stay as they are.
func (s *Server) handleNightRules(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	date := r.PathValue("date")
	if _, err := time.Parse(flashsale.DateLayout, date); err != nil {
		s.writeError(w, r, flashsale.Errorf(flashsale.EInvalid, "the night's date must be like 2026-12-24"))
		return
	}
	p, err := decodeNightRules(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeSale(w, r)(s.svc.SetNightRules(r.Context(), id, date, p))
}

// decodeNightRules reads a night's rules patch: at least one rule, each
// in its range (Sale.Validate judges the night's rules as a whole).
func decodeNightRules(r io.Reader) (flashsale.StayRulesPatch, error) {
	var p flashsale.StayRulesPatch
	if err := decodeBody(r, &p, false); err != nil {
		return p, err
	}
	if p == (flashsale.StayRulesPatch{}) {
		return p, flashsale.Errorf(flashsale.EInvalid, "name at least one rule to set: min_stay, max_stay, closed_to_arrival, closed_to_departure or stop_sell")
	}
	for _, n := range []struct {
		name string
		v    *int
	}{{"min_stay", p.MinStay}, {"max_stay", p.MaxStay}} {
		if n.v != nil && (*n.v < 0 || *n.v > flashsale.MaxNights) {
			return p, flashsale.Errorf(flashsale.EInvalid, "%s must be between 0 (none) and %d", n.name, flashsale.MaxNights)
		}
	}
	return p, nil
}

// writeSale answers with the admin view of a sale, or the error.
func (s *Server) writeSale(w http.ResponseWriter, r *http.Request) func(*flashsale.SaleView, error) {
	return func(v *flashsale.SaleView, err error) {
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, adminView(v))
	}
}

type changesJSON struct {
	Changes []flashsale.SaleChange `json:"changes"`
}

func (s *Server) handleSaleChanges(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cs, err := s.svc.SaleChanges(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if cs == nil {
		cs = []flashsale.SaleChange{}
	}
	writeJSON(w, http.StatusOK, changesJSON{Changes: cs})
}

type orderListJSON struct {
	Orders     []orderJSON `json:"orders"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// handleSaleOrders lists a sale's orders: a page of JSON, or with Accept:
// text/csv every order (newest first, read page by page) as CSV.
func (s *Server) handleSaleOrders(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status, err := oneOf("status", r.URL.Query().Get("status"), orderStatuses)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, cursor, err := pageQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := flashsale.OrderQuery{Status: status, Before: cursor, Limit: limit}
	if strings.Contains(r.Header.Get("Accept"), "text/csv") {
		s.writeOrdersCSV(w, r, id, q)
		return
	}
	orders, next, err := s.svc.SaleOrders(r.Context(), id, q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := orderListJSON{Orders: make([]orderJSON, len(orders)), NextCursor: next}
	for i, o := range orders {
		out.Orders[i] = orderView(o)
	}
	writeJSON(w, http.StatusOK, out)
}

var ordersCSVHeader = []string{"order_id", "user_id", "status", "check_in", "nights", "rooms",
	"amount", "currency", "hold_expires_at", "payment_ref", "failure_reason", "created_at", "updated_at"}

// writeOrdersCSV streams every order from q's cursor on. An error before
// the first row is a JSON error; after it, the stream is cut short (the
// CSV lacks its last line, which a reader notices) and the error logged.
func (s *Server) writeOrdersCSV(w http.ResponseWriter, r *http.Request, id string, q flashsale.OrderQuery) {
	q.Limit = flashsale.PageMax
	orders, next, err := s.svc.SaleOrders(r.Context(), id, q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="orders-`+id+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(ordersCSVHeader)
	for {
		for _, o := range orders {
			_ = cw.Write([]string{o.ID, csvCell(o.UserID), string(o.Status), o.CheckIn, strconv.Itoa(o.Nights),
				strconv.Itoa(o.Rooms), strconv.FormatInt(o.Amount, 10), o.Currency,
				o.HoldExpiresAt.Format(time.RFC3339Nano), csvCell(o.PaymentRef), csvCell(o.FailureReason),
				o.CreatedAt.Format(time.RFC3339Nano), o.UpdatedAt.Format(time.RFC3339Nano)})
		}
		if next == "" {
			break
		}
		q.Before = next
		if orders, next, err = s.svc.SaleOrders(r.Context(), id, q); err != nil {
			s.log.Error("orders csv cut short", "sale_id", id, "err", err)
			cw.Flush()
			return
		}
	}
	cw.Flush()
}

// csvCell neutralises a value a guest or a payment platform chose (a user
// id is a JWT's sub) for a spreadsheet: one starting with =, +, -, @, a tab
// or a carriage return is a formula to Excel and LibreOffice
// (=cmd|' /C calc'!A0), so it gets a leading apostrophe, OWASP's advice,
// which the spreadsheet shows as text and does not display.
func csvCell(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// handleDeleteSale removes a test sale with its orders: 204, or 409 for a
// sale that is not a test sale.
func (s *Server) handleDeleteSale(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.svc.DeleteSale(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
