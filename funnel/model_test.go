package funnel_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/fixture"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/sqlite"
)

// TestModel drives a real Service (in-process engine, group-commit writer,
// SQLite) with random sequences of purchases, cancels, payments, clock
// advances, reaps and restarts, and after every step compares the database,
// the engine and what every guest reads with a model made of plain maps
// (I1, I3, I4, I6, I8 and engine == database).
//
// rapid runs 100 sequences of about 30 steps by default; to search longer:
//
//	go test -race -run TestModel ./funnel/ -rapid.checks=5000 -rapid.steps=100
//
// A failure prints the shrunk sequence of steps and writes a fail file under
// funnel/testdata/rapid/ that -rapid.failfile=... replays.
func TestModel(t *testing.T) {
	dir := t.TempDir()
	// Every sequence starts from a copy of one migrated file: migrating
	// anew each time was a fifth of the run under -race.
	template := filepath.Join(dir, "template.db")
	mustSQLite(t, template).Close()
	runs := 0
	seen := make(map[string]int)
	defer func() { t.Logf("outcomes over %d sequences: %v", runs, seen) }()
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		path := filepath.Join(dir, fmt.Sprintf("model-%d.db", runs))
		if err := copyFile(template, path); err != nil {
			rt.Fatal(err)
		}
		// Each sequence's clock starts at the wall clock's second, not at
		// t0: the engine's spent-token set forgets a token by the wall
		// clock once the token's expiry (service clock + TTL) is past, so
		// a service clock behind the wall clock makes spent tokens look
		// unspent. Messages give times relative to it, so that they are
		// the same in every run and rapid can shrink.
		m := newModelMachine(rt, path, time.Now().UTC().Truncate(time.Second))
		m.seen = seen
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// modelOrder is the model's idea of one order.
type modelOrder struct {
	id, user, key        string
	first, nights, rooms int
	status               flashsale.OrderStatus
	expires              time.Time
}

// model is what the service should hold, in plain maps. The counters are
// not kept but derived from the orders, so the model has one fact per order.
type model struct {
	stock []int
	limit int
	hold  time.Duration
	// orders by ID, and their IDs in the order they were placed (rapid
	// draws from a slice, and map order would make runs unrepeatable).
	orders map[string]*modelOrder
	ids    []string
	keys   map[[2]string]string // (user, idempotency key) -> order ID
}

// counts returns the rooms held and sold per night.
func (m *model) counts() (held, sold []int) {
	held, sold = make([]int, len(m.stock)), make([]int, len(m.stock))
	for _, o := range m.orders {
		for i := o.first; i < o.first+o.nights; i++ {
			switch o.status {
			case flashsale.OrderHeld:
				held[i] += o.rooms
			case flashsale.OrderPaid:
				sold[i] += o.rooms
			}
		}
	}
	return held, sold
}

func (m *model) available() []int {
	held, sold := m.counts()
	a := make([]int, len(m.stock))
	for i := range a {
		a[i] = m.stock[i] - held[i] - sold[i]
	}
	return a
}

// userRooms is a user's active (held or paid) rooms: what the limit counts.
func (m *model) userRooms(user string) int {
	n := 0
	for _, o := range m.orders {
		if o.user == user && o.status.Active() {
			n += o.rooms
		}
	}
	return n
}

// take answers whether the engine's one atomic step would take rooms for
// user over the stay: the limit first, then every night.
func (m *model) take(user string, first, nights, rooms int) error {
	if m.userRooms(user)+rooms > m.limit {
		return flashsale.ErrLimitExceeded
	}
	avail := m.available()
	for i := first; i < first+nights; i++ {
		if avail[i] < rooms {
			return flashsale.ErrSoldOut
		}
	}
	return nil
}

// soldOut is the engine's sold-out flag: every night of the sale at zero.
func (m *model) soldOut() bool {
	for _, a := range m.available() {
		if a > 0 {
			return false
		}
	}
	return true
}

// modelMachine is the rapid state machine: the service under test, its
// clock, and the model.
type modelMachine struct {
	t     *rapid.T
	path  string
	start time.Time // the clock at the first step
	e     *env
	sale  *flashsale.Sale
	m     *model
	// changed says an order was placed or moved since the last restart:
	// restarting again before that would rebuild the same engine.
	changed bool
	// moved says an order was placed or moved, or the service restarted,
	// since the last Check read every order back.
	moved bool
	// sent is every request Purchase sent, for Retry.
	sent []sentRequest
	// seen tallies the outcomes the sequences reached, for -v: a model
	// that never reaches hold_expired tests nothing about it.
	seen map[string]int
}

type sentRequest struct {
	user  string
	req   flashsale.PurchaseRequest
	token *modelToken // nil for a sale without tokens
}

// modelToken is a purchase token and whether the engine spent it.
type modelToken struct {
	token   string
	expires time.Time
	spent   bool
}

// modelStrictTokens makes TestModel expect a spent purchase token to stay
// spent across a restart.
var modelStrictTokens = flag.Bool("funnel.stricttokens", false, "TestModel: a token spent before a restart must stay spent after it")

var (
	modelUsers = []string{"ann", "ben", "cat"}
	modelKeys  = []string{"", "", "k1", "k2"}
)

func newModelMachine(t *rapid.T, path string, start time.Time) *modelMachine {
	// A saved failure replays these draws in this order: keep it.
	nights := rapid.IntRange(1, 3).Draw(t, "nights")
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	hold := rapid.IntRange(1, 5).Draw(t, "hold_seconds")
	token := rapid.Bool().Draw(t, "purchase_token")
	stock := make([]int, nights)
	for i := range stock {
		stock[i] = rapid.IntRange(1, 4).Draw(t, fmt.Sprintf("stock[%d]", i))
	}
	// fixture.Stock's night i is modelDate(i).
	sale := fixture.Sale(fixture.Stock(stock...), fixture.Window(start.Add(-time.Minute), start.Add(24*time.Hour)),
		fixture.Limit(limit), fixture.Hold(hold))
	sale.PurchaseToken = token
	m := &model{
		stock:  stock,
		limit:  sale.PerUserLimit,
		hold:   sale.HoldDuration(),
		orders: make(map[string]*modelOrder),
		keys:   make(map[[2]string]string),
	}
	mm := &modelMachine{t: t, path: path, m: m, start: start}
	mm.open(&clock{t: start})
	s, err := mm.e.svc.CreateSale(context.Background(), sale)
	if err != nil {
		t.Fatalf("create sale: %v", err)
	}
	mm.sale = s
	t.Cleanup(mm.close)
	return mm
}

// modelDate is the date of the sale's night i; i past the sale names a
// night not on sale.
func modelDate(i int) string {
	return testenv.Night(i)
}

// open starts a service on the machine's SQLite file with a fresh engine,
// as mustOpenAt does (which takes a testing.TB, and a *rapid.T is not one).
func (mm *modelMachine) open(c *clock) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, mm.path, nil)
	if err != nil {
		mm.t.Fatalf("open sqlite: %v", err)
	}
	if err := store.Migrate(ctx); err != nil {
		mm.t.Fatalf("migrate: %v", err)
	}
	engine := inmem.NewEngine()
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	// The reaper's own loop never fires during a run: the reap action
	// calls Reap itself, so every expiry happens at a step rapid chose.
	svc := funnel.New(funnel.Config{
		Store: store.Roles(), Engine: engine.Roles(), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour,
	})
	if err := svc.Start(ctx); err != nil {
		mm.t.Fatalf("start: %v", err)
	}
	mm.e = &env{svc: svc, store: store.Roles(), engine: engine, writer: writer, clock: c, path: mm.path}
}

