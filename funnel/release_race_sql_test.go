package funnel_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/postgres"
)

// switchEngine is gatedEngine with gates a test can arm again for every
// race: an armed gate stops the next Release before it runs, or the next
// Retake after it ran, and is then disarmed.
type switchEngine struct {
	*inmem.Engine
	release, retake atomic.Pointer[gate]
}

func (e *switchEngine) Release(ctx context.Context, saleID, orderID string) error {
	e.release.Swap(nil).pass() // pass is a no-op on a nil gate
	return e.Engine.Release(ctx, saleID, orderID)
}

func (e *switchEngine) Retake(ctx context.Context, saleID, orderID string) error {
	err := e.Engine.Retake(ctx, saleID, orderID)
	e.retake.Swap(nil).pass()
	return err
}

// raceLog keeps what the service logged at warn and above during one race,
// to print beside a race that went wrong.
type raceLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *raceLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// take returns what was logged since the last take.
func (l *raceLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.String()
	l.buf.Reset()
	return s
}

// mustOpenSQLRace is mustOpen over a MySQL/MariaDB or PostgreSQL store (a
// database of the test's own) and a switchEngine.
func mustOpenSQLRace(tb testing.TB, store flashsale.Store, g *switchEngine, log *raceLog) *env {
	tb.Helper()
	ctx := context.Background()
	c := newClock()
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, logger)
	testenv.Load(tb) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{
		Store: store, Engine: flashsale.EngineOf(g), Writer: writer,
		Secret: []byte("test-secret"), Now: c.Now, ReapInterval: time.Hour,
		AuditInterval: -1, // a repair would hide what the race left behind
		Logger:        logger,
	})
	if err := svc.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	e := &env{svc: svc, store: store, engine: g.Engine, writer: writer, clock: c}
	tb.Cleanup(func() { e.close(tb) })
	return e
}

