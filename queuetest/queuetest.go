// Package queuetest is the conformance suite every flashsale.Queue passes
// (the waiting room's queue: in process, and later in Redis). Each test
// uses a sale ID of its own, so queues may share a server.
package queuetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// Run runs the suite; open may return the same queue every time.
func Run(t *testing.T, open func(tb testing.TB) flashsale.Queue) {
	t.Run("JoinOnce", func(t *testing.T) { testJoinOnce(t, open(t)) })
	t.Run("DrawOrder", func(t *testing.T) { testDrawOrder(t, open(t)) })
	t.Run("AdmitInOrder", func(t *testing.T) { testAdmitInOrder(t, open(t)) })
	t.Run("Lapse", func(t *testing.T) { testLapse(t, open(t)) })
	t.Run("SkipIdle", func(t *testing.T) { testSkipIdle(t, open(t)) })
	t.Run("SoldOut", func(t *testing.T) { testSoldOut(t, open(t)) })
	t.Run("Drop", func(t *testing.T) { testDrop(t, open(t)) })
	t.Run("Storm", func(t *testing.T) { testStorm(t, open(t)) })
}

var t0 = time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC)

func saleID() string { return "q" + rand.Text()[:12] }

func seed(tb testing.TB) string {
	s, err := flashsale.NewDrawSeed()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func join(tb testing.TB, q flashsale.Queue, sale, user string, at time.Time) (flashsale.Place, bool) {
	tb.Helper()
	p, created, err := q.Join(context.Background(), sale, user, at)
	if err != nil {
		tb.Fatalf("Join(%s) = %v", user, err)
	}
	return p, created
}

func place(tb testing.TB, q flashsale.Queue, sale, user string, at time.Time) flashsale.Place {
	tb.Helper()
	p, err := q.Place(context.Background(), sale, user, at)
	if err != nil {
		tb.Fatalf("Place(%s) = %v", user, err)
	}
	return p
}

func admit(tb testing.TB, q flashsale.Queue, sale string, n int, at time.Time, rule flashsale.AdmitRule) int {
	tb.Helper()
	got, err := q.Admit(context.Background(), sale, n, at, rule)
	if err != nil {
		tb.Fatalf("Admit(%d) = %v", n, err)
	}
	return got
}

func draw(tb testing.TB, q flashsale.Queue, sale, seedHex string) flashsale.Draw {
	tb.Helper()
	d, err := q.Draw(context.Background(), sale, seedHex)
	if err != nil {
		tb.Fatalf("Draw = %v", err)
	}
	return d
}

func stats(tb testing.TB, q flashsale.Queue, sale string, at time.Time) flashsale.QueueStats {
	tb.Helper()
	s, err := q.Stats(context.Background(), sale, at)
	if err != nil {
		tb.Fatalf("Stats = %v", err)
	}
	return s
}

// users joins n users u0…u(n-1) at t0 and returns their IDs.
func users(tb testing.TB, q flashsale.Queue, sale string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("u%d", i)
		join(tb, q, sale, ids[i], t0)
	}
	return ids
}

var rule = flashsale.AdmitRule{For: time.Minute}

// testJoinOnce: a user has one place, whatever the number of joins; a
// place has a ticket of its own and no rank before the draw; a user who
// never joined has no place.
func testJoinOnce(t *testing.T, q flashsale.Queue) {
	sale := saleID()
	a, created := join(t, q, sale, "alice", t0)
	if !created || a.Ticket == "" || a.State != flashsale.QueueWaiting || a.Rank != 0 || a.Ahead != 0 {
		t.Fatalf("first join = %+v, created %v; want a waiting place with a ticket, no rank, created", a, created)
	}
	again, created := join(t, q, sale, "alice", t0.Add(time.Second))
	if created || again.Ticket != a.Ticket {
		t.Fatalf("second join = %+v, created %v; want the same place %s, not created", again, created, a.Ticket)
	}
	b, _ := join(t, q, sale, "bob", t0)
	if b.Ticket == a.Ticket {
		t.Fatalf("two users share ticket %s", a.Ticket)
	}
	if _, err := q.Place(context.Background(), sale, "carol", t0); !errors.Is(err, flashsale.ErrNotFound) {
		t.Fatalf("Place of a user who never joined = %v, want ErrNotFound", err)
	}
	if n := admit(t, q, sale, 10, t0, rule); n != 0 {
		t.Fatalf("Admit before the draw admitted %d, want 0", n)
	}
	if s := stats(t, q, sale, t0); s.Joined != 2 || s.Waiting != 2 || s.Drawn {
		t.Fatalf("Stats = %+v, want 2 joined and waiting, not drawn", s)
	}
}

