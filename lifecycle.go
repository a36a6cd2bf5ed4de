package flashsale

import (
	"fmt"
	"slices"
	"time"
)

// The operator's side of a sale's life once it exists: edits, pause and
// resume, closing early, and rooms added or taken back per night. Each
// change bumps the sale's Revision and is recorded as a SaleChange in the
// same transaction, so instances that cache the sale notice it and the
// change log says who saw what when.

// Errors of the lifecycle.
var (
	// ErrPaused answers purchases and tokens of a paused sale.
	ErrPaused = &Error{EPaused, "the sale is paused; try again when it resumes"}
	// ErrStockInUse refuses taking away rooms that are held or sold.
	ErrStockInUse = &Error{EStockInUse, "only rooms that are neither held nor sold can be removed"}
	// ErrNotTestSale refuses deleting a sale that is not a test sale.
	ErrNotTestSale = &Error{EConflict, "only test sales (created with \"test\": true) can be deleted"}
)

// Change kinds, as recorded in a SaleChange.
const (
	ChangeEdit   = "edit"
	ChangePause  = "pause"
	ChangeResume = "resume"
	ChangeClose  = "close"
	ChangeStock  = "stock"
	ChangeRules  = "rules"
)

// SaleChange is one entry of a sale's change log.
type SaleChange struct {
	SaleID string    `json:"sale_id"`
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	// Revision is the sale's revision after the change.
	Revision int64 `json:"revision"`
	// Detail says what changed, for people: "title, ends_at" for an edit,
	// "2026-12-24 +5" for stock.
	Detail string `json:"detail"`
}

// SalePatch is an operator's edit of a sale: nil fields stay as they are.
// Before the start any field may change; after it only those the guests'
// purchases do not depend on (Apply says which).
type SalePatch struct {
	Title         *string
	Description   *string
	Hotel         *string
	RoomType      *string
	TimeZone      *string
	Nights        []Night // nil: unchanged
	Price         *int64
	OriginalPrice *int64
	PriceTiers    []PriceTier // nil: unchanged; empty: no tiers
	Currency      *string
	StartsAt      *time.Time
	EndsAt        *time.Time
	PerUserLimit  *int
	HoldSeconds   *int
	PurchaseToken *bool
	Eligibility   *Eligibility
	Limits        *SaleLimits
	Challenge     *Challenge
	// WaitingRoom: nil leaves it as it is; a pointer to nil turns it off
	// (JSON null), to a room sets that room.
	WaitingRoom **WaitingRoom
}

