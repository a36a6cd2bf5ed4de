package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"
)

// Loop is a closed loop: Conns workers, each starting its next iteration
// as soon as its last one was answered, for Duration. The open shapes ask
// how fast the server answers at a given rate; a closed loop asks how
// many answers it gives at most, the throughput a ratio to the ceiling
// needs. With no schedule, a slow server slows its senders down, so a
// loop's latency runs from each request's send: quote its throughput,
// and an open shape's latency.
type Loop struct {
	Path     string // LoopSoldOut or LoopAccepted
	Conns    int
	Duration time.Duration // each worker sends until then, and at least once
}

// The closed loops.
const (
	// LoopSoldOut is one guest buying back to back from a sale of no
	// rooms: the answer a flash sale gives nearly everyone, 409 sold_out.
	LoopSoldOut = "soldout"
	// LoopAccepted is a new guest each iteration, a token and then a
	// purchase of a sale too large to sell out in the run: a 202 each.
	LoopAccepted = "accepted"
)

// Defaults for Loop.Conns, and the accepted loop's stock: a night's most.
const (
	SoldOutConnsDefault  = 32
	AcceptedConnsDefault = 256
	AcceptedStock        = 1_000_000
)

func (l Loop) String() string {
	return fmt.Sprintf("%s (closed loop, %d workers, %s)", l.Path, l.Conns, l.Duration)
}

// Arrivals is every worker at the start.
func (l Loop) Arrivals() iter.Seq[time.Duration] { return Burst(l.Conns).Arrivals() }

// Sale is the loop's sale. The accepted loop's guests neither pay nor
// cancel and their holds outlast the run and the check (drain): the
// figure is the purchase alone, and the books stand still while the
// check reads them; the holds expire afterwards, or --cleanup deletes them.
func (l Loop) Sale(hold int, drain time.Duration) Sale {
	if l.Path == LoopSoldOut {
		return NewSale(0, hold)
	}
	return NewSale(AcceptedStock, min(86400, max(hold, int((l.Duration+drain).Seconds())+60)))
}

// soldOutBody is the sold-out loop's purchase: a token that is never read,
// since the sold-out flag answers first (as scripts/soldout_servers.sh sends).
var soldOutBody = []byte(`{"token":"t"}`)

// runLoop is Run for a closed loop.
func runLoop(ctx context.Context, cfg Config, l Loop) (*Result, error) {
	if l.Conns < 1 || l.Duration <= 0 || (l.Path != LoopSoldOut && l.Path != LoopAccepted) {
		return nil, fmt.Errorf("bench: loop %+v: want soldout or accepted, workers and a duration", l)
	}
	// No watch of the server's metrics: reading them four times a second
	// costs the server CPU the ceiling never pays, and a loop's figure is
	// its throughput.
	cfg.Metrics = ""
	r := &run{cfg: cfg}
	c := cfg.Client
	once := r.accepted
	if l.Path == LoopSoldOut {
		user, path, slot := r.user(Normal, 0), "/api/sales/"+cfg.SaleID+"/purchase", r.slot(0)
		jwt := c.JWT(user)
		body := soldOutBody
		if slot != "" {
			body = slotBody("t", slot, len(cfg.Vehicles) > 0)
		}
		once = func(ctx context.Context, _ int) {
			t := time.Now()
			resp, err := c.Do(ctx, "POST", path, jwt, body, nil)
			var o Order
			if err == nil && resp.Status == 202 {
				err = json.Unmarshal(resp.Body, &o)
			}
			r.purchased(Normal, user, slot, t, o, resp, err)
		}
	}
	var n atomic.Int64
	res := r.measure(ctx, l, Mix{}, func(start time.Time) {
		end := start.Add(l.Duration)
		var wg sync.WaitGroup
		for range l.Conns {
			wg.Go(func() {
				// Every worker sends at least once, even one that first ran
				// after the end: on a loaded machine a short loop (a test's
				// 50 ms) otherwise ended with nothing sent and nothing to
				// report (CI, bench's TestRunSlots beside cmd/flashsale).
				for first := true; ctx.Err() == nil && (first || time.Now().Before(end)); first = false {
					r.rec.late(0) // never late: this counts the session
					once(ctx, int(n.Add(1)-1))
				}
			})
		}
		wg.Wait()
	})
	res.Mix, res.Loop, res.Conns = "", l.Path, l.Conns
	if res.Seconds > 0 {
		res.SessionRate = float64(res.Sessions) / res.Seconds
		res.AcceptedRate = float64(len(res.Accepted)) / res.Seconds
	}
	return res, ctx.Err()
}

// accepted is one iteration of the accepted loop: guest i, new, takes a
// token and buys once, with no think time.
func (r *run) accepted(ctx context.Context, i int) {
	user := r.user(Normal, i)
	t := time.Now()
	tok, ok := r.token(ctx, user, &t)
	if !ok {
		return
	}
	slot := r.slot(i)
	o, resp, err := r.purchase(ctx, user, tok, "", slot)
	r.purchased(Normal, user, slot, t, o, resp, err)
}

// purchased records k's purchase as user (of slot, for a slot sale), sent
// at t without an idempotency key, and its 202 or its lost answer for the
// check.
func (r *run) purchased(k Kind, user, slot string, t time.Time, o Order, resp Response, err error) {
	r.rec.record(epPurchase, t, resp, err)
	switch {
	case err != nil:
		r.rec.lost()
	case resp.Status == 202:
		r.rec.accept(Accepted{OrderID: o.OrderID, User: user, Kind: k, Slot: slot})
	}
}

// soldOutAnswers is the sold-out loop's own rule: a sale of no rooms
// answers every purchase 409 sold_out, so a 202 is an oversell and a 5xx
// or a lost answer a failure. Other refusals (a 429) are only counted.
func soldOutAnswers(res *Result) Invariant {
	var bad []string
	for _, o := range res.Outcomes {
		if o.Endpoint == epPurchase.String() && (o.Status == 202 || o.Status >= 500 || o.Status == 0) {
			bad = append(bad, fmt.Sprintf("%d purchases of a sale of no rooms answered %s %s", o.Count, o.StatusText(), o.Code))
		}
	}
	return Invariant{Name: InvAnswers, OK: len(bad) == 0, Detail: summary(bad)}
}