// testDrawOrder: the draw puts the prequeue in DrawOrder's order of its
// seed, its Draw verifies, a second draw changes nothing, and later
// arrivals go to the back in arrival order.
func testDrawOrder(t *testing.T, q flashsale.Queue) {
	sale := saleID()
	ids := users(t, q, sale, 50)
	s := seed(t)
	d := draw(t, q, sale, s)
	if err := d.Verify(); err != nil {
		t.Fatalf("the draw does not verify: %v", err)
	}
	if d.SaleID != sale || d.Seed != s || len(d.Tickets) != len(ids) {
		t.Fatalf("draw = sale %s seed %s, %d tickets; want %s, %s, %d", d.SaleID, d.Seed, len(d.Tickets), sale, s, len(ids))
	}
	want, err := flashsale.DrawOrder(s, d.Tickets)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Order, want) {
		t.Fatalf("draw order is not DrawOrder's of its seed")
	}
	rankOf := map[string]int{}
	for i, tk := range d.Order {
		rankOf[tk] = i + 1
	}
	for _, u := range ids {
		p := place(t, q, sale, u, t0)
		if p.Rank != rankOf[p.Ticket] || p.Ahead != p.Rank-1 {
			t.Fatalf("%s: rank %d ahead %d, want the draw's rank %d and %d ahead", u, p.Rank, p.Ahead, rankOf[p.Ticket], rankOf[p.Ticket]-1)
		}
	}
	if again := draw(t, q, sale, seed(t)); again.Seed != s || !slices.Equal(again.Order, d.Order) {
		t.Fatalf("a second draw changed the order")
	}
	for i := range 3 {
		p, _ := join(t, q, sale, fmt.Sprintf("late%d", i), t0.Add(time.Minute))
		if p.Rank != len(ids)+i+1 {
			t.Fatalf("late arrival %d has rank %d, want %d (the back, in arrival order)", i, p.Rank, len(ids)+i+1)
		}
	}
}

// testAdmitInOrder: admissions follow the order exactly, n at a time;
// a waiting guest's Ahead only falls; Use spends an admission once and
// refuses a guest not admitted.
func testAdmitInOrder(t *testing.T, q flashsale.Queue) {
	sale := saleID()
	users(t, q, sale, 30)
	d := draw(t, q, sale, seed(t))
	byTicket := map[string]string{}
	for i := range 30 {
		u := fmt.Sprintf("u%d", i)
		byTicket[place(t, q, sale, u, t0).Ticket] = u
	}
	ahead := map[string]int{}
	for step, at := 0, t0; step*7 < 30; step, at = step+1, at.Add(time.Second) {
		if err := q.Use(context.Background(), sale, byTicket[d.Order[29]], at); !errors.Is(err, flashsale.ErrNotAdmitted) && step*7+7 < 30 {
			t.Fatalf("Use by the last in line before their turn = %v, want ErrNotAdmitted", err)
		}
		n := admit(t, q, sale, 7, at, rule)
		if want := min(7, 30-step*7); n != want {
			t.Fatalf("step %d admitted %d, want %d", step, n, want)
		}
		for i, tk := range d.Order {
			p := place(t, q, sale, byTicket[tk], at)
			if admitted := i < step*7+n; admitted != (p.State == flashsale.QueueAdmitted) {
				t.Fatalf("step %d: rank %d is %s (admitted through rank %d)", step, i+1, p.State, step*7+n)
			}
			if p.State == flashsale.QueueWaiting {
				if prev, ok := ahead[tk]; ok && p.Ahead >= prev {
					t.Fatalf("rank %d: %d ahead after %d", i+1, p.Ahead, prev)
				}
				ahead[tk] = p.Ahead
			}
		}
	}
	first := byTicket[d.Order[0]]
	for range 2 {
		if err := q.Use(context.Background(), sale, first, t0.Add(5*time.Second)); err != nil {
			t.Fatalf("Use by an admitted guest = %v", err)
		}
	}
	if s := stats(t, q, sale, t0.Add(5*time.Second)); s.Used != 1 || s.Admitted != 29 || s.Waiting != 0 {
		t.Fatalf("Stats = %+v, want 1 used, 29 admitted, none waiting", s)
	}
}