// Apply returns a copy of s with p applied and validated, and the names of
// the fields that changed. Once the sale has started at now, only title,
// description, ends_at and limits may change (ErrAlreadyStarted-coded
// error naming the field otherwise: stock, prices and rules are what the
// guests holding purchase tokens were promised), and ends_at may not move
// into the past (close the sale for that).
func (p *SalePatch) Apply(s *Sale, now time.Time) (*Sale, []string, error) {
	c := *s
	c.Nights = slices.Clone(s.Nights)
	c.PriceTiers = slices.Clone(s.PriceTiers)
	var changed []string
	started := !now.Before(s.StartsAt)
	set := func(name string, always bool, apply func() bool) error {
		if !apply() {
			return nil
		}
		if started && !always {
			return Errorf(EAlreadyStarted, "%s cannot change once the sale has started (only title, description, ends_at, limits and the waiting room's admit_per_second and admission_seconds can)", name)
		}
		changed = append(changed, name)
		return nil
	}
	fields := []struct {
		name   string
		always bool
		apply  func() bool
	}{
		{"title", true, func() bool { return patch(&c.Title, p.Title) }},
		{"description", true, func() bool { return patch(&c.Description, p.Description) }},
		{"hotel", false, func() bool { return patch(&c.Hotel, p.Hotel) }},
		{"room_type", false, func() bool { return patch(&c.RoomType, p.RoomType) }},
		{"time_zone", false, func() bool { return patch(&c.TimeZone, p.TimeZone) }},
		{"nights", false, func() bool {
			if p.Nights == nil || slices.Equal(p.Nights, c.Nights) {
				return false
			}
			c.Nights = slices.Clone(p.Nights)
			return true
		}},
		{"price", false, func() bool { return patch(&c.Price, p.Price) }},
		{"price_tiers", false, func() bool {
			if p.PriceTiers == nil || slices.Equal(p.PriceTiers, c.PriceTiers) {
				return false
			}
			c.PriceTiers = slices.Clone(p.PriceTiers)
			return true
		}},
		{"original_price", false, func() bool { return patch(&c.OriginalPrice, p.OriginalPrice) }},
		{"currency", false, func() bool { return patch(&c.Currency, p.Currency) }},
		{"starts_at", false, func() bool { return patchTime(&c.StartsAt, p.StartsAt) }},
		{"ends_at", true, func() bool { return patchTime(&c.EndsAt, p.EndsAt) }},
		{"per_user_limit", false, func() bool { return patch(&c.PerUserLimit, p.PerUserLimit) }},
		{"hold_seconds", false, func() bool { return patch(&c.HoldSeconds, p.HoldSeconds) }},
		{"purchase_token", false, func() bool { return patch(&c.PurchaseToken, p.PurchaseToken) }},
		{"eligibility", false, func() bool {
			if p.Eligibility == nil || eligibilityEqual(*p.Eligibility, c.Eligibility) {
				return false
			}
			c.Eligibility = *p.Eligibility
			c.Eligibility.Channels = slices.Clone(p.Eligibility.Channels)
			return true
		}},
		{"limits", true, func() bool {
			if p.Limits == nil || p.Limits.equal(c.Limits) {
				return false
			}
			c.Limits = *p.Limits
			return true
		}},
		{"challenge", false, func() bool { return patch(&c.Challenge, p.Challenge) }},
		// A live queue's pace may change (an operator slows admissions
		// while the database lags, or hurries them when holds are paid
		// fast), and its admissions may be paused and resumed; whether
		// there is one, and when it opens, may not.
		{"waiting_room", true, func() bool {
			if p.WaitingRoom == nil || *p.WaitingRoom == nil || c.WaitingRoom == nil ||
				(*p.WaitingRoom).PrequeueMinutes != c.WaitingRoom.PrequeueMinutes || waitingRoomEqual(*p.WaitingRoom, c.WaitingRoom) {
				return false
			}
			c.WaitingRoom = new(**p.WaitingRoom)
			return true
		}},
		{"waiting_room", false, func() bool {
			if p.WaitingRoom == nil || waitingRoomEqual(*p.WaitingRoom, c.WaitingRoom) {
				return false
			}
			c.WaitingRoom = nil
			if w := *p.WaitingRoom; w != nil {
				c.WaitingRoom = new(*w) // the sale's own, not the patch's
			}
			return true
		}},
	}
	for _, f := range fields {
		if err := set(f.name, f.always, f.apply); err != nil {
			return nil, nil, err
		}
	}
	if started && slices.Contains(changed, "ends_at") && !c.EndsAt.After(now) {
		return nil, nil, Errorf(EInvalid, "ends_at must be in the future; close the sale to end it now")
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	return &c, changed, nil
}

// patch sets *dst to *v when v is given and differs, reporting whether it did.
func patch[T comparable](dst *T, v *T) bool {
	if v == nil || *v == *dst {
		return false
	}
	*dst = *v
	return true
}

func patchTime(dst *time.Time, v *time.Time) bool {
	if v == nil || v.Equal(*dst) {
		return false
	}
	*dst = v.UTC().Truncate(time.Millisecond)
	return true
}

func eligibilityEqual(a, b Eligibility) bool {
	return a.MinTier == b.MinTier && a.MinStays30d == b.MinStays30d && slices.Equal(a.Channels, b.Channels)
}

func waitingRoomEqual(a, b *WaitingRoom) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func (l SaleLimits) equal(o SaleLimits) bool {
	eq := func(a, b *Rate) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return eq(l.PerSale, o.PerSale) && eq(l.PerUser, o.PerUser) && eq(l.PerIP, o.PerIP)
}

// StockDelta is a change of one night's rooms: positive adds rooms,
// negative takes unsold, unheld ones away.
type StockDelta struct {
	Date string
	// Time names a slot sale's unit on Date (its start, "19:00"); "" for
	// a stay's night.
	Time  string
	Delta int
}

// Validate checks a delta's shape; whether the rooms exist to take is the
// store's and the engine's to say.
func (d StockDelta) Validate() error {
	if _, err := time.Parse(DateLayout, d.Date); err != nil {
		return Errorf(EInvalid, "the night must be a date like 2026-12-24")
	}
	if d.Time != "" {
		if _, err := time.Parse("15:04", d.Time); err != nil {
			return Errorf(EInvalid, "time must be a slot's start like 19:00")
		}
	}
	if d.Delta == 0 || d.Delta < -MaxStock || d.Delta > MaxStock {
		return Errorf(EInvalid, "delta must be a non-zero number of rooms between -%d and %d", MaxStock, MaxStock)
	}
	return nil
}

// String is the change log's detail of a delta.
func (d StockDelta) String() string {
	if d.Time != "" {
		return fmt.Sprintf("%sT%s %+d", d.Date, d.Time, d.Delta)
	}
	return fmt.Sprintf("%s %+d", d.Date, d.Delta)
}

// SaleQuery selects sales for the operators' list, newest first: IDs are
// time-ordered, so Before (the previous page's last ID) is the cursor.
type SaleQuery struct {
	// Status, when set, keeps the sales in it at Now. The store cannot
	// tell active from sold_out (that is the engine's figure), so for
	// either it returns both and the caller filters.
	Status SaleStatus
	Hotel  string
	Before string
	Limit  int
	Now    time.Time
}

// OrderQuery selects a sale's orders, newest first, with Before (the
// previous page's last order ID) as the cursor.
type OrderQuery struct {
	Status OrderStatus // "": every status
	Before string
	Limit  int
}

// Page bounds for the admin lists.
const (
	PageDefault = 50
	PageMax     = 1000
)
