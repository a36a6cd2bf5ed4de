package flashsale

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sync/atomic"
	"time"
	_ "time/tzdata" // a hotel's time zone is known wherever the binary runs (a container may have no zoneinfo)
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// Defaults for a sale's optional fields.
const (
	PerUserLimitDefault = 1
	HoldSecondsDefault  = 30
	// MaxNights bounds a sale's nights so one purchase's work stays small.
	MaxNights = 366
	// MaxStock bounds one night's stock.
	MaxStock = 1_000_000
)

// DateLayout is the format of a night's date: a civil date, no time zone.
const DateLayout = "2006-01-02"

// Sale sells one room type of one hotel for one or more nights, each night
// with its own stock. Prices are in minor units per room-night.
type Sale struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Hotel       string `json:"hotel"`
	RoomType    string `json:"room_type"`
	// Kind is what the sale's units are (kind.go): a stay's nights (the
	// default, ""), or a venue's time slots.
	Kind Kind `json:"kind,omitempty"`
	// TimeZone is the hotel's, an IANA name (Asia/Shanghai): a night's date
	// is a civil date there, so the date rules (CheckNights) judge it
	// there. Empty: unknown, and they allow a day's slack instead.
	TimeZone      string  `json:"time_zone,omitempty"`
	Nights        []Night `json:"nights"`
	Price         int64   `json:"price"`
	OriginalPrice int64   `json:"original_price"`
	// PriceTiers are stepped prices: buying at least a tier's Rooms, each
	// room-night costs its Price ("one room 50 off, two rooms 120 off").
	PriceTiers    []PriceTier `json:"price_tiers,omitempty"`
	Currency      string      `json:"currency"`
	StartsAt      time.Time   `json:"starts_at"`
	EndsAt        time.Time   `json:"ends_at"`
	PerUserLimit  int         `json:"per_user_limit"`
	HoldSeconds   int         `json:"hold_seconds"`
	PurchaseToken bool        `json:"purchase_token"`
	Eligibility   Eligibility `json:"eligibility"`
	// Limits override the instance's purchase limits for this sale.
	Limits SaleLimits `json:"limits,omitzero"`
	// Challenge, when its difficulty is set, makes the token endpoint ask
	// for a proof of work first (it needs PurchaseToken).
	Challenge Challenge `json:"challenge,omitzero"`
	// WaitingRoom, when set, puts the sale behind a virtual waiting room
	// (issue 24); nil: none, guests buy as they arrive.
	WaitingRoom *WaitingRoom `json:"waiting_room,omitempty"`
	// Test marks a load test's sale (flashsale bench): hidden from the
	// public list, counted in metrics under sale="test" (never its ID) and
	// marked in events (a header), and deletable with its orders. Set at
	// creation only.
	Test bool `json:"test,omitempty"`
	// Paused stops new tokens and purchases until the operator resumes
	// the sale; holds and payments go on.
	Paused bool `json:"paused"`
	// Revision counts the sale's changes since it was created (0), so an
	// instance that caches the sale can tell it changed.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
}

// WaitingRoom is a sale's waiting room: guests join a queue and are
// admitted a few at a time, so a sale of a hundred rooms is not won by the
// fastest refresher among half a million.
type WaitingRoom struct {
	// PrequeueMinutes is how long before StartsAt guests may join. Those
	// who join in that time are shuffled once at the start, so arriving
	// first buys no better place than arriving a minute before the start:
	// nobody needs to camp, and a script gains nothing by being early.
	PrequeueMinutes int `json:"prequeue_minutes"`
	// AdmitPerSecond is how many guests are admitted a second. 0 leaves it
	// to the sale: a rate derived from the stock and the hold window, so
	// the queue moves as fast as rooms can be bought and paid for.
	AdmitPerSecond float64 `json:"admit_per_second"`
	// AdmissionSeconds is how long an admitted guest has to take a
	// purchase token: after that the admission lapses, and the room it
	// stood for goes to the next in line instead of waiting for a guest
	// who walked away.
	AdmissionSeconds int `json:"admission_seconds"`
	// Paused stops admissions while the sale goes on: those admitted may
	// still buy, nobody new is let in (an operator holding the queue while
	// the database catches up, say). Pausing the sale stops both.
	Paused bool `json:"paused,omitempty"`
}

