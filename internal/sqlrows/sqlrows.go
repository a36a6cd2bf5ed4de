// Package sqlrows holds what every SQL store does alike. Each store package
// still writes out its own SQL (the dialects differ: placeholders, date
// formatting, locking, how a unique key refuses a row); what is shared is
// how a row that the query put in the documented column order becomes a
// Sale, a NightStock or an Order, and the steps of FailOrder around each
// store's own insert.
package sqlrows

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// Rows is what database/sql's *sql.Rows and pgx.Rows both offer.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Sales groups sale-night rows into sales. Each row is a sale's columns
// (id, title, hotel, room_type, price, original_price, currency,
// starts_at_ms, ends_at_ms, per_user_limit, hold_seconds, purchase_token,
// min_tier, created_at_ms, then the Rules columns, then description,
// paused, revision) followed by one unit's (date as YYYY-MM-DD, stock,
// start_time, minutes), ordered by sale, then unit (idx).
func Sales(rows Rows) ([]*flashsale.Sale, error) {
	sales := []*flashsale.Sale{}
	// The rules of the last sale, whose nights are read until the next
	// sale's row or the end.
	var last Rules
	for rows.Next() {
		var (
			sale                        flashsale.Sale
			startsAt, endsAt, createdAt int64
			minTier                     string
			rules                       Rules
			night                       flashsale.Night
		)
		dest := append([]any{&sale.ID, &sale.Title, &sale.Hotel, &sale.RoomType, &sale.Price,
			&sale.OriginalPrice, &sale.Currency, &startsAt, &endsAt, &sale.PerUserLimit,
			&sale.HoldSeconds, &sale.PurchaseToken, &minTier, &createdAt}, rules.Dest()...)
		dest = append(dest, &sale.Description, &sale.Paused, &sale.Revision)
		if err := rows.Scan(append(dest, &night.Date, &night.Stock, &night.Time, &night.Minutes)...); err != nil {
			return nil, err
		}
		if len(sales) == 0 || sales[len(sales)-1].ID != sale.ID {
			if err := applyLast(sales, &last); err != nil {
				return nil, err
			}
			sale.StartsAt, sale.EndsAt, sale.CreatedAt = FromMS(startsAt), FromMS(endsAt), FromMS(createdAt)
			sale.Eligibility.MinTier = flashsale.Tier(minTier)
			if err := rules.Apply(&sale); err != nil {
				return nil, fmt.Errorf("sale=%s: %w", sale.ID, err)
			}
			sales, last = append(sales, &sale), rules
		}
		s := sales[len(sales)-1]
		s.Nights = append(s.Nights, night)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := applyLast(sales, &last); err != nil {
		return nil, err
	}
	return sales, nil
}

// applyLast gives the last of sales, whose nights are all read, the stay
// rules of r.
func applyLast(sales []*flashsale.Sale, r *Rules) error {
	if len(sales) == 0 {
		return nil
	}
	s := sales[len(sales)-1]
	if err := r.ApplyNights(s); err != nil {
		return fmt.Errorf("sale=%s: %w", s.ID, err)
	}
	return nil
}

// Rules are a sale's rule columns as every store keeps them, in this
// order: min_stays_30d, channels (comma-joined), limit_per_sale,
// limit_per_user, limit_per_ip (a rate as ParseRate reads it, ” for the
// instance's default), challenge_difficulty, price_tiers
// ("rooms:price,...", ” for none), test, time_zone (” for none),
// waiting_room (the WaitingRoom's JSON, ” for none), stay_rules (the
// nights' StayRules, ” for none: see stayRules), kind (the Kind as given,
// ” for a sale from before kinds, which is a stay).
type Rules struct {
	MinStays30d             int
	Channels                string
	PerSale, PerUser, PerIP string
	Difficulty              int
	PriceTiers              string
	Test                    bool
	TimeZone                string
	WaitingRoom             string
	StayRules               string
	Kind                    string
}

// RulesOf is what a store writes for sale's rules, or an error for rules
// no store can keep (a waiting room's rate that is not a number JSON can
// write, which Validate refuses).
func RulesOf(sale *flashsale.Sale) (Rules, error) {
	rate := func(r *flashsale.Rate) string {
		if r == nil {
			return ""
		}
		return r.String()
	}
	l := sale.Limits
	room, err := waitingRoom(sale.WaitingRoom)
	if err != nil {
		return Rules{}, err
	}
	stay, err := stayRules(sale.Nights)
	if err != nil {
		return Rules{}, err
	}
	return Rules{
		MinStays30d: sale.Eligibility.MinStays30d,
		Channels:    strings.Join(sale.Eligibility.Channels, ","),
		PerSale:     rate(l.PerSale), PerUser: rate(l.PerUser), PerIP: rate(l.PerIP),
		Difficulty:  sale.Challenge.Difficulty,
		PriceTiers:  priceTiers(sale.PriceTiers),
		Test:        sale.Test,
		TimeZone:    sale.TimeZone,
		WaitingRoom: room,
		StayRules:   stay,
		Kind:        string(sale.Kind),
	}, nil
}

// stayRules are the nights' stay rules as the stores keep them: a JSON
// object of the nights that have any, keyed by date, so the rules never
// shift onto another night whatever becomes of the nights, and a rule
// added later reads back as its zero from rules stored before it; ""
// when no night has one, as every sale from before the rules has.
func stayRules(nights []flashsale.Night) (string, error) {
	var byDate map[string]flashsale.StayRules
	for _, n := range nights {
		if !n.StayRules.Set() {
			continue
		}
		if byDate == nil {
			byDate = make(map[string]flashsale.StayRules)
		}
		byDate[n.Date] = n.StayRules
	}
	if byDate == nil {
		return "", nil
	}
	b, err := json.Marshal(byDate) // keys sorted: one sale, one text
	if err != nil {
		return "", fmt.Errorf("stay rules: %w", err)
	}
	return string(b), nil
}

// ApplyNights sets the stay rules of sale's nights from what was read; the
// stores call it once a sale's nights are all read, which they read after
// the sale's row (Apply). A night the column does not name has none. A date that is no
// night of the sale is ignored, not an error: the stores write the column
// from the nights in the transaction that writes them, so only a hand edit
// leaves one, a rule there binds no stay (the engines know rules by
// night), and an error would keep every sale (Sales, at start) from
// loading for it. A column that does not parse is an error, not a sale
// without rules: a stop_sell lost would sell a closed night.
func (r *Rules) ApplyNights(sale *flashsale.Sale) error {
	var byDate map[string]flashsale.StayRules
	if r.StayRules != "" {
		if err := json.Unmarshal([]byte(r.StayRules), &byDate); err != nil {
			return fmt.Errorf("stored stay rules %q: %w", r.StayRules, err)
		}
	}
	for i := range sale.Nights {
		sale.Nights[i].StayRules = byDate[sale.Nights[i].Date]
	}
	return nil
}

// waitingRoom is a waiting room as the stores keep it: its JSON, which
// names each setting, so a setting added later reads back as its zero
// from a room stored before it; "" for none.
func waitingRoom(w *flashsale.WaitingRoom) (string, error) {
	if w == nil {
		return "", nil
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("waiting room: %w", err)
	}
	return string(b), nil
}

func parseWaitingRoom(v string) (*flashsale.WaitingRoom, error) {
	if v == "" {
		return nil, nil
	}
	var w flashsale.WaitingRoom
	if err := json.Unmarshal([]byte(v), &w); err != nil {
		return nil, fmt.Errorf("stored waiting room %q: %w", v, err)
	}
	return &w, nil
}

func priceTiers(ts []flashsale.PriceTier) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = strconv.Itoa(t.Rooms) + ":" + strconv.FormatInt(t.Price, 10)
	}
	return strings.Join(parts, ",")
}

