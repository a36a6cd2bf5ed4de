package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/flashsale/flashsale/funnel"
)

// Config is one run: a shape of arrivals and a mix of guests against one sale.
type Config struct {
	Client *Client
	SaleID string
	Shape  Shape
	Mix    Mix
	// Users prefixes every user ID, so that runs and rounds against one
	// server do not share guests.
	Users string
	// Difficulty is the sale's proof-of-work difficulty (0: none); guests
	// solve the puzzle as a guest's browser would, on the client's CPU.
	Difficulty int
	// Think is the mean time a normal guest with a 202 takes before paying
	// (uniform from none to twice it). Pay is the share of them who pay;
	// half of the rest cancel and the others let the hold expire (0:
	// nobody pays; PayDefault is the usual share).
	Think time.Duration
	Pay   float64
	// Hammer is how many purchases a scalper fires with one token.
	Hammer int
	// Slots are a slot sale's slots (Sale.SlotNames), spread evenly over
	// the sessions: session i names the i-th modulo their number, quantity
	// 1; none for a stay.
	Slots []string
	// Vehicles are a seats sale's vehicles per departure (Sale.Vehicles),
	// Slots being its departures: each purchase names its departure, seats
	// 1. None for a slot sale or a stay.
	Vehicles []int
	// ScalperAccounts is how many user accounts the scalpers share: fewer
	// accounts than sessions, so their per-user limit is tested.
	ScalperAccounts int
	// MaxSessions caps the sessions in flight; beyond it the schedule
	// waits, and the wait is in the waiting guests' latency.
	MaxSessions int
	// Metrics is the server's Prometheus endpoint (empty: none), read once
	// a second while the run lasts for its database calls (Result.DB).
	Metrics string
	// Progress receives a line a second while the run lasts (nil: none).
	Progress io.Writer
	// Seed makes the think times and choices reproducible.
	Seed uint64
}

// Defaults for Config.
const (
	ThinkDefault           = time.Second
	PayDefault             = 0.8
	HammerDefault          = 5
	ScalperAccountsDefault = 50
	MaxSessionsDefault     = 4096
)

// Run sends cfg's guests at the server on cfg's schedule (a Loop's back
// to back) and waits for every session to finish (or ctx to end).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Client == nil || cfg.Shape == nil || cfg.SaleID == "" {
		return nil, fmt.Errorf("bench: Run needs a client, a shape and a sale")
	}
	if l, ok := cfg.Shape.(Loop); ok {
		return runLoop(ctx, cfg, l)
	}
	cfg.Think = cmp.Or(cfg.Think, ThinkDefault)
	cfg.Hammer = cmp.Or(cfg.Hammer, HammerDefault)
	cfg.ScalperAccounts = cmp.Or(cfg.ScalperAccounts, ScalperAccountsDefault)
	cfg.MaxSessions = cmp.Or(cfg.MaxSessions, MaxSessionsDefault)
	if cfg.Mix == (Mix{}) {
		cfg.Mix = DefaultMix
	}
	u, err := url.Parse(cfg.Client.Base)
	if err != nil {
		return nil, fmt.Errorf("bench: target %q: %w", cfg.Client.Base, err)
	}
	r := &run{cfg: cfg, addr: u.Host, tokens: map[string]string{}}
	// Sign every guest's JWT before the clock runs: the platform signs
	// them, not the guest at the countdown.
	pick := newPicker(cfg.Mix)
	var who []Kind
	for range cfg.Shape.Arrivals() {
		k := pick.next()
		who = append(who, k)
		if i := len(who) - 1; k != Broken {
			cfg.Client.JWT(r.user(k, i))
		}
	}

	res := r.measure(ctx, cfg.Shape, cfg.Mix, func(start time.Time) {
		sem := make(chan struct{}, cfg.MaxSessions)
		var wg sync.WaitGroup
		i := 0
		for at := range cfg.Shape.Arrivals() {
			due := start.Add(at)
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			r.rec.late(time.Since(due))
			k, n := who[i], i
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(n)))
			wg.Go(func() {
				defer func() { <-sem }()
				switch k {
				case Normal:
					r.normal(ctx, n, due, rng)
				case Scalper:
					r.scalper(ctx, n, due)
				case Broken:
					r.broken(ctx, n, due)
				}
			})
			i++
		}
		wg.Wait()
	})
	return res, ctx.Err()
}