func (mm *modelMachine) close() {
	if mm.e == nil || mm.e.svc == nil {
		return
	}
	mm.e.svc.Close()
	mm.e.writer.Close()
	mm.e.store.Close()
	mm.e.svc = nil
}

// modelUser returns a flashsale.User for a pool name.
func modelUser(id string) flashsale.User { return flashsale.User{ID: id, Tier: flashsale.TierBasic} }

// code names an error by its stable code, so a mismatch prints readably.
func code(err error) string {
	if err == nil {
		return "ok"
	}
	return flashsale.ErrorCode(err)
}

// Purchase draws a stay (sometimes malformed), a user and an idempotency
// key, and checks the service's answer against the model's.
func (mm *modelMachine) Purchase(t *rapid.T) {
	m := mm.m
	user := rapid.SampledFrom(modelUsers).Draw(t, "user")
	key := rapid.SampledFrom(modelKeys).Draw(t, "key")
	// check_in -1 is left empty (the sale's first night); nights and
	// rooms 0 are left out (1). One request in six is malformed.
	checkIn := rapid.IntRange(-1, len(m.stock)-1).Draw(t, "check_in")
	nights := rapid.IntRange(0, len(m.stock)-max(checkIn, 0)).Draw(t, "stay_nights")
	rooms := rapid.IntRange(0, m.limit+1).Draw(t, "rooms")
	req := flashsale.PurchaseRequest{SaleID: mm.sale.ID, IdempotencyKey: key, Nights: nights, Rooms: rooms}
	if checkIn >= 0 {
		req.CheckIn = modelDate(checkIn)
	}
	if rapid.IntRange(0, 5).Draw(t, "malformed") == 5 {
		switch rapid.IntRange(0, 4).Draw(t, "how") {
		case 0:
			req.Rooms = -1
		case 1:
			req.Rooms = funnel.MaxRooms + 1
		case 2:
			req.CheckIn = modelDate(len(m.stock)) // the day after the last night
		case 3:
			req.CheckIn = testenv.NightTime(0).Format("02/01/2006")
		case 4:
			req.CheckIn, req.Nights = modelDate(len(m.stock)-1), 2 // runs past the sale
		}
	}
	var tok *modelToken
	if mm.sale.PurchaseToken {
		pt, err := mm.e.svc.IssueToken(context.Background(), modelUser(user), flashsale.TokenRequest{SaleID: mm.sale.ID})
		if err != nil {
			mm.fatalf(t, "issue token: %v", err)
		}
		tok = &modelToken{token: pt.Token, expires: pt.ExpiresAt}
		req.Token = tok.token
	}
	mm.sent = append(mm.sent, sentRequest{user, req, tok})
	got, err := mm.e.svc.Purchase(context.Background(), modelUser(user), req)
	mm.checkPurchase(t, user, req, tok, got, err)
}

