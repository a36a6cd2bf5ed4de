package sqlrows

import (
	"strconv"
	"strings"

	"github.com/flashsale/flashsale"
)

// Filter collects the conditions of a list query and their arguments in
// the placeholder style of the store that made it: ? (SQLite, MySQL) or
// $1, $2 (PostgreSQL). The sales and orders columns are named alike in
// every store, and the conditions are plain SQL every engine reads alike
// (SQLite takes its 0/1 paused column as a truth value).
type Filter struct {
	conds    []string
	Args     []any
	numbered bool
}

// NewFilter returns an empty filter; numbered selects $n placeholders.
func NewFilter(numbered bool) *Filter { return &Filter{numbered: numbered} }

// Arg records an argument and returns its placeholder.
func (f *Filter) Arg(v any) string {
	f.Args = append(f.Args, v)
	if f.numbered {
		return "$" + strconv.Itoa(len(f.Args))
	}
	return "?"
}

// Add appends a condition whose each ? stands for the next of args.
func (f *Filter) Add(cond string, args ...any) {
	var b strings.Builder
	for _, a := range args {
		before, after, _ := strings.Cut(cond, "?")
		b.WriteString(before)
		b.WriteString(f.Arg(a))
		cond = after
	}
	b.WriteString(cond)
	f.conds = append(f.conds, b.String())
}

// Where returns "WHERE " and the conditions joined by AND, or "" for none.
func (f *Filter) Where() string {
	if len(f.conds) == 0 {
		return ""
	}
	return "WHERE " + strings.Join(f.conds, " AND ")
}

// Sales adds q's conditions on the sales table (see flashsale.SaleQuery):
// the status at q.Now as Sale.Status tells them, with active and sold_out
// both meaning "running and not paused" (the engine tells them apart), the
// hotel and the cursor. An unknown status is ErrInvalid.
func (f *Filter) Sales(q flashsale.SaleQuery) error {
	now := q.Now.UnixMilli()
	switch q.Status {
	case "":
	case flashsale.SaleUpcoming:
		f.Add("starts_at_ms > ? AND ends_at_ms > ?", now, now)
	case flashsale.SaleActive, flashsale.SaleSoldOut:
		f.Add("starts_at_ms <= ? AND ends_at_ms > ? AND NOT paused", now, now)
	case flashsale.SalePaused:
		f.Add("starts_at_ms <= ? AND ends_at_ms > ? AND paused", now, now)
	case flashsale.SaleEnded:
		f.Add("ends_at_ms <= ?", now)
	default:
		return flashsale.Errorf(flashsale.EInvalid, "unknown sale status %q", q.Status)
	}
	if q.Hotel != "" {
		f.Add("hotel = ?", q.Hotel)
	}
	if q.Before != "" {
		f.Add("id < ?", q.Before)
	}
	return nil
}

// Orders adds the conditions of one sale's orders, aliased o, matching q
// (see flashsale.OrderQuery). A status that names none is ErrInvalid.
func (f *Filter) Orders(saleID string, q flashsale.OrderQuery) error {
	switch q.Status {
	case "", flashsale.OrderPending, flashsale.OrderHeld, flashsale.OrderPaid,
		flashsale.OrderExpired, flashsale.OrderCancelled, flashsale.OrderFailed:
	default:
		return flashsale.Errorf(flashsale.EInvalid, "unknown order status %q", q.Status)
	}
	f.Add("o.sale_id = ?", saleID)
	if q.Status != "" {
		f.Add("o.status = ?", string(q.Status))
	}
	if q.Before != "" {
		f.Add("o.id < ?", q.Before)
	}
	return nil
}

// PageLimit is the number of rows a list query asks for: limit, or
// PageDefault when it is not positive, at most PageMax.
func PageLimit(limit int) int {
	if limit <= 0 {
		return flashsale.PageDefault
	}
	return min(limit, flashsale.PageMax)
}

// SaleChanges reads a sale's (at_ms, kind, revision, detail) rows.
func SaleChanges(rows Rows, saleID string) ([]flashsale.SaleChange, error) {
	changes := []flashsale.SaleChange{}
	for rows.Next() {
		c := flashsale.SaleChange{SaleID: saleID}
		var at int64
		if err := rows.Scan(&at, &c.Kind, &c.Revision, &c.Detail); err != nil {
			return nil, err
		}
		c.At = FromMS(at)
		changes = append(changes, c)
	}
	return changes, rows.Err()
}

