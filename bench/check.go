package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Invariant is one rule of docs/design.md checked after a run.
type Invariant struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// The invariants Verify checks.
const (
	InvOversold  = "oversold"   // I1: held + sold ≤ stock, on the server and by the 202s
	InvLost      = "lost_202"   // I2, I8: every 202 is one readable order (of its slot), none lost or failed with room left
	InvDuplicate = "duplicates" // I4: one order per 202, never one order for two purchases
	InvOverLimit = "over_limit" // I3: no user holds more than the sale's per-user limit
	InvBooks     = "books"      // I6: the server's audit balances and its counters are the 202s' rooms
	InvDrained   = "drained"    // I2: nothing is in flight or pending once the load stops
	InvAnswers   = "answers"    // the sold-out loop: every purchase of no rooms is a 409, no 202, no 5xx
)

// Check is the invariant check after a run: what the server's audit says,
// cross-checked against the client's own record of every 202.
type Check struct {
	// SaleID is the sale checked.
	SaleID     string      `json:"sale_id"`
	Invariants []Invariant `json:"invariants"`
	// Stock, Held and Sold are the first night's of a stay (every bench
	// purchase buys one room of it), the sum of the slots' of a slot sale
	// (every purchase one place of one) or of the vehicles' of a seats
	// sale, as the audit read them last.
	Stock int `json:"stock"`
	Held  int `json:"held"`
	Sold  int `json:"sold"`
	// Oversold is how many rooms beyond the stock were taken: the larger
	// of the server's held + sold over stock (any night) and the client's
	// active 202s over Stock (or over a slot's own). It is what the comparison
	// table quotes; 0 unless the oversold invariant broke.
	Oversold int `json:"oversold"`
	// Orders counts the 202s' orders by the status their owners read.
	Orders   map[string]int `json:"orders"`
	Findings []string       `json:"findings,omitempty"`
}

// OK reports whether every invariant holds.
func (c *Check) OK() bool {
	for _, inv := range c.Invariants {
		if !inv.OK {
			return false
		}
	}
	return true
}

// Broken names the invariants that do not hold.
func (c *Check) Broken() []string {
	var out []string
	for _, inv := range c.Invariants {
		if !inv.OK {
			out = append(out, inv.Name)
		}
	}
	return out
}

// Verify waits up to drain for the sale's orders to settle (nothing in
// flight, no 202 still pending), then checks the invariants: the server's
// audit of the sale, and every 202 in res read back by its owner; for
// the sold-out loop, also that every answer was a sold out.
// perUserLimit is the sale's.
func Verify(ctx context.Context, c *Client, saleID string, perUserLimit int, res *Result, drain time.Duration) (*Check, error) {
	byOrder := map[string][]Accepted{}
	for _, a := range res.Accepted {
		byOrder[a.OrderID] = append(byOrder[a.OrderID], a)
	}
	deadline := time.Now().Add(drain)
	var (
		audit    Audit
		statuses map[string]Order // by order; Status "" when the owner could not read it
		drained  bool
		err      error
	)
	for {
		before, err1 := c.Audit(ctx, saleID)
		if err1 != nil {
			return nil, err1
		}
		statuses, err = readOrders(ctx, c, byOrder)
		if err != nil {
			return nil, err
		}
		if audit, err = c.Audit(ctx, saleID); err != nil {
			return nil, err
		}
		pending := 0
		for _, o := range statuses {
			if o.Status == "pending" {
				pending++
			}
		}
		// Settled: nothing on its way, and the books did not move while
		// the orders were read (a hold expiring in between would).
		drained = inFlight(audit) == 0 && pending == 0 && sameCounters(before, audit)
		if drained || time.Now().After(deadline) || !sleep(ctx, 200*time.Millisecond) {
			break
		}
	}
	ck := judge(audit, byOrder, statuses, perUserLimit, res.Unknown, drained, res.units())
	ck.SaleID = saleID
	if res.Loop == LoopSoldOut {
		ck.Invariants = append(ck.Invariants, soldOutAnswers(res))
	}
	return ck, nil
}

