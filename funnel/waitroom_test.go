package funnel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// roomEnv is a Service with a waiting room's queue, whose admission loop
// the test steps by hand with its own clock; limits, if any, are counted
// in process.
func roomEnv(tb testing.TB, limits ...funnel.Limits) *env {
	tb.Helper()
	return roomEnvOn(tb, inmem.NewQueue(), limits...)
}

// roomEnvOn is roomEnv with the given queue.
func roomEnvOn(tb testing.TB, q flashsale.Queue, limits ...funnel.Limits) *env {
	tb.Helper()
	return mustOpenWith(tb, filepath.Join(tb.TempDir(), "fs.db"), newClock(), func(cfg *funnel.Config) {
		cfg.Queue, cfg.AdmitTick = q, time.Hour
		if len(limits) > 0 {
			l := inmem.NewLimiter()
			tb.Cleanup(func() { l.Close() })
			cfg.Limiter, cfg.Limits = l, limits[0]
		}
	})
}

// TestWaitingRoom: 10 000 guests join a waiting room of 100 rooms before the
// start. The published draw verifies, with the commitment given before the
// start; admissions follow its order exactly, at the sale's rate, and never
// beyond the rooms the engine has left less the admissions unused; a guest
// not admitted is refused a token (not_admitted); once every room is held
// every waiting guest reads sold_out, and a hold cancelled admits the next
// in line; an admission that lapses unused admits the next in line too.
func TestWaitingRoom(t *testing.T) {
	for name, open := range queues() {
		t.Run(name, func(t *testing.T) { testWaitingRoom(t, roomEnvOn(t, open(t))) })
	}
}

// queues are the Queue implementations, as the two shapes have them: in
// process, and in Redis (on a prefix of the test's own).
func queues() map[string]func(testing.TB) flashsale.Queue {
	return map[string]func(testing.TB) flashsale.Queue{
		"InMemory": func(testing.TB) flashsale.Queue { return inmem.NewQueue() },
		"Redis":    func(tb testing.TB) flashsale.Queue { return openRedis(tb, "fs-room-").Queue() },
	}
}