// SaleEdit is one store's statements of UpdateSale, each run inside the
// store's transaction.
type SaleEdit struct {
	// Update writes every field of the sale and revision = rev + 1 where
	// the revision is still rev, reporting whether it found the row.
	Update func() (bool, error)
	// Exists reports whether the sale exists.
	Exists func() (bool, error)
	// Units reads the stored units (date, time, minutes, stock) in unit
	// order: what decides a rewrite, a slot's time being as much the unit
	// as its date.
	Units func() ([]flashsale.Night, error)
	// Nights reads the stored nights with their counters, in night order;
	// with lock, locking them against payments and reapers.
	Nights func(lock bool) ([]flashsale.NightStock, error)
	// Rewrite replaces the nights with the sale's, counters zero.
	Rewrite func() error
	// Log appends a change.
	Log func(c flashsale.SaleChange) error
}

// UpdateSale is flashsale.Store.UpdateSale around a store's statements,
// the same steps in every engine: the conditional update (no row: ErrStale,
// or ErrNotFound when there is no sale), the nights rewritten only when
// their dates, times, minutes or stocks differ and none of their rooms is held or sold
// (ErrStockInUse), and the change logged with the new revision. The caller
// holds the sale row after Update, so nothing else changes a date or a
// stock meanwhile: a plain read decides whether to rewrite, and only then
// are the counters, which payments move without the sale, read under lock.
func UpdateSale(e SaleEdit, wanted []flashsale.Night, rev int64, c flashsale.SaleChange) error {
	found, err := e.Update()
	if err != nil {
		return err
	}
	if !found {
		exists, err := e.Exists()
		switch {
		case err != nil:
			return err
		case !exists:
			return flashsale.ErrNotFound
		}
		return flashsale.ErrStale
	}
	stored, err := e.Units()
	if err != nil {
		return err
	}
	if nightsChanged(stored, wanted) {
		locked, err := e.Nights(true)
		if err != nil {
			return err
		}
		for _, n := range locked {
			if n.Held > 0 || n.Sold > 0 {
				return flashsale.ErrStockInUse
			}
		}
		if err := e.Rewrite(); err != nil {
			return err
		}
	}
	c.Revision = rev + 1
	return e.Log(c)
}

// nightsChanged reports whether want differs from the stored units in
// date, time, minutes or stock: a slot moved to 19:30, or lengthened, is
// another unit for whoever booked it, as a night moved to another date is.
// Stay rules are the sale row's and no change of units.
func nightsChanged(stored, want []flashsale.Night) bool {
	if len(stored) != len(want) {
		return true
	}
	for i, n := range stored {
		w := want[i]
		if n.Date != w.Date || n.Time != w.Time || n.Minutes != w.Minutes || n.Stock != w.Stock {
			return true
		}
	}
	return false
}

// StockChange is one store's statements of AdjustStock, each run inside
// the store's transaction, in this order (the sale row, then the night).
type StockChange struct {
	// Bump raises the sale's revision by one and returns the new one;
	// found is false when there is no such sale.
	Bump func() (rev int64, found bool, err error)
	// Adjust runs the conditional update of the night's stock and returns
	// its counters after it; changed is false when the guard or the night
	// refused it.
	Adjust func() (night flashsale.NightStock, changed bool, err error)
	// Units counts the sale's units on the delta's date: one for a
	// stay's night; a slot sale has several on a date.
	Units func() (int, error)
	// Log appends a change.
	Log func(c flashsale.SaleChange) error
}

// AdjustStock is flashsale.Store.AdjustStock around a store's statements:
// ErrNotFound for an unknown sale or night, ErrInvalid for a date that
// names several units (a slot sale's: a StockDelta names a unit by date
// alone, and the update would change every slot of the day while the
// engine changes one), ErrStockInUse when the guard refused, else the
// night's counters, the change logged with the sale's new revision. The
// units are counted under the sale row Bump holds, so no rewrite of them
// runs in between.
func AdjustStock(st StockChange, c flashsale.SaleChange) (*flashsale.NightStock, error) {
	rev, found, err := st.Bump()
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, flashsale.ErrNotFound
	}
	switch units, err := st.Units(); {
	case err != nil:
		return nil, err
	case units == 0:
		return nil, flashsale.ErrNotFound
	case units > 1:
		return nil, flashsale.Errorf(flashsale.EInvalid, "the date names %d slots of the sale, not one night", units)
	}
	night, changed, err := st.Adjust()
	if err != nil {
		return nil, err
	}
	if !changed {
		return nil, flashsale.ErrStockInUse
	}
	night.Available = night.Stock - night.Held - night.Sold
	c.Revision = rev
	if err := st.Log(c); err != nil {
		return nil, err
	}
	return &night, nil
}
