package http

import (
	"io"
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
)

// saleBody is the wire form of a new sale. Optional fields are pointers so
// an absent field takes its default while a present zero stays zero (and
// fails validation). Times are strings so a bad one is reported by name.
type saleBody struct {
	Title         string                `json:"title"`
	Description   string                `json:"description"`
	Hotel         string                `json:"hotel"`
	RoomType      string                `json:"room_type"`
	Kind          flashsale.Kind        `json:"kind"`
	TimeZone      string                `json:"time_zone"`
	Nights        []flashsale.Night     `json:"nights"`
	Price         int64                 `json:"price"`
	OriginalPrice int64                 `json:"original_price"`
	PriceTiers    []flashsale.PriceTier `json:"price_tiers"`
	Currency      string                `json:"currency"`
	StartsAt      string                `json:"starts_at"`
	EndsAt        string                `json:"ends_at"`
	PerUserLimit  *int                  `json:"per_user_limit"`
	HoldSeconds   *int                  `json:"hold_seconds"`
	PurchaseToken *bool                 `json:"purchase_token"`
	// Test makes a load test's sale (see flashsale.Sale.Test).
	Test        bool `json:"test"`
	Eligibility struct {
		MinTier     flashsale.Tier `json:"min_tier"`
		MinStays30d int            `json:"min_stays_30d"`
		Channels    []string       `json:"channels"`
	} `json:"eligibility"`
	// Limits are rates as the configuration writes them ("300/s,600",
	// "off"); an absent one keeps the instance's default.
	Limits struct {
		PerSale *string `json:"per_sale"`
		PerUser *string `json:"per_user"`
		PerIP   *string `json:"per_ip"`
	} `json:"limits"`
	Challenge flashsale.Challenge `json:"challenge"`
	// WaitingRoom is absent or null for none.
	WaitingRoom *flashsale.WaitingRoom `json:"waiting_room"`
}

// limitRate reads one of a sale's limit overrides; nil when absent.
func limitRate(field string, v *string) (*flashsale.Rate, error) {
	if v == nil {
		return nil, nil
	}
	r, err := flashsale.ParseRate(*v)
	if err != nil {
		return nil, flashsale.Errorf(flashsale.EInvalid, "limits.%s: %s", field, err.Error())
	}
	return &r, nil
}

// decodeSale decodes and validates a new sale from untrusted input. Errors
// are *flashsale.Error with EInvalid or ETooLarge.
func decodeSale(r io.Reader) (*flashsale.Sale, error) {
	var b saleBody
	if err := decodeBody(r, &b, false); err != nil {
		return nil, err
	}
	s := &flashsale.Sale{
		Title:         b.Title,
		Description:   b.Description,
		Hotel:         b.Hotel,
		RoomType:      b.RoomType,
		Kind:          b.Kind,
		TimeZone:      b.TimeZone,
		Nights:        b.Nights,
		Price:         b.Price,
		OriginalPrice: b.OriginalPrice,
		PriceTiers:    b.PriceTiers,
		Currency:      b.Currency,
		PerUserLimit:  flashsale.PerUserLimitDefault,
		HoldSeconds:   flashsale.HoldSecondsDefault,
		PurchaseToken: true,
		Eligibility: flashsale.Eligibility{MinTier: b.Eligibility.MinTier,
			MinStays30d: b.Eligibility.MinStays30d, Channels: b.Eligibility.Channels},
		Challenge:   b.Challenge,
		WaitingRoom: b.WaitingRoom,
		Test:        b.Test,
	}
	var err error
	for _, l := range []struct {
		field string
		v     *string
		to    **flashsale.Rate
	}{
		{"per_sale", b.Limits.PerSale, &s.Limits.PerSale},
		{"per_user", b.Limits.PerUser, &s.Limits.PerUser},
		{"per_ip", b.Limits.PerIP, &s.Limits.PerIP},
	} {
		if *l.to, err = limitRate(l.field, l.v); err != nil {
			return nil, err
		}
	}
	if b.PerUserLimit != nil {
		s.PerUserLimit = *b.PerUserLimit
	}
	if b.HoldSeconds != nil {
		s.HoldSeconds = *b.HoldSeconds
	}
	if b.PurchaseToken != nil {
		s.PurchaseToken = *b.PurchaseToken
	}
	if s.StartsAt, err = parseTime("starts_at", b.StartsAt); err != nil {
		return nil, err
	}
	if s.EndsAt, err = parseTime("ends_at", b.EndsAt); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func parseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, flashsale.Errorf(flashsale.EInvalid, "%s is required", field)
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, flashsale.Errorf(flashsale.EInvalid, "%s must be an RFC 3339 time like 2026-12-24T20:00:00+08:00", field)
	}
	return t, nil
}