func testWaitingRoom(t *testing.T, e *env) {
	ctx := context.Background()
	const guests, rooms = 10_000, 100
	start := e.clock.Now().Add(5 * time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.PerUserLimit = 1
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 10, AdmitPerSecond: 40, AdmissionSeconds: 30}
	}, rooms)
	user := func(i int) flashsale.User { return flashsale.User{ID: fmt.Sprintf("g%04d", i)} }

	// Everyone joins before the start, at once, some twice.
	var wg sync.WaitGroup
	errs := make(chan error, guests)
	for i := range guests {
		wg.Go(func() {
			for range 1 + i%2 {
				if _, _, err := e.svc.JoinQueue(ctx, user(i), flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v, created, err := e.svc.JoinQueue(ctx, user(0), flashsale.JoinRequest{SaleID: sale.ID}); err != nil || created || v.State != flashsale.QueueWaiting {
		t.Fatalf("joining again = %+v, %v, %v; want the same waiting place", v, created, err)
	}
	if _, err := e.svc.IssueToken(ctx, user(0), flashsale.TokenRequest{SaleID: sale.ID}); !errors.Is(err, flashsale.ErrNotStarted) {
		t.Fatalf("token before the start = %v, want not started", err)
	}
	before, err := e.svc.QueueDraw(ctx, sale.ID)
	if err != nil || before.Commitment == "" || before.Seed != "" || len(before.Tickets) != 0 {
		t.Fatalf("draw before the start = %+v, %v; want the commitment alone", before, err)
	}

	e.clock.Advance(5 * time.Minute) // the start
	e.svc.AdmitStep(ctx)
	d, err := e.svc.QueueDraw(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Commitment != before.Commitment || len(d.Order) != guests {
		t.Fatalf("the draw after the start: commitment %s (before %s), %d in order; want the same, %d", d.Commitment, before.Commitment, len(d.Order), guests)
	}
	if err := d.Verify(); err != nil {
		t.Fatalf("the published draw does not verify: %v", err)
	}
	// Who holds each ticket, as the guests themselves read it.
	rank := map[string]int{} // user → place in the draw's order
	byTicket := map[string]int{}
	for i, tk := range d.Order {
		byTicket[tk] = i
	}
	tickets := map[string]string{}
	for i := range guests {
		v, err := e.svc.QueueStatus(ctx, user(i), sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != flashsale.QueueWaiting || v.Position < 1 {
			t.Fatalf("%s at the start: %+v, want waiting with a position", user(i).ID, v)
		}
		rank[user(i).ID] = v.Position - 1
		tickets[user(i).ID] = d.Order[v.Position-1]
	}
	if len(byTicket) != guests {
		t.Fatalf("%d distinct tickets in the order, want %d", len(byTicket), guests)
	}

	// admittedNow lists who is admitted and unused, checking the bound.
	admittedNow := func() []int {
		t.Helper()
		var got []int
		for i := range guests {
			v, err := e.svc.QueueStatus(ctx, user(i), sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			if v.State == flashsale.QueueAdmitted && v.AdmittedUntil != nil {
				got = append(got, rank[user(i).ID])
			}
		}
		slices.Sort(got)
		return got
	}
	left := func() int {
		n := 0
		for _, ns := range e.nights(t, sale.ID) {
			n += ns.Available
		}
		return n
	}

	// One second at 40 a second admits the first 40 in the draw's order.
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if got := admittedNow(); !slices.Equal(got, seq(0, 40)) {
		t.Fatalf("after one second: admitted places %v, want the draw's first 40", got)
	}
	// A guest further back is refused a token; an admitted one buys.
	if _, err := e.svc.IssueToken(ctx, user(indexOf(rank, 500)), flashsale.TokenRequest{SaleID: sale.ID}); !errors.Is(err, flashsale.ErrNotAdmitted) {
		t.Fatalf("token for the 501st in line = %v, want not_admitted", err)
	}
	bought := map[int]*flashsale.Order{}
	for r := range 40 {
		o, err := e.buy(t, user(indexOf(rank, r)), flashsale.PurchaseRequest{SaleID: sale.ID})
		if err != nil {
			t.Fatalf("admitted guest %d: %v", r, err)
		}
		bought[r] = o
	}
	// The rate allows 40 more each second; the rooms, 60 then 20.
	for step, want := range []int{80, 100} {
		e.clock.Advance(time.Second)
		e.svc.AdmitStep(ctx)
		got := admittedNow()
		if n := len(got) + len(bought); n != want {
			t.Fatalf("step %d: %d admitted in all, want %d", step, n, want)
		}
		if len(got) > left() {
			t.Fatalf("step %d: %d admitted unused with %d rooms left", step, len(got), left())
		}
		for _, r := range got {
			if _, ok := bought[r]; !ok && r >= want {
				t.Fatalf("step %d: place %d admitted beyond the first %d", step, r, want)
			}
		}
		for _, r := range got {
			o, err := e.buy(t, user(indexOf(rank, r)), flashsale.PurchaseRequest{SaleID: sale.ID})
			if err != nil {
				t.Fatalf("admitted guest %d: %v", r, err)
			}
			bought[r] = o
		}
	}
	// Every room is held: the first step to find that notes it, the next
	// (no admission used between them) turns the queue sold out for
	// everyone waiting, and their streams are woken at that step.
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	moved, err := e.svc.QueueMoved(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	select {
	case <-moved:
	default:
		t.Fatal("the step that sold the queue out did not wake its streams")
	}
	// A step that changes nothing wakes nobody.
	quiet, _ := e.svc.QueueMoved(ctx, sale.ID)
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	select {
	case <-quiet:
		t.Fatal("a step that changed nothing woke the streams")
	default:
	}
	for _, r := range []int{100, 500, 999} {
		if v, _ := e.svc.QueueStatus(ctx, user(indexOf(rank, r)), sale.ID); v.State != flashsale.QueueSoldOut {
			t.Fatalf("place %d with every room held: %+v, want sold_out", r, v)
		}
	}
	if _, _, err := e.svc.JoinQueue(ctx, flashsale.User{ID: "latecomer"}, flashsale.JoinRequest{SaleID: sale.ID}); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("a new join while sold out = %v, want sold_out", err)
	}
	// A cancelled hold gives its room back: the next in line is admitted.
	if _, err := e.svc.Cancel(ctx, user(indexOf(rank, 7)), bought[7].ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if got := admittedNow(); !slices.Equal(got, []int{100}) {
		t.Fatalf("after a cancel: admitted %v, want place 100 alone", got)
	}
	if v, _ := e.svc.QueueStatus(ctx, user(indexOf(rank, 101)), sale.ID); v.State != flashsale.QueueSoldOut {
		t.Fatalf("place 101 after the one room went to place 100: %s, want sold_out", v.State)
	}
	// While place 100 has not used its admission, its room is promised.
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if got := admittedNow(); !slices.Equal(got, []int{100}) {
		t.Fatalf("a step later, place 100's admission unused: admitted %v, want place 100 alone", got)
	}
	// Place 100 lets its admission lapse: place 101 gets the room.
	e.clock.Advance(30 * time.Second)
	e.svc.AdmitStep(ctx)
	if got := admittedNow(); !slices.Equal(got, []int{101}) {
		t.Fatalf("after a lapsed admission: admitted %v, want place 101 alone", got)
	}
	if v, _ := e.svc.QueueStatus(ctx, user(indexOf(rank, 100)), sale.ID); v.State != flashsale.QueueExpired {
		t.Fatalf("place 100 after its admission lapsed: %s, want expired", v.State)
	}
	// Place 101 buys the room; then the holds run out unpaid (the reaper
	// expires them): their rooms admit the next in line, in order.
	if _, err := e.buy(t, user(indexOf(rank, 101)), flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(sale.HoldDuration() + time.Second)
	if n := e.svc.Reap(ctx); n != 100 {
		t.Fatalf("the reaper expired %d holds, want the 100 unpaid", n)
	}
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if got := admittedNow(); !slices.Equal(got, seq(102, 142)) {
		t.Fatalf("after the holds expired: admitted %v, want the next 40 in line (the rate), 102 to 141", got)
	}
}

// seq is [from, to).
func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// indexOf is the guest number at place r of the order.
func indexOf(rank map[string]int, r int) int {
	for u, p := range rank {
		if p == r {
			var i int
			fmt.Sscanf(u, "g%04d", &i)
			return i
		}
	}
	panic(fmt.Sprintf("no guest at place %d", r))
}

// TestJoinGuards: on a sale with a proof-of-work challenge a new place
// needs a solved puzzle of the user's own (and the admitted guest's token
// then needs none); joins count against the per-user and per-address
// rates, a second join of one's own place does not; a sale without a
// waiting room has no queue.
func TestJoinGuards(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t, funnel.Limits{PerUser: flashsale.Rate{N: 1, Per: time.Minute, Burst: 1},
		PerIP: flashsale.Rate{N: 2, Per: time.Minute, Burst: 2}})
	start := e.clock.Now().Add(time.Minute)
	room := func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 10, AdmissionSeconds: 30}
		s.Challenge.Difficulty = testDifficulty
	}
	sale := e.sale(t, room, 5)
	solved := func(u flashsale.User) flashsale.JoinRequest {
		t.Helper()
		p, err := e.svc.Challenge(ctx, u, sale.ID)
		if err != nil {
			t.Fatal(err)
		}
		return flashsale.JoinRequest{SaleID: sale.ID, Challenge: p.Challenge, Solution: funnel.Solve(p.Challenge, p.Difficulty), ClientIP: "192.0.2.1"}
	}
	if _, _, err := e.svc.JoinQueue(ctx, alice, flashsale.JoinRequest{SaleID: sale.ID, ClientIP: "192.0.2.1"}); flashsale.ErrorCode(err) != flashsale.EChallengeFailed {
		t.Fatalf("a join without the puzzle = %v, want challenge_failed", err)
	}
	bobs := solved(bob)
	if _, _, err := e.svc.JoinQueue(ctx, alice, bobs); flashsale.ErrorCode(err) != flashsale.EChallengeFailed {
		t.Fatalf("a join with another user's solution = %v, want challenge_failed", err)
	}
	if _, created, err := e.svc.JoinQueue(ctx, alice, solved(alice)); err != nil || !created {
		t.Fatalf("a join with a solved puzzle = %v, %v", created, err)
	}
	// Her own place again: no puzzle, no limit.
	if _, created, err := e.svc.JoinQueue(ctx, alice, flashsale.JoinRequest{SaleID: sale.ID}); err != nil || created {
		t.Fatalf("joining again = %v, %v; want the same place", created, err)
	}
	// A second sale: alice's per-user join rate is spent, and the address
	// has one join left, which bob takes; carol is refused by the address.
	other := e.sale(t, func(s *flashsale.Sale) { room(s); s.Challenge.Difficulty = 0 }, 5)
	if _, _, err := e.svc.JoinQueue(ctx, alice, flashsale.JoinRequest{SaleID: other.ID, ClientIP: "192.0.2.9"}); !errors.Is(err, flashsale.ErrRateLimited) {
		t.Fatalf("alice's second new place within the minute = %v, want rate_limited", err)
	}
	if _, _, err := e.svc.JoinQueue(ctx, bob, flashsale.JoinRequest{SaleID: other.ID, ClientIP: "192.0.2.1"}); err != nil {
		t.Fatalf("bob from the same address: %v", err)
	}
	if _, _, err := e.svc.JoinQueue(ctx, carol, flashsale.JoinRequest{SaleID: other.ID, ClientIP: "192.0.2.1"}); !errors.Is(err, flashsale.ErrRateLimited) {
		t.Fatalf("a third join from one address within the minute = %v, want rate_limited", err)
	}
	// Admitted, alice's token needs no second puzzle.
	e.clock.Advance(time.Minute + time.Second)
	e.svc.AdmitStep(ctx)
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if _, err := e.svc.IssueToken(ctx, alice, flashsale.TokenRequest{SaleID: sale.ID}); err != nil {
		t.Fatalf("the admitted guest's token: %v", err)
	}
	plain := e.sale(t, nil, 5)
	if _, _, err := e.svc.JoinQueue(ctx, alice, flashsale.JoinRequest{SaleID: plain.ID}); flashsale.ErrorCode(err) != flashsale.ENotFound {
		t.Fatalf("joining a sale without a waiting room = %v, want not_found", err)
	}
}

// TestQueueReport: the operators see the queue's counts and the draw's
// commitment before the start, the seed once drawn, and a pace changed
// while the sale runs takes effect at the next step.
func TestQueueReport(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t)
	start := e.clock.Now().Add(time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 1, AdmissionSeconds: 30}
	}, 50)
	for i := range 20 {
		if _, _, err := e.svc.JoinQueue(ctx, flashsale.User{ID: fmt.Sprintf("r%02d", i)}, flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.svc.QueueReport(ctx, sale.ID)
	if err != nil || r.Stats.Joined != 20 || r.Stats.Waiting != 20 || r.Stats.Drawn || r.Commitment == "" || r.Seed != "" || r.Rate != 1 {
		t.Fatalf("report before the start = %+v, %v", r, err)
	}
	e.clock.Advance(time.Minute)
	e.svc.AdmitStep(ctx)
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	d, _ := e.svc.QueueDraw(ctx, sale.ID)
	r, err = e.svc.QueueReport(ctx, sale.ID)
	if err != nil || !r.Stats.Drawn || r.Seed != d.Seed || r.Stats.Admitted != 1 {
		t.Fatalf("report after the start = %+v, %v; want drawn, the draw's seed, 1 admitted at 1/s", r, err)
	}
	// The operator hurries the queue while it runs.
	faster := &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 10, AdmissionSeconds: 30}
	if _, err := e.svc.UpdateSale(ctx, sale.ID, flashsale.SalePatch{WaitingRoom: &faster}); err != nil {
		t.Fatalf("a new pace after the start: %v", err)
	}
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Rate != 10 || r.Stats.Admitted != 11 {
		t.Fatalf("a second at the new pace: %+v, want 10 more admitted at 10/s", r)
	}
}

// TestQueueETA: the ETA is the measured pace of the queue's front, not the
// sale's set rate, and it does not lie. 2 000 guests join before the
// start, a third of whom stop reading their place (so they are skipped at
// their turn, and the front moves faster than the 20 a second admitted);
// the rest read their place every second. Each reader's first ETA after
// the pace is measured (30 s in) predicts their admission within 20% at
// the median (3-13% over runs; the pace shown is 95% of the measured), and
// for at least 95% of them the ETA never rises between two reads.
func TestQueueETA(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t)
	const guests, rate = 2000, 20
	start := e.clock.Now().Add(5 * time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 10, AdmitPerSecond: rate, AdmissionSeconds: 30}
	}, 5000)
	user := func(i int) flashsale.User { return flashsale.User{ID: fmt.Sprintf("e%04d", i)} }
	idle := func(i int) bool { return i%3 == 0 }
	for i := range guests {
		if _, _, err := e.svc.JoinQueue(ctx, user(i), flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(5*time.Minute - 10*time.Second)
	for i := range guests { // the readers' streams keep them seen
		if !idle(i) {
			if _, err := e.svc.QueueStatus(ctx, user(i), sale.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.clock.Advance(10 * time.Second)
	e.svc.AdmitStep(ctx)
	type reader struct {
		last     int       // the last ETA read while waiting
		rose     bool      // it rose between two reads
		predict  time.Time // admission as first predicted once measured
		admitted time.Time
	}
	readers := map[int]*reader{}
	for i := range guests {
		if !idle(i) {
			readers[i] = &reader{last: -1}
		}
	}
	measured := start.Add(30 * time.Second) // the pace has had time to settle
	for step := 0; step < 150; step++ {
		e.clock.Advance(time.Second)
		e.svc.AdmitStep(ctx)
		now := e.clock.Now()
		waiting := 0
		for i, r := range readers {
			if !r.admitted.IsZero() {
				continue
			}
			v, err := e.svc.QueueStatus(ctx, user(i), sale.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch v.State {
			case flashsale.QueueAdmitted:
				r.admitted = now
			case flashsale.QueueWaiting:
				waiting++
				if r.last >= 0 && v.ETASeconds > r.last {
					r.rose = true
				}
				r.last = v.ETASeconds
				if r.predict.IsZero() && !now.Before(measured) {
					r.predict = now.Add(time.Duration(v.ETASeconds) * time.Second)
				}
			default:
				t.Fatalf("reader %d: %+v, want waiting or admitted", i, v)
			}
		}
		if waiting == 0 {
			break
		}
	}
	var errs []float64
	rose := 0
	for i, r := range readers {
		if r.admitted.IsZero() {
			t.Fatalf("reader %d never admitted", i)
		}
		if r.rose {
			rose++
		}
		if !r.predict.IsZero() {
			if wait := r.admitted.Sub(measured).Seconds(); wait >= 10 {
				errs = append(errs, math.Abs(r.admitted.Sub(r.predict).Seconds())/wait)
			}
		}
	}
	slices.Sort(errs)
	if len(errs) < 200 {
		t.Fatalf("only %d readers waited long enough to check their ETA", len(errs))
	}
	median := errs[len(errs)/2]
	t.Logf("ETA: %d readers, %d (%.1f%%) saw it rise; prediction error median %.1f%%, p90 %.1f%% (%d checked)",
		len(readers), rose, 100*float64(rose)/float64(len(readers)), 100*median, 100*errs[len(errs)*9/10], len(errs))
	if median > 0.2 {
		t.Errorf("the ETA's median error is %.0f%%, want under 20%%", 100*median)
	}
	if float64(rose) > 0.05*float64(len(readers)) {
		t.Errorf("%d of %d readers saw their ETA rise, want at most 5%%", rose, len(readers))
	}
}

// TestQueueEnd: at the sale's end the admission loop drops its queue (the
// places leave memory; the database keeps the orders): a guest then
// reads closed, and the operators' counts are zero.
func TestQueueEnd(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t)
	start := e.clock.Now().Add(time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Minute)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 1, AdmissionSeconds: 30}
	}, 5)
	guest := flashsale.User{ID: "ender"}
	if _, _, err := e.svc.JoinQueue(ctx, guest, flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.svc.AdmitStep(ctx)
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Stats.Joined != 1 {
		t.Fatalf("report while live = %+v, want the one guest", r)
	}
	e.clock.Advance(time.Minute)
	e.svc.AdmitStep(ctx)
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Stats.Joined != 0 || r.Seed == "" {
		t.Fatalf("report after the end = %+v, want the queue dropped, the seed still shown", r)
	}
	if d, err := e.svc.QueueDraw(ctx, sale.ID); err != nil || d.Seed == "" || d.Commitment == "" {
		t.Fatalf("the draw after the end = %+v, %v; want the commitment and the seed", d, err)
	}
	e.svc.AdmitStep(ctx) // the reads above must not have made a new queue
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Stats.Joined != 0 {
		t.Fatalf("report at a later step = %+v", r.Stats)
	}
	if v, err := e.svc.QueueStatus(ctx, guest, sale.ID); err != nil || v.State != flashsale.QueueClosed {
		t.Fatalf("a guest after the end = %+v, %v; want closed", v, err)
	}
}

// TestQueueRestart: the embedded shape restarted mid-sale (its queue was
// in its memory) gives every guest back the place they had, from the
// database: the waiting at their rank with the same guests ahead, the
// admitted with their admission's end, the used as used; and it moves on
// in the same order. The records are written as places are taken (a join
// is answered only once its place is recorded).
func TestQueueRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fs.db")
	clock := newClock()
	open := func() *env {
		return mustOpenWith(t, path, clock, func(cfg *funnel.Config) { cfg.Queue, cfg.AdmitTick = inmem.NewQueue(), time.Hour })
	}
	e := open()
	start := clock.Now().Add(5 * time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 10, AdmitPerSecond: 10, AdmissionSeconds: 60}
	}, 100)
	user := func(i int) flashsale.User { return flashsale.User{ID: fmt.Sprintf("r%03d", i)} }
	const guests = 60
	for i := range guests {
		if _, _, err := e.svc.JoinQueue(ctx, user(i), flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(5*time.Minute - 10*time.Second)
	for i := range guests { // their streams keep them seen
		if _, err := e.svc.QueueStatus(ctx, user(i), sale.ID); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(10 * time.Second)
	e.svc.AdmitStep(ctx) // the draw
	clock.Advance(time.Second)
	e.svc.AdmitStep(ctx) // 10 admitted
	if _, _, err := e.svc.JoinQueue(ctx, user(guests), flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err) // a late joiner, at the back
	}
	read := func(e *env) map[string]flashsale.QueueView {
		out := map[string]flashsale.QueueView{}
		for i := range guests + 1 {
			v, err := e.svc.QueueStatus(ctx, user(i), sale.ID)
			if err != nil {
				t.Fatalf("%s: %v", user(i).ID, err)
			}
			v.ETASeconds, v.PollAfterMS = 0, 0 // the pace is this process's
			out[user(i).ID] = *v
		}
		return out
	}
	used := 0
	for i := range guests {
		if v, _ := e.svc.QueueStatus(ctx, user(i), sale.ID); v.State == flashsale.QueueAdmitted && used < 2 {
			if _, err := e.buy(t, user(i), flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
				t.Fatal(err)
			}
			used++
		}
	}
	before := read(e)
	e.close(t)

	e = open() // a new process: an empty queue, restored at the start
	after := read(e)
	admitted, waiting := 0, 0
	for u, b := range before {
		a := after[u]
		if b.Ticket != a.Ticket || b.State != a.State || b.Position != a.Position || b.Ahead != a.Ahead ||
			(b.AdmittedUntil == nil) != (a.AdmittedUntil == nil) || b.AdmittedUntil != nil && !b.AdmittedUntil.Equal(*a.AdmittedUntil) {
			t.Fatalf("%s: %+v before the restart, %+v after", u, b, a)
		}
		switch b.State {
		case flashsale.QueueAdmitted:
			admitted++
		case flashsale.QueueWaiting:
			waiting++
		}
	}
	if admitted != 10 || waiting != guests+1-10 || used != 2 {
		t.Fatalf("%d admitted, %d waiting, %d used before the restart; want 10, %d, 2", admitted, waiting, used, guests+1-10)
	}
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Stats.Used != 2 || r.Stats.Admitted != 8 {
		t.Fatalf("report after the restart = %+v, want 2 used, 8 admitted unused", r.Stats)
	}
	// It moves on in order: the guest with nobody ahead is the next one in.
	var next string
	for u, b := range before {
		if b.State == flashsale.QueueWaiting && b.Ahead == 0 {
			next = u
		}
	}
	e.svc.AdmitStep(ctx) // starts this process's clock
	clock.Advance(100 * time.Millisecond)
	e.svc.AdmitStep(ctx)
	if v, _ := e.svc.QueueStatus(ctx, flashsale.User{ID: next}, sale.ID); v.State != flashsale.QueueAdmitted {
		t.Fatalf("the next in line after the restart is %s, want admitted", v.State)
	}
}

// TestQueueTokenKeepsPromise: an admitted guest who took a purchase token
// and has not bought yet still holds their room: no step (on any
// instance) admits another guest for it, so nobody admitted is told
// sold_out at the purchase. Their token expires with their admission.
func TestQueueTokenKeepsPromise(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t)
	start := e.clock.Now().Add(time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 10, AdmissionSeconds: 30}
	}, 1)
	user := func(i int) flashsale.User { return flashsale.User{ID: fmt.Sprintf("k%d", i)} }
	for i := range 5 {
		if _, _, err := e.svc.JoinQueue(ctx, user(i), flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute)
	e.svc.AdmitStep(ctx)
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	var first flashsale.User
	var until time.Time
	for i := range 5 {
		if v, _ := e.svc.QueueStatus(ctx, user(i), sale.ID); v.State == flashsale.QueueAdmitted {
			first, until = user(i), *v.AdmittedUntil
		}
	}
	tok, err := e.svc.IssueToken(ctx, first, flashsale.TokenRequest{SaleID: sale.ID})
	if err != nil {
		t.Fatal(err)
	}
	if tok.ExpiresAt.After(until) {
		t.Fatalf("the token expires at %v, after the admission (%v)", tok.ExpiresAt, until)
	}
	for range 3 {
		e.clock.Advance(time.Second)
		e.svc.AdmitStep(ctx)
	}
	for i := range 5 {
		if v, _ := e.svc.QueueStatus(ctx, user(i), sale.ID); user(i) != first && v.State != flashsale.QueueSoldOut {
			t.Fatalf("%s while %s holds a token for the one room: %s, want sold_out", user(i).ID, first.ID, v.State)
		}
	}
	if _, err := e.svc.Purchase(ctx, first, flashsale.PurchaseRequest{SaleID: sale.ID, Token: tok.Token}); err != nil {
		t.Fatalf("the admitted guest's purchase: %v", err)
	}
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Stats.Used != 1 || r.Stats.Admitted != 0 || !r.Stats.SoldOut {
		t.Fatalf("after the purchase: %+v, want 1 used, none admitted, sold out", r.Stats)
	}
}

// TestQueueIdleSetting: QueueIdle (FLASHSALE_QUEUE_IDLE) is how long a
// guest may go without reading their place before their turn is skipped;
// negative never skips.
func TestQueueIdleSetting(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		idle    time.Duration
		skipped bool
	}{{30 * time.Second, true}, {-1, false}, {0, true}} { // 0: the default, 2 min
		e := mustOpenWith(t, filepath.Join(t.TempDir(), "fs.db"), newClock(), func(cfg *funnel.Config) {
			cfg.Queue, cfg.AdmitTick, cfg.QueueIdle = inmem.NewQueue(), time.Hour, c.idle
		})
		start := e.clock.Now().Add(5 * time.Minute)
		sale := e.sale(t, func(s *flashsale.Sale) {
			s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
			s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 10, AdmitPerSecond: 1, AdmissionSeconds: 30}
		}, 5)
		guest := flashsale.User{ID: "quiet"}
		if _, _, err := e.svc.JoinQueue(ctx, guest, flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(5 * time.Minute) // not a read since the join
		e.svc.AdmitStep(ctx)
		e.clock.Advance(time.Second)
		e.svc.AdmitStep(ctx)
		r, _ := e.svc.QueueReport(ctx, sale.ID)
		if skipped := r.Stats.Expired == 1; skipped != c.skipped {
			t.Fatalf("QueueIdle %v, a guest quiet for 5 min: %+v, want skipped %v", c.idle, r.Stats, c.skipped)
		}
	}
}