// Retry sends one of the requests sent before again, token and key
// included, as a client does after a timeout: a keyed request replays its
// order, a keyless one is a new attempt whose token was spent if the
// first attempt reached the engine.
func (mm *modelMachine) Retry(t *rapid.T) {
	if len(mm.sent) == 0 {
		t.Skip("nothing sent yet")
	}
	r := mm.sent[rapid.IntRange(0, len(mm.sent)-1).Draw(t, "request")]
	got, err := mm.e.svc.Purchase(context.Background(), modelUser(r.user), r.req)
	mm.checkPurchase(t, r.user, r.req, r.token, got, err)
}

// checkPurchase is the model's answer to one purchase, compared with the
// service's, and the model's step if the service took the rooms.
func (mm *modelMachine) checkPurchase(t *rapid.T, user string, req flashsale.PurchaseRequest, tok *modelToken, got *flashsale.Order, err error) {
	m := mm.m
	now := mm.e.clock.Now()
	first, nights, rooms := -1, cmp.Or(req.Nights, 1), cmp.Or(req.Rooms, 1)
	for i := range m.stock {
		if modelDate(i) == cmp.Or(req.CheckIn, modelDate(0)) {
			first = i
		}
	}
	// The funnel's order: the request's shape, the idempotency replay,
	// the sold-out flag, the token, then the engine's limit and stock.
	switch {
	case rooms < 0 || rooms > funnel.MaxRooms || first < 0 || nights > len(m.stock) || first+nights > len(m.stock):
		mm.wantErr(t, "purchase", err, flashsale.EInvalid)
		return
	case req.IdempotencyKey != "" && m.keys[[2]string{user, req.IdempotencyKey}] != "":
		id := m.keys[[2]string{user, req.IdempotencyKey}]
		if o := m.orders[id]; o.first != first || o.nights != nights || o.rooms != rooms {
			// The key names a purchase of another stay: the client's
			// mistake, refused, nothing taken.
			mm.wantErr(t, "purchase under a key bound to another stay", err, flashsale.EKeyReused)
			mm.seen["purchase: key reused for another stay"]++
			return
		}
		if err != nil || got.ID != id || got.Status != m.orders[id].status {
			mm.fatalf(t, "replay of key %q: got %s %v, want order %s %s", req.IdempotencyKey, mm.orderString(got), err, id, m.orders[id].status)
		}
		mm.seen["purchase: replay of a "+string(got.Status)+" order"]++
		return
	case m.soldOut():
		mm.wantErr(t, "purchase", err, flashsale.ESoldOut)
		return
	case tok != nil && (tok.spent || !now.Before(tok.expires)):
		mm.wantErr(t, "purchase", err, flashsale.ETokenInvalid)
		return
	}
	if tok != nil {
		// The engine spends the token before its limit and stock checks.
		tok.spent = true
	}
	if want := m.take(user, first, nights, rooms); want != nil {
		mm.wantErr(t, "purchase", err, flashsale.ErrorCode(want))
		return
	}
	if err != nil {
		mm.fatalf(t, "purchase: %v, want held", err)
	}
	want := &modelOrder{
		id: got.ID, user: user, key: req.IdempotencyKey, first: first, nights: nights, rooms: rooms,
		status: flashsale.OrderHeld, expires: now.Add(m.hold),
	}
	if got.Status != flashsale.OrderHeld || got.UserID != user || got.FirstNight != first || got.Nights != nights ||
		got.Rooms != rooms || !got.HoldExpiresAt.Equal(want.expires) || m.orders[got.ID] != nil {
		mm.fatalf(t, "purchase: got %s, want a new held order of %d room(s) from night %d for %d night(s) until %s",
			mm.orderString(got), rooms, first, nights, mm.at(want.expires))
	}
	mm.seen[fmt.Sprintf("purchase: held (%d night(s), %d room(s))", nights, rooms)]++
	m.orders[got.ID] = want
	mm.changed, mm.moved = true, true
	m.ids = append(m.ids, got.ID)
	if req.IdempotencyKey != "" {
		m.keys[[2]string{user, req.IdempotencyKey}] = got.ID
	}
}