// saleJSON is a sale as the admin sees it: every field plus the database's
// counters per night.
type saleJSON struct {
	ID            string                 `json:"id"`
	Title         string                 `json:"title"`
	Description   string                 `json:"description,omitempty"`
	Hotel         string                 `json:"hotel"`
	RoomType      string                 `json:"room_type"`
	Kind          flashsale.Kind         `json:"kind"`
	TimeZone      string                 `json:"time_zone,omitempty"`
	Price         int64                  `json:"price"`
	OriginalPrice int64                  `json:"original_price"`
	PriceTiers    []flashsale.PriceTier  `json:"price_tiers,omitempty"`
	Currency      string                 `json:"currency"`
	StartsAt      time.Time              `json:"starts_at"`
	EndsAt        time.Time              `json:"ends_at"`
	PerUserLimit  int                    `json:"per_user_limit"`
	HoldSeconds   int                    `json:"hold_seconds"`
	PurchaseToken bool                   `json:"purchase_token"`
	Eligibility   flashsale.Eligibility  `json:"eligibility"`
	Limits        flashsale.SaleLimits   `json:"limits"`
	Challenge     flashsale.Challenge    `json:"challenge,omitzero"`
	WaitingRoom   *flashsale.WaitingRoom `json:"waiting_room,omitempty"`
	Paused        bool                   `json:"paused"`
	Test          bool                   `json:"test,omitempty"`
	Revision      int64                  `json:"revision"`
	CreatedAt     time.Time              `json:"created_at"`
	Status        flashsale.SaleStatus   `json:"status"`
	ServerTime    time.Time              `json:"server_time"`
	Nights        []adminNightJSON       `json:"nights"`
}

// adminNightJSON is a night's counters and its stay rules (a slot's
// counters, time and minutes).
type adminNightJSON struct {
	flashsale.NightStock
	Minutes int `json:"minutes,omitempty"`
	flashsale.StayRules
}

func adminView(v *flashsale.SaleView) saleJSON {
	s := v.Sale
	nights := make([]adminNightJSON, len(v.Nights))
	for i, n := range v.Nights {
		nights[i] = adminNightJSON{NightStock: n}
		if u := unitOf(s, i, n); u != nil {
			nights[i].Time, nights[i].Minutes, nights[i].StayRules = u.Time, u.Minutes, u.StayRules
		}
	}
	return saleJSON{
		ID: s.ID, Title: s.Title, Description: s.Description, Hotel: s.Hotel, RoomType: s.RoomType, Kind: s.KindOf(), TimeZone: s.TimeZone,
		Price: s.Price, OriginalPrice: s.OriginalPrice, PriceTiers: s.PriceTiers, Currency: s.Currency,
		StartsAt: s.StartsAt, EndsAt: s.EndsAt, PerUserLimit: s.PerUserLimit, Paused: s.Paused, Test: s.Test, Revision: s.Revision,
		HoldSeconds: s.HoldSeconds, PurchaseToken: s.PurchaseToken, Eligibility: s.Eligibility,
		Limits: s.Limits, Challenge: s.Challenge, WaitingRoom: s.WaitingRoom,
		CreatedAt: s.CreatedAt, Status: v.Status, ServerTime: v.ServerTime, Nights: nights,
	}
}