// TestQueuePauseAdmissions: an operator pauses a live waiting room's
// admissions (waiting_room.paused, an edit allowed after the start):
// nobody new is let in while an admitted guest may still buy; resumed, the
// queue moves on at its rate, with no burst banked from the pause.
func TestQueuePauseAdmissions(t *testing.T) {
	ctx := context.Background()
	e := roomEnv(t)
	start := e.clock.Now().Add(time.Minute)
	room := flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 2, AdmissionSeconds: 60}
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = new(room)
	}, 50)
	user := func(i int) flashsale.User { return flashsale.User{ID: fmt.Sprintf("p%02d", i)} }
	for i := range 20 {
		if _, _, err := e.svc.JoinQueue(ctx, user(i), flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute)
	e.svc.AdmitStep(ctx)
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	admitted := func() (in []flashsale.User) {
		for i := range 20 {
			if v, _ := e.svc.QueueStatus(ctx, user(i), sale.ID); v.State == flashsale.QueueAdmitted {
				in = append(in, user(i))
			}
		}
		return in
	}
	if n := len(admitted()); n != 2 {
		t.Fatalf("%d admitted after a second at 2/s, want 2", n)
	}
	paused := room
	paused.Paused = true
	pp := &paused
	if _, err := e.svc.UpdateSale(ctx, sale.ID, flashsale.SalePatch{WaitingRoom: &pp}); err != nil {
		t.Fatalf("pausing admissions after the start: %v", err)
	}
	for range 5 {
		e.clock.Advance(time.Second)
		e.svc.AdmitStep(ctx)
	}
	in := admitted()
	if len(in) != 2 {
		t.Fatalf("%d admitted after 5 s paused, want still 2", len(in))
	}
	if _, err := e.buy(t, in[0], flashsale.PurchaseRequest{SaleID: sale.ID}); err != nil {
		t.Fatalf("an admitted guest buying while admissions are paused: %v", err)
	}
	resumed := room
	rp := &resumed
	if _, err := e.svc.UpdateSale(ctx, sale.ID, flashsale.SalePatch{WaitingRoom: &rp}); err != nil {
		t.Fatalf("resuming admissions: %v", err)
	}
	e.clock.Advance(time.Second)
	e.svc.AdmitStep(ctx)
	if r, _ := e.svc.QueueReport(ctx, sale.ID); r.Stats.Admitted+r.Stats.Used != 4 {
		t.Fatalf("a second after resuming: %+v, want 4 let in (2 more, no burst from the pause)", r.Stats)
	}
}