// Bounds of a waiting room.
const (
	// MaxPrequeueMinutes is a day: a queue open longer only gathers
	// guests who will have stopped watching by the start.
	MaxPrequeueMinutes = 24 * 60
	// MinAdmitPerSecond and MaxAdmitPerSecond bound a set rate: slower
	// than one guest in ten seconds is a stalled queue, faster than the
	// engine sells is no queue.
	MinAdmitPerSecond = 0.1
	MaxAdmitPerSecond = 100_000
	// MinAdmissionSeconds is time enough to tap "buy" (and solve a
	// challenge); MaxAdmissionSeconds an hour, after which the place is
	// better given to someone still there.
	MinAdmissionSeconds = 10
	MaxAdmissionSeconds = 3600
)

// validate checks the waiting room's settings, naming the field.
func (w *WaitingRoom) validate() error {
	r := w.AdmitPerSecond
	switch {
	case w.PrequeueMinutes < 0 || w.PrequeueMinutes > MaxPrequeueMinutes:
		return Errorf(EInvalid, "waiting_room.prequeue_minutes must be between 0 and %d (a day)", MaxPrequeueMinutes)
	case math.IsNaN(r) || math.IsInf(r, 0) || r != 0 && (r < MinAdmitPerSecond || r > MaxAdmitPerSecond):
		return Errorf(EInvalid, "waiting_room.admit_per_second must be 0 (derived from the stock and the hold window) or between %g and %d",
			MinAdmitPerSecond, MaxAdmitPerSecond)
	case w.AdmissionSeconds == 0:
		return Errorf(EInvalid, "waiting_room.admission_seconds is required (%d to %d): how long an admitted guest has to take a purchase token",
			MinAdmissionSeconds, MaxAdmissionSeconds)
	case w.AdmissionSeconds < MinAdmissionSeconds || w.AdmissionSeconds > MaxAdmissionSeconds:
		return Errorf(EInvalid, "waiting_room.admission_seconds must be between %d and %d", MinAdmissionSeconds, MaxAdmissionSeconds)
	}
	return nil
}

// PriceTier is the per-room-night price when buying at least Rooms rooms.
type PriceTier struct {
	Rooms int   `json:"rooms"`
	Price int64 `json:"price"`
}

// MaxPriceTiers bounds a sale's price tiers.
const MaxPriceTiers = 10

// UnitPrice is the per-room-night price of a purchase of rooms rooms: the
// tier with the most rooms at or below it, else the sale's price.
func (s *Sale) UnitPrice(rooms int) int64 {
	p := s.Price
	for _, t := range s.PriceTiers {
		if rooms >= t.Rooms {
			p = t.Price
		}
	}
	return p
}

// PriceSchedule is what a purchase token signs of the price: the price
// itself for a sale without tiers (as before tiers existed, so tokens
// issued then stay valid), else a 64-bit digest of the price and every
// tier with the sign bit set (prices are at most 2^40, so the two never
// meet). A token bought at one schedule is refused at another.
func (s *Sale) PriceSchedule() int64 {
	if len(s.PriceTiers) == 0 {
		return s.Price
	}
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) { binary.BigEndian.PutUint64(b[:], v); h.Write(b[:]) }
	put(uint64(s.Price))
	for _, t := range s.PriceTiers {
		put(uint64(t.Rooms))
		put(uint64(t.Price))
	}
	return int64(h.Sum64() | 1<<63)
}