func (mm *modelMachine) wantErr(t *rapid.T, op string, err error, want string) {
	t.Helper()
	mm.seen[op+": "+want]++
	if got := code(err); got != want {
		mm.fatalf(t, "%s: got %s (%v), want %s", op, got, err, want)
	}
}

// fatalf fails the step with every order ID in the message replaced by
// the order's place in the sequence (#1 is the first order placed): the IDs
// are fresh ULIDs in every run, and rapid shrinks a counterexample only
// while the failure's message stays the same.
func (mm *modelMachine) fatalf(t *rapid.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	for i, id := range mm.m.ids {
		msg = strings.ReplaceAll(msg, id, fmt.Sprintf("#%d", i+1))
	}
	t.Fatal(ulidPattern.ReplaceAllString(msg, "<unknown order>"))
}

var ulidPattern = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)

// at names a time by its distance from the sequence's start.
func (mm *modelMachine) at(t time.Time) string { return "t+" + t.Sub(mm.start).String() }

func (mm *modelMachine) orderString(o *flashsale.Order) string {
	if o == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{%s %s user=%s first=%d nights=%d rooms=%d until %s}",
		o.ID, o.Status, o.UserID, o.FirstNight, o.Nights, o.Rooms, mm.at(o.HoldExpiresAt))
}