// testLapse: an admission unused for its time lapses (the guest cannot
// use it, it no longer counts as admitted); joining again goes to the
// back of the queue.
func testLapse(t *testing.T, q flashsale.Queue) {
	sale := saleID()
	users(t, q, sale, 5)
	draw(t, q, sale, seed(t))
	if n := admit(t, q, sale, 2, t0, rule); n != 2 {
		t.Fatalf("admitted %d, want 2", n)
	}
	var lapsed string
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		if place(t, q, sale, u, t0).State == flashsale.QueueAdmitted {
			lapsed = u
		}
	}
	late := t0.Add(rule.For + time.Second)
	if s := stats(t, q, sale, late); s.Admitted != 0 || s.Expired != 2 {
		t.Fatalf("Stats after the admissions ended = %+v, want none admitted, 2 expired", s)
	}
	if p := place(t, q, sale, lapsed, late); p.State != flashsale.QueueExpired {
		t.Fatalf("a lapsed admission is %s, want expired", p.State)
	}
	if err := q.Use(context.Background(), sale, lapsed, late); !errors.Is(err, flashsale.ErrNotAdmitted) {
		t.Fatalf("Use of a lapsed admission = %v, want ErrNotAdmitted", err)
	}
	p, created := join(t, q, sale, lapsed, late)
	if !created || p.State != flashsale.QueueWaiting || p.Rank != 6 || p.Ahead != 3 {
		t.Fatalf("joining again = %+v (created %v), want waiting at rank 6 behind the 3 still waiting", p, created)
	}
}

// testSkipIdle: a guest not seen for longer than IdleAfter is skipped when
// their turn comes, and the next one is admitted in their stead.
func testSkipIdle(t *testing.T, q flashsale.Queue) {
	sale := saleID()
	users(t, q, sale, 4)
	d := draw(t, q, sale, seed(t))
	at := t0.Add(time.Minute)
	byTicket := map[string]string{}
	for i := range 4 {
		u := fmt.Sprintf("u%d", i)
		p := place(t, q, sale, u, t0)
		byTicket[p.Ticket] = u
	}
	// Everyone but the first in line reads their place again.
	for _, tk := range d.Order[1:] {
		place(t, q, sale, byTicket[tk], at)
	}
	idle := flashsale.AdmitRule{For: time.Minute, IdleAfter: 30 * time.Second}
	if n := admit(t, q, sale, 1, at.Add(time.Second), idle); n != 1 {
		t.Fatalf("admitted %d, want 1", n)
	}
	if p := place(t, q, sale, byTicket[d.Order[0]], at); p.State != flashsale.QueueExpired {
		t.Fatalf("the idle first in line is %s, want expired (skipped)", p.State)
	}
	if p := place(t, q, sale, byTicket[d.Order[1]], at); p.State != flashsale.QueueAdmitted {
		t.Fatalf("the second in line is %s, want admitted in the idle one's stead", p.State)
	}
}