// measure runs load (which starts at start) with the recorder, the
// progress line and the watch of the server's database around it, and
// returns what they saw.
func (r *run) measure(ctx context.Context, shape Shape, mix Mix, load func(start time.Time)) *Result {
	stopDB := func(time.Time) (*DBLoad, string) { return nil, "" }
	if r.cfg.Metrics != "" {
		stopDB = watchDB(ctx, r.cfg.Metrics)
	}
	start := time.Now()
	r.rec = newRecorder(start)
	stop := r.progress(ctx)
	load(start)
	stop()
	res := r.rec.result(r.cfg.Client.Base, shape, mix)
	res.DB, res.DBMissing = stopDB(start)
	res.Slots, res.Vehicles = r.cfg.Slots, r.cfg.Vehicles
	return res
}

type run struct {
	cfg  Config
	addr string // host:port, for the connections broken clients drop
	rec  *recorder

	mu     sync.Mutex
	tokens map[string]string // a scalper account's last token, reused
}

func (r *run) user(k Kind, i int) string {
	if k == Scalper {
		return fmt.Sprintf("%ss%d", r.cfg.Users, i%r.cfg.ScalperAccounts)
	}
	return fmt.Sprintf("%sg%d", r.cfg.Users, i)
}

// slot is the slot session i buys (a slot sale's), "" for a stay.
func (r *run) slot(i int) string {
	if len(r.cfg.Slots) == 0 {
		return ""
	}
	return r.cfg.Slots[i%len(r.cfg.Slots)]
}

// purchase is user's purchase of one place of slot (r.slot; a seats
// sale's departure), or of one room of a stay with none.
func (r *run) purchase(ctx context.Context, user, tok, key, slot string) (Order, Response, error) {
	if len(r.cfg.Vehicles) > 0 && slot != "" {
		return r.cfg.Client.PurchaseDeparture(ctx, r.cfg.SaleID, user, tok, key, slot)
	}
	return r.cfg.Client.PurchaseSlot(ctx, r.cfg.SaleID, user, tok, key, slot)
}

// progress prints a line a second to cfg.Progress until stopped.
func (r *run) progress(ctx context.Context) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(r.cfg.Progress, "\r\033[K%s", r.rec.progress())
			case <-done:
				fmt.Fprintf(r.cfg.Progress, "\r\033[K%s\n", r.rec.progress())
				return
			case <-ctx.Done():
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// token takes a purchase token as user, solving the sale's puzzle first
// when it has one. t is when the first request was meant to go; it comes
// back as when the next one may.
func (r *run) token(ctx context.Context, user string, t *time.Time) (string, bool) {
	c := r.cfg.Client
	var challenge, solution string
	if r.cfg.Difficulty > 0 {
		p, resp, err := c.Challenge(ctx, r.cfg.SaleID, user)
		r.rec.record(epChallenge, *t, resp, err)
		*t = time.Now()
		if err != nil || resp.Status != 201 {
			return "", resp.Code == "sold_out" // the ceiling answers every request so
		}
		challenge, solution = p.Challenge, funnel.Solve(p.Challenge, p.Difficulty)
		*t = time.Now() // solving is the guest's time, not the server's
	}
	tok, resp, err := c.Token(ctx, r.cfg.SaleID, user, challenge, solution)
	r.rec.record(epToken, *t, resp, err)
	*t = time.Now()
	if err != nil {
		return "", false
	}
	// A refusal other than sold out (which only the ceiling gives here)
	// ends the session; with sold out the guest still presses buy.
	return tok, resp.Status == 201 || resp.Code == "sold_out"
}