// drawOrder picks an order the model knows, three times in four one that
// is not paid: a paid order is final, and paying or cancelling it again
// teaches little after the first time. With every order paid the step is
// skipped.
func (mm *modelMachine) drawOrder(t *rapid.T) *modelOrder {
	ids := slices.DeleteFunc(slices.Clone(mm.m.ids), func(id string) bool { return mm.m.orders[id].status == flashsale.OrderPaid })
	if len(ids) == 0 {
		t.Skip("no unpaid orders") // before any draw, so rapid picks another action
	}
	if rapid.IntRange(0, 3).Draw(t, "any_order") == 3 {
		ids = mm.m.ids
	}
	return mm.m.orders[rapid.SampledFrom(ids).Draw(t, "order")]
}

// Cancel ends a held order (its owner asking), or is refused for an order
// that is not held; someone else's order is not found.
func (mm *modelMachine) Cancel(t *rapid.T) {
	o := mm.drawOrder(t)
	owner := rapid.IntRange(0, 9).Draw(t, "by_someone_else") != 9
	user := o.user
	if !owner {
		user = rapid.SampledFrom(slices.DeleteFunc(slices.Clone(modelUsers), func(u string) bool { return u == o.user })).Draw(t, "user")
	}
	got, err := mm.e.svc.Cancel(context.Background(), modelUser(user), o.id)
	switch {
	case !owner:
		mm.wantErr(t, "cancel someone else's order", err, flashsale.ENotFound)
	case o.status == flashsale.OrderHeld, o.status == flashsale.OrderCancelled:
		if err != nil || got.Status != flashsale.OrderCancelled {
			mm.fatalf(t, "cancel %s order %s: got %s %v, want cancelled", o.status, o.id, mm.orderString(got), err)
		}
		mm.seen["cancel "+string(o.status)+" order: cancelled"]++
		o.status, mm.changed, mm.moved = flashsale.OrderCancelled, true, true
	default:
		mm.wantErr(t, "cancel "+string(o.status)+" order", err, flashsale.EConflict)
	}
}

// Pay confirms a payment: a held order (expired by the clock or not, while
// the reaper has not seen it) is paid; an expired one is paid if its rooms
// and its owner's limit still allow, or answered hold_expired; a cancelled
// one is order_cancelled; a paid one is paid again with its own ref and
// already_paid with another.
func (mm *modelMachine) Pay(t *rapid.T) {
	o := mm.drawOrder(t)
	ref := "pay-" + o.id
	other := o.status == flashsale.OrderPaid && rapid.Bool().Draw(t, "another_ref")
	if other {
		ref = "second-" + o.id
	}
	got, err := mm.e.svc.MarkPaid(context.Background(), o.id, ref)
	switch o.status {
	case flashsale.OrderPaid:
		if other {
			mm.wantErr(t, "pay a paid order with another ref", err, flashsale.EAlreadyPaid)
			return
		}
	case flashsale.OrderHeld:
	case flashsale.OrderCancelled:
		mm.wantErr(t, "pay cancelled order", err, flashsale.EOrderCancelled)
		return
	case flashsale.OrderExpired:
		if want := mm.m.take(o.user, o.first, o.nights, o.rooms); want != nil {
			mm.wantErr(t, "pay "+string(o.status)+" order", err, flashsale.EHoldExpired)
			return
		}
	default:
		mm.fatalf(t, "model has a %s order", o.status)
	}
	if err != nil || got.Status != flashsale.OrderPaid || got.ID != o.id {
		mm.fatalf(t, "pay %s order %s: got %s %v, want paid", o.status, o.id, mm.orderString(got), err)
	}
	mm.seen["pay "+string(o.status)+" order: paid"]++
	o.status, mm.changed, mm.moved = flashsale.OrderPaid, true, true
}