func parsePriceTiers(v string) ([]flashsale.PriceTier, error) {
	if v == "" {
		return nil, nil
	}
	var ts []flashsale.PriceTier
	for part := range strings.SplitSeq(v, ",") {
		rooms, price, ok := strings.Cut(part, ":")
		r, err1 := strconv.Atoi(rooms)
		p, err2 := strconv.ParseInt(price, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("stored price tiers %q", v)
		}
		ts = append(ts, flashsale.PriceTier{Rooms: r, Price: p})
	}
	return ts, nil
}

// Args are the Rules as query arguments, in column order.
func (r *Rules) Args() []any {
	return []any{r.MinStays30d, r.Channels, r.PerSale, r.PerUser, r.PerIP, r.Difficulty, r.PriceTiers, r.Test, r.TimeZone, r.WaitingRoom, r.StayRules, r.Kind}
}

// Dest are the scan destinations of the Rules columns, in column order.
func (r *Rules) Dest() []any {
	return []any{&r.MinStays30d, &r.Channels, &r.PerSale, &r.PerUser, &r.PerIP, &r.Difficulty, &r.PriceTiers, &r.Test, &r.TimeZone, &r.WaitingRoom, &r.StayRules, &r.Kind}
}

// Apply sets sale's rules from what was read, all but the nights' stay
// rules (ApplyNights).
func (r *Rules) Apply(sale *flashsale.Sale) error {
	sale.Eligibility.MinStays30d = r.MinStays30d
	sale.Eligibility.Channels = nil
	if r.Channels != "" {
		sale.Eligibility.Channels = strings.Split(r.Channels, ",")
	}
	sale.Challenge.Difficulty = r.Difficulty
	tiers, err := parsePriceTiers(r.PriceTiers)
	if err != nil {
		return err
	}
	sale.PriceTiers = tiers
	sale.Test = r.Test
	sale.TimeZone = r.TimeZone
	sale.Kind = flashsale.Kind(r.Kind)
	if sale.WaitingRoom, err = parseWaitingRoom(r.WaitingRoom); err != nil {
		return err
	}
	for _, l := range []struct {
		v  string
		to **flashsale.Rate
	}{{r.PerSale, &sale.Limits.PerSale}, {r.PerUser, &sale.Limits.PerUser}, {r.PerIP, &sale.Limits.PerIP}} {
		*l.to = nil
		if l.v == "" {
			continue
		}
		rate, err := flashsale.ParseRate(l.v)
		if err != nil {
			return fmt.Errorf("stored limit: %w", err)
		}
		*l.to = &rate
	}
	return nil
}