// validatePriceTiers checks tiers go up in rooms (2 to the per-user
// limit: a tier nobody may buy is a mistake) and down in price, each below
// the sale's price.
func (s *Sale) validatePriceTiers() error {
	if len(s.PriceTiers) > MaxPriceTiers {
		return Errorf(EInvalid, "price_tiers may list at most %d tiers", MaxPriceTiers)
	}
	rooms, price := 1, s.Price
	for i, t := range s.PriceTiers {
		switch {
		case t.Rooms <= rooms || t.Rooms > s.PerUserLimit:
			return Errorf(EInvalid, "price_tiers[%d].rooms must be more than the tier before (at least 2) and at most per_user_limit (%d)", i, s.PerUserLimit)
		case t.Price <= 0 || t.Price >= price:
			return Errorf(EInvalid, "price_tiers[%d].price must be a positive amount below the price before it (%d)", i, price)
		}
		rooms, price = t.Rooms, t.Price
	}
	return nil
}

// Night is one date of a sale and the rooms on sale for it.
type Night struct {
	Date  string `json:"date"`
	Stock int    `json:"stock"`
	// Time is a slot's start on Date, "19:00" in the venue's time zone,
	// for a sale of kind slot; "" for a stay's night.
	Time string `json:"time,omitempty"`
	// Minutes is a slot's length (a spa appointment's), 0 when the slot
	// names none (a restaurant's service).
	Minutes int `json:"minutes,omitempty"`
	// StayRules are the night's restrictions (stay.go), flattened into
	// the night's JSON.
	StayRules
}

// NightStock is a night's counters in the database. Available is what is
// neither held nor sold.
type NightStock struct {
	Date string `json:"date"`
	// Time is a slot's start (Night.Time) where a view shows it; the
	// stores' counters leave it empty.
	Time      string `json:"time,omitempty"`
	Stock     int    `json:"stock"`
	Available int    `json:"available"`
	Held      int    `json:"held"`
	Sold      int    `json:"sold"`
}

// Challenge is a sale's proof-of-work requirement: a guest solves a puzzle
// of Difficulty leading zero bits before a purchase token is issued, so a
// script sending a thousand requests pays a thousand times.
type Challenge struct {
	Difficulty int `json:"difficulty,omitempty"`
}

// MaxDifficulty bounds a challenge: each bit doubles a guest's work.
const MaxDifficulty = 32

// Eligibility restricts who may buy. A sale with no rule asks nothing of
// the user, so it costs no user-service call.
type Eligibility struct {
	MinTier Tier `json:"min_tier,omitempty"`
	// MinStays30d is the nights the guest must have stayed in the last 30
	// days (the source's "checked in at least 2 nights in 30 days").
	MinStays30d int `json:"min_stays_30d,omitzero"`
	// Channels, when set, reserves the sale for guests who came through
	// one of these partners: a pool only an OTA's guests may buy.
	Channels []string `json:"channels,omitempty"`
}

// Limits bound the rules of one sale.
const (
	MaxStays30d   = 30
	MaxChannels   = 16
	MaxChannelLen = 64
)

// Needs returns the facts e's rules ask about.
func (e *Eligibility) Needs() Fact {
	var f Fact
	if e.MinTier != "" {
		f |= FactTier
	}
	if e.MinStays30d > 0 {
		f |= FactStays30d
	}
	if len(e.Channels) > 0 {
		f |= FactChannel
	}
	return f
}

// Check returns nil when u meets every rule, else the error of the first
// rule u fails (min_tier, then min_stays_30d, then channels), so the
// guest is told which one.
func (e *Eligibility) Check(u User) error {
	if e.MinTier != "" && u.Tier.Rank() < e.MinTier.Rank() {
		return ErrNotEligible
	}
	if e.MinStays30d > 0 && u.Stays30d < e.MinStays30d {
		return ErrNotEligibleStays
	}
	if len(e.Channels) > 0 && (u.Channel == "" || !slices.Contains(e.Channels, u.Channel)) {
		return ErrNotEligibleChannel
	}
	return nil
}