// Advance moves the clock on without reaping, so holds can be past their
// expiry yet still held when they are paid or cancelled.
func (mm *modelMachine) Advance(t *rapid.T) {
	secs := rapid.IntRange(0, int(mm.m.hold/time.Second)+1).Draw(t, "seconds")
	mm.e.clock.Advance(time.Duration(secs) * time.Second)
}

// Reap moves the clock on and runs the reaper's work once: every hold
// ended at or before now is expired and its rooms go back.
func (mm *modelMachine) Reap(t *rapid.T) {
	mm.Advance(t)
	now := mm.e.clock.Now()
	want := 0
	for _, id := range mm.m.ids {
		if o := mm.m.orders[id]; o.status == flashsale.OrderHeld && !o.expires.After(now) {
			o.status, mm.changed, mm.moved = flashsale.OrderExpired, true, true
			want++
		}
	}
	if got := mm.e.svc.Reap(context.Background()); got != want {
		mm.fatalf(t, "reap at %s expired %d holds, want %d", mm.at(now), got, want)
	}
	mm.seen[fmt.Sprintf("reap: %d expired", min(want, 2))]++
}

// Rebuild stops the service and starts a new one on the same database with
// a fresh engine, as after a crash: Start rebuilds the engine from SQLite.
func (mm *modelMachine) Rebuild(t *rapid.T) {
	if !mm.changed {
		t.Skip("nothing to rebuild since the last restart")
	}
	mm.changed, mm.moved = false, true
	c := mm.e.clock
	mm.seen["restart"]++
	mm.close()
	mm.open(c)
	if !*modelStrictTokens {
		// Spent tokens live only in the engine's memory (inmem.Engine's
		// spent set), which a restart loses: a token spent before the
		// crash buys again until it expires. The model follows the code;
		// -funnel.stricttokens holds the service to "spent once" instead.
		for _, r := range mm.sent {
			if r.token != nil {
				r.token.spent = false
			}
		}
	}
}