// TestPaidWhileReaperReleasesSQL is TestPaidWhileReaperReleases on the
// stores of the distributed shape, where the reaper's ExpireHolds and the
// payment's Transition run on separate connections at once (FOR UPDATE
// SKIP LOCKED on the orders, row locks on the counters), unlike SQLite's
// single writer. Every race is a fresh sale whose only hold is due, paid
// for while two reapers run. Afterwards the order is either paid, its
// rooms sold in the database and taken in the engine, or expired with
// hold_expired answered, its rooms free in both (or the rival's); never
// one without the other, and the database's counters equal the engine's.
//
// Alone, nobody else wants the rooms: the races run free, or in the two
// orderings TestPaidWhileReaperReleases forces. Rival adds a guest who
// keeps trying to buy the rooms the hold gives back (bob), or the same
// guest buying again against her limit of 1 (alice): exactly one of the
// payment and the rival may win.
//
// -funnel.races=N runs N races per store and case (default 120, 20 with -short).
func TestPaidWhileReaperReleasesSQL(t *testing.T) {
	rounds := *sqlRaces
	if testing.Short() {
		rounds = min(rounds, 20)
	}
	stores := []struct {
		name string
		open func(t *testing.T) flashsale.Store
	}{
		{"MySQL", func(t *testing.T) flashsale.Store {
			ctx := context.Background()
			store, err := mysql.Open(ctx, testenv.MySQLDatabase(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Migrate(ctx); err != nil {
				store.Close()
				t.Fatal(err)
			}
			return store.Roles()
		}},
		{"PostgreSQL", func(t *testing.T) flashsale.Store {
			ctx := context.Background()
			store, err := postgres.Open(ctx, testenv.PostgresDatabase(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Migrate(ctx); err != nil {
				store.Close()
				t.Fatal(err)
			}
			return store.Roles()
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			t.Run("Alone", func(t *testing.T) { paidRaces(t, st.open(t), rounds, false) })
			t.Run("Rival", func(t *testing.T) { paidRaces(t, st.open(t), rounds, true) })
		})
	}
}

var sqlRaces = flag.Int("funnel.races", 120, "TestPaidWhileReaperReleasesSQL: races per store and case")

// raceRival is who else wants the hold's rooms while it is paid for.
type raceRival int

const (
	noRival    raceRival = iota
	otherGuest           // bob buys the last room
	sameGuest            // alice buys again, which her limit of 1 allows only if the first order is not paid
)

func (r raceRival) String() string {
	return [...]string{"no rival", "bob buys the room", "alice buys again"}[r]
}

// raceOrdering says how the payment meets the reaper.
type raceOrdering int

const (
	freeRace                    raceOrdering = iota // everyone at once, the scheduler decides
	releaseAfterPaid                                // paid while the reaper's engine Release is held back
	releaseBetweenRetakeAndPaid                     // the Release lands between the payment's Retake and its Transition
)

func (o raceOrdering) String() string {
	return [...]string{"free", "release after paid", "release between retake and paid"}[o]
}

// paidRaces runs rounds races on store, each on a sale of its own, and
// checks each. It goes on past a broken race, to say how often it breaks;
// the first broken race is shown in full.
func paidRaces(t *testing.T, store flashsale.Store, rounds int, rivals bool) {
	g := &switchEngine{Engine: inmem.NewEngine()}
	log := &raceLog{}
	e := mustOpenSQLRace(t, store, g, log)
	outcomes := make(map[string]int)
	broken := 0
	start := time.Now()
	for i := range rounds {
		ordering, rival := raceOrdering(i%3), noRival
		if rivals {
			ordering, rival = freeRace, otherGuest+raceRival(i%2)
		}
		name := fmt.Sprintf("race %d (%s, %s)", i, ordering, rival)
		log.take()
		outcome, problems, details := paidRace(t, e, g, name, ordering, rival)
		outcomes[fmt.Sprintf("%s, %s: %s", ordering, rival, outcome)]++
		if len(problems) == 0 {
			continue
		}
		if broken++; broken == 1 {
			t.Errorf("%s:\n  %s\n%s  the service logged:\n%s", name, strings.Join(problems, "\n  "), details, log.take())
		}
	}
	t.Logf("%d races in %v: %v", rounds, time.Since(start).Round(time.Millisecond), outcomes)
	if broken > 0 {
		t.Errorf("%d of %d races broke an invariant; the first is shown above", broken, rounds)
	}
}

// paidRace is one race: a fresh sale, alice's hold past its expiry, then
// MarkPaid, two reapers and the rival. It returns how the payment ended,
// what went wrong, and the state of the sale if anything did.
func paidRace(t *testing.T, e *env, g *switchEngine, name string, ordering raceOrdering, rival raceRival) (outcome string, problems []string, details string) {
	t.Helper()
	ctx := context.Background()
	stock := 1
	if rival == sameGuest {
		stock = 2 // her second order finds a room: only her limit refuses it
	}
	nights := 1 + rand.IntN(2)
	s := e.sale(t, func(s *flashsale.Sale) {
		s.PurchaseToken = false
		s.EndsAt = e.clock.Now().Add(1000 * time.Hour) // every race advances the clock
	}, repeatInt(stock, nights)...)
	held, err := e.svc.Purchase(ctx, alice, flashsale.PurchaseRequest{SaleID: s.ID, Nights: nights})
	if err != nil {
		t.Fatalf("%s: alice's purchase: %v", name, err)
	}
	e.clock.Advance(time.Duration(s.HoldSeconds+1) * time.Second)

	var (
		wg               sync.WaitGroup
		paid, rived      *flashsale.Order
		payErr, rivalErr error
		reaped           atomic.Int64
		payAnswered      atomic.Bool
	)
	pay := func() {
		paid, payErr = e.svc.MarkPaid(ctx, held.ID, "pay-"+held.ID)
		payAnswered.Store(true)
	}
	reap := func() { reaped.Add(int64(e.svc.Reap(ctx))) }

	switch ordering {
	case freeRace:
		// Each party starts after a random delay; the payment's spans
		// the time a reap takes, so it lands before, inside and after it.
		gate := make(chan struct{})
		jitter := func(upTo time.Duration, f func()) func() {
			d := rand.N(upTo)
			return func() { <-gate; time.Sleep(d); f() }
		}
		wg.Go(jitter(6*time.Millisecond, pay))
		wg.Go(jitter(time.Millisecond, reap))
		wg.Go(jitter(2*time.Millisecond, reap))
		// The rival keeps trying, as a guest watching the room would,
		// until it gets the rooms or, once more after, the payment has
		// answered.
		buy := func(u flashsale.User) func() {
			return func() {
				for range 1000 {
					payDone := payAnswered.Load()
					rived, rivalErr = e.svc.Purchase(ctx, u, flashsale.PurchaseRequest{SaleID: s.ID, Nights: nights})
					if rivalErr == nil || payDone {
						return
					}
					time.Sleep(200 * time.Microsecond)
				}
			}
		}
		switch rival {
		case otherGuest:
			wg.Go(jitter(3*time.Millisecond, buy(bob)))
		case sameGuest:
			wg.Go(jitter(3*time.Millisecond, buy(alice)))
		}
		close(gate)
		wg.Wait()

	case releaseAfterPaid:
		rel := newGate()
		g.release.Store(rel)
		wg.Go(reap)
		<-rel.entered // expired in the database, still active in the engine
		pay()
		close(rel.proceed)
		wg.Wait()

	case releaseBetweenRetakeAndPaid:
		rel, ret := newGate(), newGate()
		g.release.Store(rel)
		wg.Go(reap)
		<-rel.entered
		g.retake.Store(ret)
		wg.Go(pay)
		<-ret.entered // the payment's Retake found the reservation active and did nothing
		close(rel.proceed)
		for reaped.Load() == 0 {
			// The reaper's Release and recheck run now; the payment
			// waits at its gate until they are done.
			time.Sleep(time.Millisecond)
		}
		close(ret.proceed)
		wg.Wait()
	}
	e.svc.Reap(ctx) // anything a skipped lock left due

	outcome = "paid"
	if payErr != nil {
		outcome = flashsale.ErrorCode(payErr)
	}
	problems = checkPaidRace(e, s, held, paid, payErr, rival, rived, rivalErr, reaped.Load())
	if len(problems) > 0 {
		details = saleState(e, s.ID)
	}
	// End the rival's hold so it cannot expire into a later race.
	if rivalErr == nil && rived != nil {
		if _, err := e.svc.Cancel(ctx, flashsale.User{ID: rived.UserID}, rived.ID); err != nil {
			t.Errorf("%s: cancel the rival's order: %v", name, err)
		}
	}
	return outcome, problems, details
}

// checkPaidRace checks one race's end: the payment's answer, the order in
// the database and in the engine, the night counters against the engine
// and the orders, and the rival's answer against the payment's.
func checkPaidRace(e *env, s *flashsale.Sale, held, paid *flashsale.Order, payErr error,
	rival raceRival, rived *flashsale.Order, rivalErr error, reaped int64) []string {
	ctx := context.Background()
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	payOK := payErr == nil && paid != nil && paid.Status == flashsale.OrderPaid
	switch {
	case payOK:
	case errors.Is(payErr, flashsale.ErrHoldExpired):
		if rival == noRival {
			fail("the payment answered hold_expired with nobody else after the rooms")
		}
	default:
		fail("the payment answered %+v, %v; want paid or hold_expired", paid, payErr)
		return problems
	}
	if reaped > 1 {
		fail("the reapers expired %d holds, want at most 1", reaped)
	}

	db, err := e.store.Order(ctx, held.ID)
	if err != nil {
		fail("read the order: %v", err)
		return problems
	}
	r, err := e.engine.Reservation(ctx, held.ID)
	if err != nil {
		fail("the engine lost the order: %v", err)
		return problems
	}
	switch {
	case payOK && db.Status != flashsale.OrderPaid:
		fail("the payment answered paid, the database says %s", db.Status)
	case !payOK && db.Status != flashsale.OrderExpired:
		fail("the payment answered hold_expired, the database says %s", db.Status)
	}
	switch {
	case db.Status == flashsale.OrderPaid && !r.Active:
		fail("paid in the database, its rooms free in the engine")
	case db.Status == flashsale.OrderExpired && r.Active:
		fail("expired in the database, its rooms still taken in the engine")
	}

	ns, err := e.store.NightStocks(ctx, s.ID)
	if err != nil {
		fail("night stocks: %v", err)
		return problems
	}
	avail, err := e.engine.Available(ctx, s.ID)
	if err != nil {
		fail("engine available: %v", err)
		return problems
	}
	snap, err := e.store.Snapshot(ctx, s.ID)
	if err != nil {
		fail("snapshot: %v", err)
		return problems
	}
	taken := make([]int, len(ns))
	for _, r := range snap.Reservations {
		if r.Active {
			for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
				taken[i] += r.Rooms
			}
		}
	}
	for i, n := range ns {
		if n.Held+n.Sold > n.Stock {
			fail("night %s oversold: %+v", n.Date, n)
		}
		if n.Held+n.Sold != taken[i] {
			fail("night %s: held+sold=%d, the active orders take %d", n.Date, n.Held+n.Sold, taken[i])
		}
		if avail[i] != n.Stock-n.Held-n.Sold {
			fail("night %s: the engine has %d left, the database stock-held-sold=%d", n.Date, avail[i], n.Stock-n.Held-n.Sold)
		}
		if payOK && n.Sold != held.Rooms || !payOK && n.Sold != 0 {
			fail("night %s: the database counts %d sold after the payment answered %s", n.Date, n.Sold, db.Status)
		}
	}

	// Exactly one of the payment and the rival gets the rooms.
	if rival != noRival {
		rivalOK := rivalErr == nil && rived != nil && rived.Status == flashsale.OrderHeld
		switch {
		case payOK && rivalOK:
			fail("both the payment and the rival (%s) got the rooms", rival)
		case !payOK && !rivalOK:
			fail("neither the payment nor the rival (%s: %v) got the rooms", rival, rivalErr)
		case !rivalOK && !errors.Is(rivalErr, flashsale.ErrSoldOut) && !errors.Is(rivalErr, flashsale.ErrLimitExceeded):
			fail("the rival (%s) got %v, want sold_out or limit_exceeded", rival, rivalErr)
		}
	}
	return problems
}

// saleState describes every order of a sale as the engine and the
// database have it, for a race that went wrong.
func saleState(e *env, saleID string) string {
	ctx := context.Background()
	var b strings.Builder
	ns, _ := e.store.NightStocks(ctx, saleID)
	avail, _ := e.engine.Available(ctx, saleID)
	for i, n := range ns {
		fmt.Fprintf(&b, "  night %s: stock=%d held=%d sold=%d in the database; engine left=%d\n", n.Date, n.Stock, n.Held, n.Sold, avail[i])
	}
	snap, err := e.engine.Snapshot(ctx, saleID)
	if err != nil {
		fmt.Fprintf(&b, "  engine snapshot: %v\n", err)
		return b.String()
	}
	slices.SortFunc(snap.Reservations, func(a, b flashsale.Reservation) int { return strings.Compare(a.OrderID, b.OrderID) })
	for _, r := range snap.Reservations {
		status, reason := "?", ""
		if o, err := e.store.Order(ctx, r.OrderID); err == nil {
			status, reason = string(o.Status), o.FailureReason
		}
		fmt.Fprintf(&b, "  order %s of %s, %d room(s): engine active=%t, database %s %s\n", r.OrderID, r.UserID, r.Rooms, r.Active, status, reason)
	}
	return b.String()
}

func repeatInt(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