// validChannel reports whether c is a usable channel name: 1 to
// MaxChannelLen of [a-z0-9._-], so it is safe in a comma-joined column.
func validChannel(c string) bool {
	if c == "" || len(c) > MaxChannelLen {
		return false
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		if !('a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}

func (e *Eligibility) validate() error {
	switch {
	case e.MinTier != "" && e.MinTier.Rank() == 0:
		return Errorf(EInvalid, "eligibility.min_tier must be one of basic, silver, gold, platinum")
	case e.MinStays30d < 0 || e.MinStays30d > MaxStays30d:
		return Errorf(EInvalid, "eligibility.min_stays_30d must be between 0 and %d", MaxStays30d)
	case len(e.Channels) > MaxChannels:
		return Errorf(EInvalid, "eligibility.channels may list at most %d channels", MaxChannels)
	}
	for i, c := range e.Channels {
		if !validChannel(c) {
			return Errorf(EInvalid, "eligibility.channels[%d] must be 1 to %d characters of a-z, 0-9 and . _ -", i, MaxChannelLen)
		}
		if slices.Contains(e.Channels[:i], c) {
			return Errorf(EInvalid, "eligibility.channels[%d] repeats %q", i, c)
		}
	}
	return nil
}

// SaleLimits override the instance's purchase limits for one sale. A nil
// field keeps the instance's default; an Off Rate ("off") turns that limit
// off for this sale. Written in JSON as the configuration writes rates:
// {"per_sale":"300/s,600","per_user":"5/s,10","per_ip":"off"}.
type SaleLimits struct {
	PerSale *Rate `json:"per_sale,omitempty"`
	PerUser *Rate `json:"per_user,omitempty"`
	PerIP   *Rate `json:"per_ip,omitempty"`
}

// validate checks each override is a rate ParseRate could have read.
func (l *SaleLimits) validate() error {
	for _, r := range []struct {
		name string
		r    *Rate
	}{{"per_sale", l.PerSale}, {"per_user", l.PerUser}, {"per_ip", l.PerIP}} {
		if r.r == nil || *r.r == (Rate{}) {
			continue
		}
		if _, unit := rateUnitOf(r.r.Per); !unit || r.r.N < 1 || r.r.N > MaxRate || r.r.Burst < 1 || r.r.Burst > MaxRate {
			return Errorf(EInvalid, "limits.%s must be N/s, N/m or N/h with N from 1 to %d, optionally ,BURST, or off", r.name, MaxRate)
		}
	}
	return nil
}

// Tier is a membership tier carried in the user's JWT. Tiers are ordered:
// basic < silver < gold < platinum. The empty tier is below basic.
type Tier string

// The known tiers, lowest first.
const (
	TierBasic    Tier = "basic"
	TierSilver   Tier = "silver"
	TierGold     Tier = "gold"
	TierPlatinum Tier = "platinum"
)

// Rank orders tiers; unknown and empty tiers rank 0.
func (t Tier) Rank() int {
	switch t {
	case TierBasic:
		return 1
	case TierSilver:
		return 2
	case TierGold:
		return 3
	case TierPlatinum:
		return 4
	}
	return 0
}

// SaleStatus is the public state of a sale at a moment.
type SaleStatus string

// Sale statuses.
const (
	SaleUpcoming SaleStatus = "upcoming"
	SaleActive   SaleStatus = "active"
	SaleSoldOut  SaleStatus = "sold_out"
	SaleEnded    SaleStatus = "ended"
	SalePaused   SaleStatus = "paused"
)

// Status returns the sale's state at now given the units left per night.
func (s *Sale) Status(now time.Time, available []int) SaleStatus {
	switch {
	case now.Before(s.StartsAt):
		return SaleUpcoming
	case !now.Before(s.EndsAt):
		return SaleEnded
	case s.Paused:
		return SalePaused
	}
	for _, n := range available {
		if n > 0 {
			return SaleActive
		}
	}
	return SaleSoldOut
}

// Open returns ErrNotStarted, ErrEnded or ErrPaused when purchases are not
// accepted at now.
func (s *Sale) Open(now time.Time) error {
	if now.Before(s.StartsAt) {
		return ErrNotStarted
	}
	if !now.Before(s.EndsAt) {
		return ErrEnded
	}
	if s.Paused {
		return ErrPaused
	}
	return nil
}

// HoldDuration is the payment window.
func (s *Sale) HoldDuration() time.Duration { return time.Duration(s.HoldSeconds) * time.Second }

// Validate checks a sale's fields, returning an EInvalid *Error naming the first problem.
func (s *Sale) Validate() error {
	switch {
	case s.Title == "" || len(s.Title) > 200:
		return Errorf(EInvalid, "title is required (at most 200 characters)")
	case len(s.Description) > 2000:
		return Errorf(EInvalid, "description must be at most 2000 characters")
	case s.Hotel == "" || len(s.Hotel) > 200:
		return Errorf(EInvalid, "hotel is required (at most 200 characters)")
	case s.RoomType == "" || len(s.RoomType) > 200:
		return Errorf(EInvalid, "room_type is required (at most 200 characters)")
	case len(s.Nights) == 0 || len(s.Nights) > MaxNights:
		return Errorf(EInvalid, "nights must list 1 to %d nights", MaxNights)
	case s.Price <= 0 || s.Price > 1<<40:
		return Errorf(EInvalid, "price must be a positive amount in minor units")
	case s.OriginalPrice < s.Price || s.OriginalPrice > 1<<40:
		return Errorf(EInvalid, "original_price is required and must be at least price: it is the price before the discount, which the page shows struck through")
	case len(s.Currency) != 3 || !isUpper(s.Currency) || !isoCurrency(s.Currency):
		return Errorf(EInvalid, "currency must be an ISO 4217 code such as CNY, JPY or KWD")
	case s.StartsAt.IsZero() || s.EndsAt.IsZero() || !s.EndsAt.After(s.StartsAt):
		return Errorf(EInvalid, "starts_at and ends_at are required and ends_at must be after starts_at")
	case !saneTime(s.StartsAt) || !saneTime(s.EndsAt):
		return Errorf(EInvalid, "starts_at and ends_at must be in the years %d to %d", minYear, maxYear)
	case s.PerUserLimit < 1 || s.PerUserLimit > 1000:
		return Errorf(EInvalid, "per_user_limit must be between 1 and 1000")
	case s.HoldSeconds < 1 || s.HoldSeconds > 86400:
		return Errorf(EInvalid, "hold_seconds must be between 1 and 86400")
	case s.Challenge.Difficulty < 0 || s.Challenge.Difficulty > MaxDifficulty:
		return Errorf(EInvalid, "challenge.difficulty must be between 0 and %d", MaxDifficulty)
	case s.Challenge.Difficulty > 0 && !s.PurchaseToken:
		return Errorf(EInvalid, "challenge needs purchase_token: the solved challenge is what the token endpoint asks for")
	}
	if _, err := s.Location(); err != nil {
		return err
	}
	for _, f := range [...]struct {
		name, value string
		lines       bool
	}{{"title", s.Title, false}, {"hotel", s.Hotel, false}, {"room_type", s.RoomType, false}, {"description", s.Description, true}} {
		if err := checkText(f.name, f.value, f.lines); err != nil {
			return err
		}
	}
	if err := s.validatePriceTiers(); err != nil {
		return err
	}
	if err := s.Eligibility.validate(); err != nil {
		return err
	}
	if err := s.Limits.validate(); err != nil {
		return err
	}
	if s.WaitingRoom != nil {
		if err := s.WaitingRoom.validate(); err != nil {
			return err
		}
	}
	switch s.KindOf() {
	case KindStay:
	case KindSlot, KindSeats:
		return s.validateSlots()
	default:
		return Errorf(EInvalid, "kind must be %s, %s or %s", KindStay, KindSlot, KindSeats)
	}
	var prev time.Time
	for i, n := range s.Nights {
		if n.Time != "" || n.Minutes != 0 {
			return Errorf(EInvalid, "nights[%d]: time and minutes are a slot's (kind %s); a stay's night has neither", i, KindSlot)
		}
		d, err := time.Parse(DateLayout, n.Date)
		if err != nil {
			return Errorf(EInvalid, "nights[%d].date must be a date like 2026-12-24", i)
		}
		if !saneTime(d) {
			return Errorf(EInvalid, "nights[%d].date must be in the years %d to %d", i, minYear, maxYear)
		}
		if i > 0 && !d.After(prev) {
			return Errorf(EInvalid, "nights must be in increasing date order without repeats")
		}
		if n.Stock < 0 || n.Stock > MaxStock {
			return Errorf(EInvalid, "nights[%d].stock must be between 0 and %d", i, MaxStock)
		}
		prev = d
	}
	return s.validateStayRules()
}

// dateSlack is the time-zone slack of the date rules. A night's date is the
// hotel's civil date and a sale knows no time zone, so a night counts as
// passed (or as before the opening) only once it is so everywhere on
// Earth, UTC-12 to UTC+14: a day's slack covers it.
const dateSlack = 24 * time.Hour

// EarliestNight is the first night date that can still be stayed at t:
// t's UTC date, less a day of slack. ISO dates order as strings.
func EarliestNight(t time.Time) string { return t.UTC().Add(-dateSlack).Format(DateLayout) }

// CheckNights refuses nights no guest could ever stay: one that has passed
// at now, or one before the sale opens at StartsAt (a console default or a
// wrong year does that). Validate cannot, since it knows no clock; the
// funnel checks this on create, and on an edit of the nights, starts_at or
// time_zone. Both are judged as NightPassed judges; a slot sale's, as
// SlotStarted judges.
func (s *Sale) CheckNights(now time.Time) error {
	if _, err := s.Location(); err != nil {
		return err
	}
	if s.Timed() {
		return s.checkSlots(now)
	}
	for i, n := range s.Nights {
		switch {
		case s.NightPassed(n.Date, now):
			return Errorf(EInvalid, "nights[%d].date %s has passed%s", i, n.Date, s.inZone())
		case s.NightPassed(n.Date, s.StartsAt):
			return Errorf(EInvalid, "nights[%d].date %s is before the sale opens (starts_at %s%s): no guest could stay it",
				i, n.Date, s.StartsAt.UTC().Format(time.RFC3339), s.inZone())
		}
	}
	return nil
}

// NightPassed reports whether the night of date has passed at now: once
// its date has on the hotel's calendar when the sale names its time zone,
// else once it has everywhere on Earth (Passed). It is on every purchase's
// path, sold-out answers included, so once the zone is known it allocates
// nothing.
func (s *Sale) NightPassed(date string, now time.Time) bool {
	if s.TimeZone != "" {
		if loc, err := s.Location(); err == nil {
			var buf [len(DateLayout)]byte
			return date < string(now.In(loc).AppendFormat(buf[:0], DateLayout))
		}
	}
	return Passed(date, now)
}

// CheckCheckIn refuses a stay whose first night has passed at now (as
// NightPassed judges). A sale that runs for days keeps selling its later
// nights as the early ones pass.
func (s *Sale) CheckCheckIn(checkIn string, now time.Time) error {
	if !s.NightPassed(checkIn, now) {
		return nil
	}
	earliest := EarliestNight(now)
	if loc, err := s.Location(); err == nil && loc != nil {
		earliest = now.In(loc).Format(DateLayout)
	}
	return Errorf(EInvalid, "check_in %s has passed%s: choose a night from %s on", checkIn, s.inZone(), earliest)
}

// MaxTimeZone bounds the length of a time zone's name.
const MaxTimeZone = 64

// zones are the time zones sales have named, loaded once each: loading one
// reads and parses the zone's data, and the purchase path asks for it on
// every request. Copied on write, so a lookup is one atomic load.
var zones atomic.Pointer[map[string]*time.Location]

// Location is the hotel's time zone, nil when the sale names none, or an
// EInvalid error for a name the IANA database does not know. "Local" is
// refused: it would be whatever zone the server runs in.
func (s *Sale) Location() (*time.Location, error) {
	if s.TimeZone == "" {
		return nil, nil
	}
	if m := zones.Load(); m != nil {
		if loc, ok := (*m)[s.TimeZone]; ok {
			return loc, nil
		}
	}
	if len(s.TimeZone) > MaxTimeZone || s.TimeZone == "Local" {
		return nil, Errorf(EInvalid, "time_zone must be an IANA time zone such as Asia/Shanghai or Europe/Paris")
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, Errorf(EInvalid, "time_zone %q is not an IANA time zone (such as Asia/Shanghai or Europe/Paris)", s.TimeZone)
	}
	for {
		old := zones.Load()
		next := map[string]*time.Location{s.TimeZone: loc}
		if old != nil {
			for k, v := range *old {
				next[k] = v
			}
		}
		if zones.CompareAndSwap(old, &next) {
			return loc, nil
		}
	}
}

// inZone says, in an error, where the date rules judged.
func (s *Sale) inZone() string {
	if s.TimeZone == "" {
		return ""
	}
	return " in " + s.TimeZone
}

// Passed reports whether the night of date has passed at now, everywhere
// on Earth. It is on every purchase's path, sold-out answers included, so
// it allocates nothing.
func Passed(date string, now time.Time) bool {
	var buf [len(DateLayout)]byte
	return date < string(now.UTC().Add(-dateSlack).AppendFormat(buf[:0], DateLayout))
}

// Stay resolves a requested stay to the index of its first night in
// s.Nights. The stay is the half-open range [checkIn, checkIn+nights): every
// night in it must be on sale, or the request is invalid.
func (s *Sale) Stay(checkIn string, nights int) (int, error) {
	if nights < 1 || nights > len(s.Nights) {
		return 0, Errorf(EInvalid, "nights must be between 1 and %d", len(s.Nights))
	}
	first := -1
	for i, n := range s.Nights {
		if n.Date == checkIn {
			first = i
			break
		}
	}
	if first < 0 {
		if _, err := time.Parse(DateLayout, checkIn); err != nil {
			return 0, Errorf(EInvalid, "check_in must be a date like 2026-12-24")
		}
		return 0, Errorf(EInvalid, "check_in %s is not a night of this sale", checkIn)
	}
	if first+nights > len(s.Nights) {
		return 0, Errorf(EInvalid, "the stay runs past the last night of this sale")
	}
	if nights == 1 {
		return first, nil // the common stay; parsing the date costs a sold-out answer a tenth of its handler
	}
	d, _ := time.Parse(DateLayout, checkIn)
	for i := 1; i < nights; i++ {
		if s.Nights[first+i].Date != d.AddDate(0, 0, i).Format(DateLayout) {
			return 0, Errorf(EInvalid, "the stay includes a night that is not on sale")
		}
	}
	return first, nil
}

// The years a sale's dates may fall in: 0000-01-01, 9999-12-31 and a
// start in 1970 were all accepted, and sold.
const (
	minYear = 2000
	maxYear = 2099
)

func saneTime(t time.Time) bool { return t.Year() >= minYear && t.Year() <= maxYear }

// checkText refuses what a guest's page or an operator's terminal would
// render wrongly or deceptively: invalid UTF-8, control characters (NUL,
// ESC, CR/LF outside a description's lines) and the bidirectional
// overrides and isolates (U+202A-U+202E, U+2066-U+2069) that make
// "txt.exe" read as "exe.txt".
func checkText(field, v string, lines bool) error {
	if !utf8.ValidString(v) {
		return Errorf(EInvalid, "%s must be UTF-8 text", field)
	}
	for _, r := range v {
		switch {
		case lines && (r == '\n' || r == '\t'):
		case unicode.IsControl(r):
			return Errorf(EInvalid, "%s must not contain control characters (U+%04X)", field, r)
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
			return Errorf(EInvalid, "%s must not contain bidirectional override characters (U+%04X)", field, r)
		}
	}
	return nil
}

// isoCurrency reports whether code is a currency of ISO 4217 (CLDR's
// data, through golang.org/x/text): ZZZ is not, and neither are XXX (no
// currency) and XTS (testing), which x/text knows as codes.
func isoCurrency(code string) bool {
	_, err := currency.ParseISO(code)
	return err == nil && code != "XXX" && code != "XTS"
}

func isUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// String identifies a sale in logs.
func (s *Sale) String() string { return fmt.Sprintf("sale %s (%s, %s)", s.ID, s.Hotel, s.RoomType) }