// Check runs after every step: the database and the engine agree with each
// other and with the model, and every order reads as the model says.
//
// The night counters and the engine are checked after every step. The
// database's orders (its snapshot, and a read of every order by its owner)
// are checked after the steps that placed or moved an order or restarted
// the service: under -race each SQLite query costs a millisecond, and the
// reads after every refused purchase were most of the test's time. A
// refused step that touched an order row anyway is still caught, at the
// next step that moves one (a counter it touched, at once), and rapid
// shrinks the sequence to end there.
func (mm *modelMachine) Check(t *rapid.T) {
	ctx := context.Background()
	m := mm.m
	held, sold := m.counts()

	// I1 and the counters, in the database and in the engine.
	ns, err := mm.e.store.NightStocks(ctx, mm.sale.ID)
	if err != nil {
		mm.fatalf(t, "night stocks: %v", err)
	}
	avail, err := mm.e.engine.Available(ctx, mm.sale.ID)
	if err != nil {
		mm.fatalf(t, "engine available: %v", err)
	}
	for i, n := range ns {
		if n.Held+n.Sold > n.Stock {
			mm.fatalf(t, "I1: night %s oversold in the database: %+v", n.Date, n)
		}
		if n.Stock != m.stock[i] || n.Held != held[i] || n.Sold != sold[i] || n.Available != n.Stock-n.Held-n.Sold {
			mm.fatalf(t, "night %s: database stock=%d held=%d sold=%d available=%d, model stock=%d held=%d sold=%d",
				n.Date, n.Stock, n.Held, n.Sold, n.Available, m.stock[i], held[i], sold[i])
		}
		if avail[i] != n.Stock-n.Held-n.Sold {
			mm.fatalf(t, "night %s: engine available %d, database stock-held-sold %d", n.Date, avail[i], n.Stock-n.Held-n.Sold)
		}
	}

	// The engine's reservations and keys agree with the model one by one.
	esnap, err := mm.e.engine.Snapshot(ctx, mm.sale.ID)
	if err != nil {
		mm.fatalf(t, "engine snapshot: %v", err)
	}
	for _, r := range esnap.Reservations {
		o := m.orders[r.OrderID]
		if o == nil {
			mm.fatalf(t, "the engine records order %s the model never saw placed", r.OrderID)
		}
		if r.Active != o.status.Active() {
			mm.fatalf(t, "order %s: engine active=%t, model %s", r.OrderID, r.Active, o.status)
		}
	}
	for k, id := range m.keys {
		if got, err := mm.e.engine.Lookup(ctx, mm.sale.ID, k[0], k[1]); err != nil || got != id {
			mm.fatalf(t, "I4: key %q of %s names %q in the engine (%v), model %s", k[1], k[0], got, err, id)
		}
	}

	if !mm.moved {
		return
	}
	mm.moved = false

	// I3 and I4 from the database's snapshot, and every order's activity.
	snap, err := mm.e.store.Snapshot(ctx, mm.sale.ID)
	if err != nil {
		mm.fatalf(t, "snapshot: %v", err)
	}
	rooms := make(map[string]int)
	keys := make(map[[2]string]string)
	for _, r := range snap.Reservations {
		o := m.orders[r.OrderID]
		if o == nil {
			mm.fatalf(t, "the database has order %s the model never saw placed", r.OrderID)
		}
		if r.Active != o.status.Active() {
			mm.fatalf(t, "order %s: database active=%t, model %s", r.OrderID, r.Active, o.status)
		}
		if r.Active {
			rooms[r.UserID] += r.Rooms
		}
		if r.IdempotencyKey != "" {
			k := [2]string{r.UserID, r.IdempotencyKey}
			if prev, ok := keys[k]; ok {
				mm.fatalf(t, "I4: key %q of %s names orders %s and %s", r.IdempotencyKey, r.UserID, prev, r.OrderID)
			}
			keys[k] = r.OrderID
		}
	}
	if len(snap.Reservations) != len(m.orders) {
		mm.fatalf(t, "database has %d orders, model %d", len(snap.Reservations), len(m.orders))
	}
	for _, u := range modelUsers {
		if rooms[u] > m.limit {
			mm.fatalf(t, "I3: %s has %d active rooms, limit %d", u, rooms[u], m.limit)
		}
		if rooms[u] != m.userRooms(u) {
			mm.fatalf(t, "%s: database counts %d active rooms, model %d", u, rooms[u], m.userRooms(u))
		}
	}
	for k, id := range m.keys {
		if keys[k] != id {
			mm.fatalf(t, "I4: key %q of %s names %q in the database, model %s", k[1], k[0], keys[k], id)
		}
	}
	if len(keys) != len(m.keys) {
		mm.fatalf(t, "database binds %d keys, model %d", len(keys), len(m.keys))
	}

	// I8: every order reads, by its owner, as the model says.
	for _, id := range m.ids {
		o := m.orders[id]
		got, err := mm.e.svc.Order(ctx, modelUser(o.user), id)
		if err != nil {
			mm.fatalf(t, "I8: %s reads order %s: %v", o.user, id, err)
		}
		if got.Status != o.status || got.FirstNight != o.first || got.Nights != o.nights || got.Rooms != o.rooms ||
			!got.HoldExpiresAt.Equal(o.expires) {
			mm.fatalf(t, "order %s reads %s, model %s %d room(s) from night %d for %d until %s", id, mm.orderString(got),
				o.status, o.rooms, o.first, o.nights, mm.at(o.expires))
		}
	}
}