// publicSaleJSON is a sale as a guest sees it: no hold length, no counters
// beyond what is left to buy.
type publicSaleJSON struct {
	ID            string                `json:"id"`
	Title         string                `json:"title"`
	Description   string                `json:"description,omitempty"`
	Hotel         string                `json:"hotel"`
	RoomType      string                `json:"room_type"`
	Kind          flashsale.Kind        `json:"kind"`
	TimeZone      string                `json:"time_zone,omitempty"`
	Price         int64                 `json:"price"`
	OriginalPrice int64                 `json:"original_price"`
	PriceTiers    []flashsale.PriceTier `json:"price_tiers,omitempty"`
	Currency      string                `json:"currency"`
	StartsAt      time.Time             `json:"starts_at"`
	EndsAt        time.Time             `json:"ends_at"`
	PerUserLimit  int                   `json:"per_user_limit"`
	PurchaseToken bool                  `json:"purchase_token"`
	Eligibility   flashsale.Eligibility `json:"eligibility"`
	// Challenge tells the page to solve a puzzle before it asks for a token.
	Challenge flashsale.Challenge `json:"challenge,omitzero"`
	// WaitingRoom tells the page to join the queue before it asks for one.
	WaitingRoom *flashsale.WaitingRoom `json:"waiting_room,omitempty"`
	ServerTime  time.Time              `json:"server_time"`
	Status      flashsale.SaleStatus   `json:"status"`
	Nights      []publicNightJSON      `json:"nights"`
}

type publicNightJSON struct {
	Date string `json:"date"`
	// Time and Minutes are a slot's start (in the sale's time_zone) and
	// length.
	Time      string `json:"time,omitempty"`
	Minutes   int    `json:"minutes,omitempty"`
	Available int    `json:"available"`
	// The night's stay rules, so the page offers only allowed stays.
	flashsale.StayRules
}

// unitOf is the sale's unit a view's counters n are of: the i-th, or
// (when the view leaves some out, as the public one does passed nights)
// the one of n's date and time; nil when the sale has none (the view's
// counters and the sale are read apart).
func unitOf(s *flashsale.Sale, i int, n flashsale.NightStock) *flashsale.Night {
	if i < len(s.Nights) && s.Nights[i].Date == n.Date && (n.Time == "" || s.Nights[i].Time == n.Time) {
		return &s.Nights[i]
	}
	for j := range s.Nights {
		if u := &s.Nights[j]; u.Date == n.Date && u.Time == n.Time {
			return u
		}
	}
	return nil
}

func publicView(v *flashsale.SaleView) publicSaleJSON {
	s := v.Sale
	nights := make([]publicNightJSON, len(v.Nights))
	for i, n := range v.Nights {
		nights[i] = publicNightJSON{Date: n.Date, Time: n.Time, Available: n.Available}
		if u := unitOf(s, i, n); u != nil {
			nights[i].Minutes, nights[i].StayRules = u.Minutes, u.StayRules
		}
	}
	return publicSaleJSON{
		ID: s.ID, Title: s.Title, Description: s.Description, Hotel: s.Hotel, RoomType: s.RoomType, Kind: s.KindOf(), TimeZone: s.TimeZone,
		Price: s.Price, OriginalPrice: s.OriginalPrice, PriceTiers: s.PriceTiers, Currency: s.Currency,
		StartsAt: s.StartsAt, EndsAt: s.EndsAt, PerUserLimit: s.PerUserLimit,
		PurchaseToken: s.PurchaseToken, Eligibility: s.Eligibility, Challenge: s.Challenge, WaitingRoom: s.WaitingRoom,
		ServerTime: v.ServerTime, Status: v.Status, Nights: nights,
	}
}