// countingKeeper counts the engine's Available calls.
type countingKeeper struct {
	flashsale.StockKeeper
	calls atomic.Int64
}

func (k *countingKeeper) Available(ctx context.Context, saleID string) ([]int, error) {
	k.calls.Add(1)
	return k.StockKeeper.Available(ctx, saleID)
}

// TestQueueReadsSpareTheEngine: a step that moves the queue wakes every
// guest's stream, and each reads its place with the rooms left; 2 000
// such reads (and joins) at once ask the engine once per step's time, not
// once each. On the distributed shape 10 000 streams asking Redis each
// timed out and opened the stock engine's breaker for every sale.
func TestQueueReadsSpareTheEngine(t *testing.T) {
	ctx := context.Background()
	var keeper *countingKeeper
	e := mustOpenWith(t, filepath.Join(t.TempDir(), "fs.db"), newClock(), func(cfg *funnel.Config) {
		cfg.Queue, cfg.AdmitTick = inmem.NewQueue(), time.Hour
		keeper = &countingKeeper{StockKeeper: cfg.Engine.StockKeeper}
		cfg.Engine.StockKeeper = keeper
	})
	start := e.clock.Now().Add(time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 10, AdmissionSeconds: 60}
	}, 30)
	const guests = 2000
	var wg sync.WaitGroup
	for i := range guests {
		wg.Go(func() {
			if _, _, err := e.svc.JoinQueue(ctx, flashsale.User{ID: fmt.Sprintf("s%04d", i)}, flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	before := keeper.calls.Load()
	for i := range guests {
		wg.Go(func() {
			v, err := e.svc.QueueStatus(ctx, flashsale.User{ID: fmt.Sprintf("s%04d", i)}, sale.ID)
			if err != nil || v.RoomsLeft != 30 {
				t.Errorf("a read: %+v, %v; want 30 rooms left", v, err)
			}
		})
	}
	wg.Wait()
	mid := keeper.calls.Load()
	if n := mid - before; n > 1 {
		t.Fatalf("%d reads of their places asked the engine %d times, want once at most (the joins' read stands)", guests, n)
	}
	e.clock.Advance(time.Second) // a step's time later, the next read asks again
	if v, err := e.svc.QueueStatus(ctx, flashsale.User{ID: "s0000"}, sale.ID); err != nil || v.RoomsLeft != 30 || keeper.calls.Load() != mid+1 {
		t.Fatalf("a read a second later: %+v, %v, %d engine reads; want the engine asked again", v, err, keeper.calls.Load()-mid)
	}
}

// losingKeeper is an engine that can lose its sales (a Redis restarted
// empty): Available then answers ErrNotLoaded, AvailableOf has no sale, and
// Missing names every sale.
type losingKeeper struct {
	flashsale.StockKeeper
	lost atomic.Bool
}

func (k *losingKeeper) Available(ctx context.Context, saleID string) ([]int, error) {
	if k.lost.Load() {
		return nil, flashsale.ErrNotLoaded
	}
	return k.StockKeeper.Available(ctx, saleID)
}

func (k *losingKeeper) AvailableOf(ctx context.Context, saleIDs []string) (map[string][]int, error) {
	if k.lost.Load() {
		return map[string][]int{}, nil
	}
	return k.StockKeeper.AvailableOf(ctx, saleIDs)
}

func (k *losingKeeper) Missing(ctx context.Context, saleIDs []string) ([]string, error) {
	if k.lost.Load() {
		var missing []string
		for _, id := range saleIDs {
			if !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
		return missing, nil
	}
	return k.StockKeeper.Missing(ctx, saleIDs)
}

// TestQueueEngineLost: the moment the engine has lost the sale (and its
// queue with it, on one Redis), a join waits (503) rather than make a new
// place in the lost queue, and a guest without a place is told to wait,
// not that they never joined, though a read of the rooms left from just
// before the loss is still fresh (the check asks the engine itself).
func TestQueueEngineLost(t *testing.T) {
	ctx := context.Background()
	var keeper *losingKeeper
	e := mustOpenWith(t, filepath.Join(t.TempDir(), "fs.db"), newClock(), func(cfg *funnel.Config) {
		cfg.Queue, cfg.AdmitTick = inmem.NewQueue(), time.Hour
		keeper = &losingKeeper{StockKeeper: cfg.Engine.StockKeeper}
		cfg.Engine.StockKeeper = keeper
	})
	start := e.clock.Now().Add(time.Minute)
	sale := e.sale(t, func(s *flashsale.Sale) {
		s.StartsAt, s.EndsAt = start, start.Add(time.Hour)
		s.WaitingRoom = &flashsale.WaitingRoom{PrequeueMinutes: 5, AdmitPerSecond: 10, AdmissionSeconds: 60}
	}, 30)
	if _, _, err := e.svc.JoinQueue(ctx, flashsale.User{ID: "early"}, flashsale.JoinRequest{SaleID: sale.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.QueueStatus(ctx, flashsale.User{ID: "early"}, sale.ID); err != nil {
		t.Fatal(err) // the rooms left are read, and fresh
	}
	keeper.lost.Store(true)
	if _, err := e.svc.QueueStatus(ctx, flashsale.User{ID: "someone"}, sale.ID); flashsale.ErrorCode(err) != flashsale.EUnavailable {
		t.Fatalf("a guest without a place while the engine lost the sale: %v, want unavailable (not not_found)", err)
	}
	if _, _, err := e.svc.JoinQueue(ctx, flashsale.User{ID: "newcomer"}, flashsale.JoinRequest{SaleID: sale.ID}); flashsale.ErrorCode(err) != flashsale.EUnavailable {
		t.Fatalf("a join while the engine lost the sale: %v, want unavailable", err)
	}
}