// normal is a guest who came for the sale: the page, a token, one
// purchase (waiting as Retry-After asks, twice at most), then, after
// thinking, pay (retried as the purchase), cancel or walk away and let
// the hold expire.
func (r *run) normal(ctx context.Context, i int, due time.Time, rng *rand.Rand) {
	c, user := r.cfg.Client, r.user(Normal, i)
	t := due
	resp, err := c.View(ctx, r.cfg.SaleID)
	r.rec.record(epView, t, resp, err)
	t = time.Now()
	tok, ok := r.token(ctx, user, &t)
	if !ok {
		return
	}
	key, slot := user+"-1", r.slot(i)
	var o Order
	for attempt := 0; ; attempt++ {
		o, resp, err = r.purchase(ctx, user, tok, key, slot)
		r.rec.record(epPurchase, t, resp, err)
		if err != nil {
			r.rec.lost()
			return
		}
		if (resp.Status != 429 && resp.Status != 503) || attempt == 2 || !sleep(ctx, max(resp.RetryAfter, 100*time.Millisecond)) {
			break
		}
		t = time.Now()
	}
	if resp.Status != 202 {
		return
	}
	r.rec.accept(Accepted{OrderID: o.OrderID, User: user, Key: key, Kind: Normal, Slot: slot})
	if !sleep(ctx, time.Duration(rng.Float64()*2*float64(r.cfg.Think))) {
		return
	}
	t = time.Now()
	_, resp, err = c.Order(ctx, user, o.OrderID)
	r.rec.record(epOrder, t, resp, err)
	t = time.Now()
	switch p := rng.Float64(); {
	case p < r.cfg.Pay:
		// The payment platform retries its callback as a 429 or 503
		// asks (twice here, as the purchase), with the same reference.
		for attempt := 0; ; attempt++ {
			resp, err = c.Pay(ctx, o.OrderID, "bench-"+o.OrderID)
			r.rec.record(epPay, t, resp, err)
			if err != nil || (resp.Status != 429 && resp.Status != 503) || attempt == 2 || !sleep(ctx, max(resp.RetryAfter, 100*time.Millisecond)) {
				break
			}
			t = time.Now()
		}
	case p < r.cfg.Pay+(1-r.cfg.Pay)/2:
		resp, err = c.Cancel(ctx, user, o.OrderID)
		r.rec.record(epCancel, t, resp, err)
	}
}

// scalper skips the page, reuses its account's last token if it has one,
// and fires Hammer purchases back to back with it, never waiting as
// Retry-After asks and never paying.
func (r *run) scalper(ctx context.Context, i int, due time.Time) {
	user := r.user(Scalper, i)
	t := due
	r.mu.Lock()
	tok, reuse := r.tokens[user]
	r.mu.Unlock()
	if !reuse {
		var ok bool
		if tok, ok = r.token(ctx, user, &t); !ok {
			return
		}
		r.mu.Lock()
		r.tokens[user] = tok
		r.mu.Unlock()
	}
	slot := r.slot(i)
	for range r.cfg.Hammer {
		o, resp, err := r.purchase(ctx, user, tok, "", slot)
		r.purchased(Scalper, user, slot, t, o, resp, err)
		t = time.Now()
	}
}

// brokenBodies are what broken clients send to the purchase endpoint,
// with a guest's valid JWT: JSON cut short, a field of the wrong type,
// an unknown field, a forged purchase token, a body over the limit.
var brokenBodies = [][]byte{
	[]byte(`{"token":`),
	[]byte(`{"rooms":"two"}`),
	[]byte(`{"token":"t","coupon":"FREE"}`),
	[]byte(`{"token":"` + forgedToken + `"}`),
	make([]byte, 70<<10),
}

// forgedToken is a purchase token the server never signed; brokenBodies'
// forgedBody sends it (with its slot, for a slot sale, so that the token
// is what the server refuses).
const (
	forgedToken = "v1.k0.Zm9yZ2VkLXRva2VuLW5vdC1zaWduZWQ"
	forgedBody  = 3
)

// broken is a broken client, each a different fault: a malformed body,
// a forged JWT, or a connection dropped halfway through its body.
func (r *run) broken(ctx context.Context, i int, due time.Time) {
	c := r.cfg.Client
	path := "/api/sales/" + r.cfg.SaleID + "/purchase"
	switch n := i % (len(brokenBodies) + 2); {
	case n < len(brokenBodies):
		body := brokenBodies[n]
		if slot := r.slot(i); n == forgedBody && slot != "" {
			body = slotBody(forgedToken, slot, len(r.cfg.Vehicles) > 0)
		}
		resp, err := c.Do(ctx, "POST", path, c.JWT(fmt.Sprintf("%sb%d", r.cfg.Users, i)), body, nil)
		r.rec.record(epBroken, due, resp, err)
	case n == len(brokenBodies):
		// Signed with a key the server does not have.
		forged := NewClient(c.Base, "", "not-the-secret", 1).JWT("forger")
		resp, err := c.Do(ctx, "POST", path, forged, []byte(`{}`), nil)
		r.rec.record(epBroken, due, resp, err)
	default:
		r.drop(ctx, path)
	}
}

// drop opens a connection, sends a purchase's headers and half its
// body, and hangs up: the server must give up on it and change nothing.
func (r *run) drop(ctx context.Context, path string) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		r.rec.record(epBroken, time.Now(), Response{}, err)
		return
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"token\":\"half", path, r.addr)
	r.rec.dropped()
}

// sleep waits d or until ctx ends, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