// createdSaleJSON is the answer to a sale creation: the sale as stored.
type createdSaleJSON struct {
	ID            string                `json:"id"`
	Title         string                `json:"title"`
	Description   string                `json:"description,omitempty"`
	Hotel         string                `json:"hotel"`
	RoomType      string                `json:"room_type"`
	Kind          flashsale.Kind        `json:"kind"`
	TimeZone      string                `json:"time_zone,omitempty"`
	Nights        []flashsale.Night     `json:"nights"`
	Price         int64                 `json:"price"`
	OriginalPrice int64                 `json:"original_price"`
	PriceTiers    []flashsale.PriceTier `json:"price_tiers,omitempty"`
	Currency      string                `json:"currency"`
	StartsAt      time.Time             `json:"starts_at"`
	EndsAt        time.Time             `json:"ends_at"`
	PerUserLimit  int                   `json:"per_user_limit"`
	HoldSeconds   int                   `json:"hold_seconds"`
	PurchaseToken bool                  `json:"purchase_token"`
	Eligibility   flashsale.Eligibility `json:"eligibility"`
	Limits        flashsale.SaleLimits  `json:"limits"`
	Challenge     flashsale.Challenge   `json:"challenge,omitzero"`
	// WaitingRoom is the queue in front of the sale; nil: none.
	WaitingRoom *flashsale.WaitingRoom `json:"waiting_room,omitempty"`
	Test        bool                   `json:"test,omitempty"`
	CreatedAt   time.Time              `json:"created_at"`
}

func (s *Server) handleCreateSale(w http.ResponseWriter, r *http.Request) {
	sale, err := decodeSale(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	created, err := s.svc.CreateSale(r.Context(), sale)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The sale type is the contract for this answer; copying it into a
	// wire struct keeps a future field on flashsale.Sale from leaking out
	// unreviewed.
	writeJSON(w, http.StatusCreated, createdSaleJSON{
		ID: created.ID, Title: created.Title, Description: created.Description, Hotel: created.Hotel, RoomType: created.RoomType, Kind: created.KindOf(),
		TimeZone: created.TimeZone,
		Nights:   created.Nights, Price: created.Price, OriginalPrice: created.OriginalPrice, PriceTiers: created.PriceTiers,
		Currency: created.Currency, StartsAt: created.StartsAt, EndsAt: created.EndsAt,
		PerUserLimit: created.PerUserLimit, HoldSeconds: created.HoldSeconds,
		PurchaseToken: created.PurchaseToken, Eligibility: created.Eligibility, Limits: created.Limits,
		Challenge: created.Challenge, WaitingRoom: created.WaitingRoom, Test: created.Test, CreatedAt: created.CreatedAt,
	})
}

func (s *Server) handleAdminSale(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.svc.AdminSale(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, adminView(v))
}

func (s *Server) handlePreheat(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.svc.Preheat(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, statusBody{Status: "preheated"})
}

// publicCache lets a CDN or browser absorb the countdown's refreshes: a
// second-old view is fine, the purchase itself is the check.
var publicCache = []string{"public, max-age=1"}

func (s *Server) handleSales(w http.ResponseWriter, r *http.Request) {
	if err := s.limitRead(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	// hotel and room_type list a room type's pools together: one sale per
	// pool (members only, a partner's guests), each with its own stock
	// and eligibility.
	q := r.URL.Query()
	hotel, roomType := q.Get("hotel"), q.Get("room_type")
	if len(hotel) > 200 || len(roomType) > 200 {
		s.writeError(w, r, flashsale.Errorf(flashsale.EInvalid, "hotel and room_type must be at most 200 characters"))
		return
	}
	vs, err := s.svc.Sales(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := struct {
		Sales []publicSaleJSON `json:"sales"`
	}{Sales: make([]publicSaleJSON, 0, len(vs))}
	for _, v := range vs {
		if (hotel == "" || v.Hotel == hotel) && (roomType == "" || v.RoomType == roomType) {
			out.Sales = append(out.Sales, publicView(v))
		}
	}
	w.Header()["Cache-Control"] = publicCache
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handlePublicSale(w http.ResponseWriter, r *http.Request) {
	if err := s.limitRead(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.svc.PublicSale(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header()["Cache-Control"] = publicCache
	writeJSON(w, http.StatusOK, publicView(v))
}