// judge is Verify's verdict on what it read. slots are the slot of each
// of the audit's units, in order (Result.units): a slot sale's slots, a
// seats sale's departures once per vehicle, whose places are their
// vehicles' sum; none for a stay.
func judge(audit Audit, byOrder map[string][]Accepted, statuses map[string]Order, perUserLimit, unknown int, drained bool, slots []string) *Check {
	ck := &Check{Orders: map[string]int{}}
	units := audit.Nights[:min(1, len(audit.Nights))] // the units the purchases took
	if len(slots) > 0 {
		units = audit.Nights
	}
	for _, n := range units {
		ck.Stock, ck.Held, ck.Sold = ck.Stock+n.Stock, ck.Held+n.Held, ck.Sold+n.Sold
	}
	// unit is the audit's units of a slot (or departure) added up (nil:
	// none).
	unit := func(slot string) *AuditNight {
		var u *AuditNight
		for i, s := range slots {
			if slot != "" && s == slot && i < len(audit.Nights) {
				if u == nil {
					u = &AuditNight{Date: audit.Nights[i].Date}
				}
				n := audit.Nights[i]
				u.Stock, u.Held, u.Sold = u.Stock+n.Stock, u.Held+n.Held, u.Sold+n.Sold
			}
		}
		return u
	}
	kinds := map[string]bool{}
	for _, f := range audit.Findings {
		kinds[f.Kind] = true
		ck.Findings = append(ck.Findings, f.Kind+": "+f.Detail)
	}
	finding := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if kinds[n] {
				out = append(out, "the server's audit finds "+n)
			}
		}
		return out
	}

	var (
		dups, lost, pending []string
		active              int
		perUser             = map[string]int{}
		perSlot             = map[string]int{}
	)
	for _, id := range slices.Sorted(maps.Keys(byOrder)) {
		as := byOrder[id]
		for _, a := range as[1:] {
			if a.User != as[0].User || a.Key == "" || a.Key != as[0].Key {
				dups = append(dups, fmt.Sprintf("order %s answered 202 to %s and to %s", id, as[0].User, a.User))
				break
			}
		}
		o := statuses[id]
		status := o.Status
		if status == "" {
			status = "unreadable"
		}
		ck.Orders[status]++
		if want := as[0].Slot; want != "" && o.Status != "" && o.Slot != want {
			lost = append(lost, fmt.Sprintf("order %s (a 202 for the slot %s) is of the slot %q", id, want, o.Slot))
		}
		switch o.Status {
		case "held", "paid":
			rooms := max(1, o.Rooms)
			active += rooms
			perUser[as[0].User] += rooms
			perSlot[o.Slot] += rooms
		case "pending":
			pending = append(pending, id)
		case "failed":
			left := ck.Held+ck.Sold < ck.Stock
			if u := unit(o.Slot); u != nil {
				left = u.Held+u.Sold < u.Stock // another slot's places are not this one's
			}
			if left {
				lost = append(lost, fmt.Sprintf("order %s (a 202) failed with rooms left", id))
			}
		case "expired", "cancelled":
		default:
			lost = append(lost, fmt.Sprintf("order %s (a 202 to %s) cannot be read by its owner", id, as[0].User))
		}
	}
	dbRooms := ck.Held + ck.Sold

	var oversold []string
	for _, n := range audit.Nights {
		if n.Held+n.Sold > n.Stock {
			ck.Oversold = max(ck.Oversold, n.Held+n.Sold-n.Stock)
			oversold = append(oversold, fmt.Sprintf("night %s: held %d + sold %d > stock %d", n.Date, n.Held, n.Sold, n.Stock))
		}
	}
	if active > ck.Stock {
		ck.Oversold = max(ck.Oversold, active-ck.Stock)
		oversold = append(oversold, fmt.Sprintf("the client holds %d active 202s for %d rooms", active, ck.Stock))
	}
	for _, slot := range slices.Compact(slices.Clone(slots)) { // a departure once
		if u := unit(slot); u != nil && perSlot[slot] > u.Stock {
			ck.Oversold = max(ck.Oversold, perSlot[slot]-u.Stock)
			oversold = append(oversold, fmt.Sprintf("the client holds %d active 202s of the slot %s for %d places", perSlot[slot], slot, u.Stock))
		}
	}
	oversold = append(oversold, finding("db_oversold", "engine_negative")...)

	var over []string
	for _, u := range slices.Sorted(maps.Keys(perUser)) {
		if perUser[u] > perUserLimit {
			over = append(over, fmt.Sprintf("%s holds %d rooms, limit %d", u, perUser[u], perUserLimit))
		}
	}
	over = append(over, finding("user_over_limit")...)

	if dbRooms < active {
		lost = append(lost, fmt.Sprintf("the server counts %d rooms held or sold, the 202s' orders %d", dbRooms, active))
	}
	lost = append(lost, finding("stranded")...)

	var books []string
	if dbRooms > active+unknown {
		books = append(books, fmt.Sprintf("the server counts %d rooms held or sold, the 202s' orders only %d (and %d purchases lost their answer)",
			dbRooms, active, unknown))
	}
	books = append(books, finding("db_counters_drift", "units_drift", "engine_active_db_final", "db_active_engine_inactive", "engine_not_loaded")...)

	var undrained []string
	if !drained {
		undrained = append(undrained, fmt.Sprintf("%d rooms still in flight and %d 202s pending when the check gave up", inFlight(audit), len(pending)))
	}
	dups = append(dups, finding("duplicate_key")...)

	for _, inv := range []struct {
		name string
		bad  []string
	}{
		{InvOversold, oversold}, {InvLost, lost}, {InvDuplicate, dups}, {InvOverLimit, over}, {InvBooks, books}, {InvDrained, undrained},
	} {
		ck.Invariants = append(ck.Invariants, Invariant{Name: inv.name, OK: len(inv.bad) == 0, Detail: summary(inv.bad)})
	}
	return ck
}

// summary is the first few of a list of failures, and how many there are.
func summary(bad []string) string {
	switch {
	case len(bad) == 0:
		return ""
	case len(bad) <= 3:
		return strings.Join(bad, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(bad[:3], "; "), len(bad)-3)
}

func inFlight(a Audit) int {
	n := 0
	for _, night := range a.Nights {
		if night.InFlight != nil {
			n += *night.InFlight
		}
	}
	return n
}

func sameCounters(a, b Audit) bool {
	if len(a.Nights) != len(b.Nights) {
		return false
	}
	for i := range a.Nights {
		if a.Nights[i].Held != b.Nights[i].Held || a.Nights[i].Sold != b.Nights[i].Sold {
			return false
		}
	}
	return true
}

// readOrders reads every order as its owner, a few at a time, waiting as a
// 429 or 503 asks; an order its owner cannot read has Status "".
func readOrders(ctx context.Context, c *Client, byOrder map[string][]Accepted) (map[string]Order, error) {
	out := make(map[string]Order, len(byOrder))
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, 16)
	)
	for id, as := range byOrder {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var o Order
			for range 10 {
				got, resp, err := c.Order(ctx, as[0].User, id)
				if err == nil && resp.Status == 200 {
					o = got
					break
				}
				if err == nil && resp.Status != 429 && resp.Status != 503 {
					break
				}
				if !sleep(ctx, max(resp.RetryAfter, 100*time.Millisecond)) {
					break
				}
			}
			mu.Lock()
			out[id] = o
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, ctx.Err()
}