// testSoldOut: while sold out, waiting guests read sold_out and keep their
// places, nobody new joins, nobody is admitted; reopened, the queue moves
// on in the same order.
func testSoldOut(t *testing.T, q flashsale.Queue) {
	ctx := context.Background()
	sale := saleID()
	users(t, q, sale, 3)
	draw(t, q, sale, seed(t))
	before := place(t, q, sale, "u1", t0)
	if err := q.SetSoldOut(ctx, sale, true); err != nil {
		t.Fatal(err)
	}
	if p := place(t, q, sale, "u1", t0); p.State != flashsale.QueueSoldOut || p.Rank != before.Rank {
		t.Fatalf("a waiting guest of a sold-out queue = %+v, want sold_out at rank %d", p, before.Rank)
	}
	if _, _, err := q.Join(ctx, sale, "newcomer", t0); !errors.Is(err, flashsale.ErrSoldOut) {
		t.Fatalf("a new join while sold out = %v, want ErrSoldOut", err)
	}
	if p, created := join(t, q, sale, "u1", t0); created || p.Ticket != before.Ticket {
		t.Fatalf("joining again while sold out = %+v, want the same place", p)
	}
	if n := admit(t, q, sale, 3, t0, rule); n != 0 || !stats(t, q, sale, t0).SoldOut {
		t.Fatalf("admitted %d while sold out, want 0", n)
	}
	if err := q.SetSoldOut(ctx, sale, false); err != nil {
		t.Fatal(err)
	}
	if p := place(t, q, sale, "u1", t0); p.State != flashsale.QueueWaiting || p.Rank != before.Rank {
		t.Fatalf("reopened: %+v, want waiting at rank %d", p, before.Rank)
	}
	if n := admit(t, q, sale, 3, t0, rule); n != 3 {
		t.Fatalf("reopened: admitted %d, want 3", n)
	}
}

// testDrop: a dropped queue is gone.
func testDrop(t *testing.T, q flashsale.Queue) {
	ctx := context.Background()
	sale := saleID()
	users(t, q, sale, 2)
	if err := q.Drop(ctx, sale); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Place(ctx, sale, "u0", t0); !errors.Is(err, flashsale.ErrNotFound) {
		t.Fatalf("Place after Drop = %v, want ErrNotFound", err)
	}
	if s := stats(t, q, sale, t0); s.Joined != 0 {
		t.Fatalf("Stats after Drop = %+v, want zero", s)
	}
}

// testStorm: 2 000 users join at once, each twice, from many goroutines:
// one place each, one ticket each. After the draw, admission steps from
// several goroutines at once admit every place exactly once.
func testStorm(t *testing.T, q flashsale.Queue) {
	const n = 2000
	sale := saleID()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		tickets = map[string]map[string]bool{} // user → tickets they were given
		errs    []error
	)
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		for range 2 {
			wg.Go(func() {
				p, _, err := q.Join(context.Background(), sale, u, t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				if tickets[u] == nil {
					tickets[u] = map[string]bool{}
				}
				tickets[u][p.Ticket] = true
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	seen := map[string]bool{}
	for u, ts := range tickets {
		if len(ts) != 1 {
			t.Fatalf("%s was given %d tickets, want 1", u, len(ts))
		}
		for tk := range ts {
			if seen[tk] {
				t.Fatalf("ticket %s given to two users", tk)
			}
			seen[tk] = true
		}
	}
	if s := stats(t, q, sale, t0); s.Joined != n || s.Waiting != n {
		t.Fatalf("Stats after the storm = %+v, want %d joined and waiting", s, n)
	}
	draw(t, q, sale, seed(t))
	var admitted atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				got, err := q.Admit(context.Background(), sale, 13, t0, rule)
				if err != nil || got == 0 {
					return
				}
				admitted.Add(int64(got))
			}
		})
	}
	wg.Wait()
	if admitted.Load() != n {
		t.Fatalf("admission steps admitted %d in all, want each of %d once", admitted.Load(), n)
	}
	if s := stats(t, q, sale, t0); s.Admitted != n || s.Waiting != 0 {
		t.Fatalf("Stats = %+v, want all %d admitted", s, n)
	}
}