// Units reads a sale's (date as YYYY-MM-DD, stock, start_time, minutes)
// rows in unit order: its units as stored, without their stay rules (the
// sale's column), for UpdateSale to tell whether they changed.
func Units(rows Rows) ([]flashsale.Night, error) {
	var units []flashsale.Night
	for rows.Next() {
		var n flashsale.Night
		if err := rows.Scan(&n.Date, &n.Stock, &n.Time, &n.Minutes); err != nil {
			return nil, err
		}
		units = append(units, n)
	}
	return units, rows.Err()
}

// NightStocks reads (date, stock, held, sold) rows in night order, or
// returns ErrNotFound when there are none (an unknown sale).
func NightStocks(rows Rows) ([]flashsale.NightStock, error) {
	var nights []flashsale.NightStock
	for rows.Next() {
		var n flashsale.NightStock
		if err := rows.Scan(&n.Date, &n.Stock, &n.Held, &n.Sold); err != nil {
			return nil, err
		}
		n.Available = n.Stock - n.Held - n.Sold
		nights = append(nights, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(nights) == 0 {
		return nil, flashsale.ErrNotFound
	}
	return nights, nil
}

// SalesNightStocks reads (sale_id, date, stock, held, sold) rows, each
// sale's in night order, into out.
func SalesNightStocks(rows Rows, out map[string][]flashsale.NightStock) error {
	for rows.Next() {
		var id string
		var n flashsale.NightStock
		if err := rows.Scan(&id, &n.Date, &n.Stock, &n.Held, &n.Sold); err != nil {
			return err
		}
		n.Available = n.Stock - n.Held - n.Sold
		out[id] = append(out[id], n)
	}
	return rows.Err()
}

// Revisions reads (id, revision) rows.
func Revisions(rows Rows) (map[string]int64, error) {
	revs := make(map[string]int64)
	for rows.Next() {
		var id string
		var rev int64
		if err := rows.Scan(&id, &rev); err != nil {
			return nil, err
		}
		revs[id] = rev
	}
	return revs, rows.Err()
}

// batch is how many IDs one IN list holds: well under every engine's limit
// on a statement's parameters (SQLite's 32766, MySQL's and PostgreSQL's
// 65535), and short enough for a plan that probes the primary key.
const batch = 500

// Batches yields the distinct ids in runs of at most batch, for IN lists:
// a sale in two runs would have its rows read twice.
func Batches(ids []string) iter.Seq[[]string] {
	distinct := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			distinct = append(distinct, id)
		}
	}
	return slices.Chunk(distinct, batch)
}

// Marks is n comma-separated placeholders.
func Marks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Args is ids as query arguments.
func Args(ids []string) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// MS stores a time as unix milliseconds; the zero time is stored as 0 so
// that FromMS reads it back as the zero time.
func MS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMS converts stored unix milliseconds to a UTC time; 0 is the zero time.
func FromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// Scanner is one row: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows all offer it.
type Scanner interface {
	Scan(dest ...any) error
}

// Order reads an order row: id, sale_id, user_id, idempotency_key (NULL
// or empty for none), status, first_night, nights, rooms, amount, currency,
// hold_expires_at_ms, payment_ref, failure_reason, created_at_ms,
// updated_at_ms, then the check-in date as YYYY-MM-DD and the first
// unit's start_time (” for a stay's night).
func Order(row Scanner) (*flashsale.Order, error) {
	var (
		o                             flashsale.Order
		key                           *string
		status, start                 string
		holdExpires, created, updated int64
	)
	if err := row.Scan(&o.ID, &o.SaleID, &o.UserID, &key, &status, &o.FirstNight, &o.Nights, &o.Rooms,
		&o.Amount, &o.Currency, &holdExpires, &o.PaymentRef, &o.FailureReason, &created, &updated, &o.CheckIn, &start); err != nil {
		return nil, err
	}
	o.Slot = Slot(o.CheckIn, start)
	if key != nil {
		o.IdempotencyKey = *key
	}
	o.Status = flashsale.OrderStatus(status)
	o.HoldExpiresAt, o.CreatedAt, o.UpdatedAt = FromMS(holdExpires), FromMS(created), FromMS(updated)
	return &o, nil
}

// Orders reads order rows as Order does.
func Orders(rows Rows) ([]*flashsale.Order, error) {
	orders := []*flashsale.Order{}
	for rows.Next() {
		o, err := Order(rows)
		if err != nil {
			return nil, err
		}
		orders = append(orders, o)
	}
	return orders, rows.Err()
}

// MaxFailureReason is the longest failure reason the stores keep, in
// characters: the column is VARCHAR(200) where the engine has a length.
const MaxFailureReason = 200

// FailureReason returns reason as every store keeps it: valid UTF-8 (an
// invalid byte becomes U+FFFD) cut to MaxFailureReason characters. A
// reason is for the order's owner and the audit; a long or garbled one must
// not make the failed order impossible to record.
func FailureReason(reason string) string { return cut(reason, MaxFailureReason) }

// errKeyWithoutKey means a store's insert reported KeyTaken for a row it
// wrote without a key: a bug in the store, never a customer-facing outcome.
var errKeyWithoutKey = errors.New("the insert without a key reported the key taken")

// Inserted is what a store's insert of a failed order row reports.
type Inserted int

const (
	// Written: the row went in.
	Written Inserted = iota
	// NoSale: the sale does not exist, and nothing was written.
	NoSale
	// IDTaken: an order with this ID exists, and nothing was written.
	IDTaken
	// KeyTaken: another order of the user holds the idempotency key, and
	// nothing was written.
	KeyTaken
)

// Affected reads what an INSERT ... SELECT FROM sales of a failed order
// reported, for a database/sql store: a row means Written, none NoSale.
func Affected(res sql.Result) (Inserted, error) {
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return NoSale, nil
	}
	return Written, nil
}

// FailOrder is flashsale.Store.FailOrder around a store's insert, which
// writes r as a failed order with its reason, the given key (NULL when
// empty), the sale's currency and the store's own created and updated
// time, with one INSERT and no counter touched, and reports which Inserted
// happened. The steps are the same in every engine: refuse a stay the
// stock engine never produces, insert with the key, and if another order
// holds the key, insert again without it (an ID that appeared in between is
// still ErrDuplicate).
func FailOrder(r *flashsale.Reservation, insert func(key string) (Inserted, error)) error {
	if r.Rooms < 1 || r.Nights < 1 || r.FirstNight < 0 {
		return flashsale.ErrInvalid
	}
	got, err := insert(r.IdempotencyKey)
	if err == nil && got == KeyTaken && r.IdempotencyKey != "" {
		got, err = insert("")
	}
	if err != nil {
		return err
	}
	switch got {
	case Written:
		return nil
	case NoSale:
		return flashsale.ErrNotFound
	case IDTaken:
		return flashsale.ErrDuplicate
	}
	return errKeyWithoutKey
}
