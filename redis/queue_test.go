package redis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/queuetest"
)

// mustOpenQueue is a Queue on url under a prefix of its own, its keys
// deleted when the test ends.
func mustOpenQueue(tb testing.TB, url string) *Queue {
	tb.Helper()
	return MustOpenEngine(tb, url, newPrefix()).Queue()
}

func TestQueue(t *testing.T) {
	url := redisURL(t)
	queuetest.Run(t, func(tb testing.TB) flashsale.Queue { return mustOpenQueue(tb, url) })
}

// TestQueueCluster runs the suite on a Redis Cluster of its own: every
// script's keys must share one slot.
func TestQueueCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	if os.Getenv(testenv.Redis) == "" && os.Getenv("CI") == "" {
		t.Skipf("set %s to run the Redis tests", testenv.Redis)
	}
	url := startCluster(t)
	queuetest.Run(t, func(tb testing.TB) flashsale.Queue { return mustOpenQueue(tb, url) })
}

var queueT0 = time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC)

func mustJoin(tb testing.TB, q *Queue, sale, user string, at time.Time) flashsale.Place {
	tb.Helper()
	p, _, err := q.Join(tb.Context(), sale, user, at)
	if err != nil {
		tb.Fatalf("Join(%s) = %v", user, err)
	}
	return p
}

func mustStep(tb testing.TB, q *Queue, sale string, at time.Time, rule flashsale.AdmitRule) int {
	tb.Helper()
	a, err := q.Admit(tb.Context(), sale, at, rule)
	if err != nil {
		tb.Fatalf("Admit = %v", err)
	}
	return len(a.Admitted)
}

// TestQueueInstances: what the suite cannot see with one Queue value, on
// several instances sharing one Redis.
func TestQueueInstances(t *testing.T) {
	url, prefix := redisURL(t), newPrefix()
	a := MustOpenEngine(t, url, prefix).Queue()
	b := MustOpenEngine(t, url, prefix).Queue()
	t.Run("Draw", func(t *testing.T) {
		// Eight draws at once from two instances, each with a seed of its
		// own: one draw, and every caller is given it.
		sale := "draw" + newPrefix()
		for i := range 200 {
			mustJoin(t, []*Queue{a, b}[i%2], sale, fmt.Sprintf("u%d", i), queueT0)
		}
		draws := make([]flashsale.Draw, 8)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range draws {
			wg.Go(func() {
				seed, _ := flashsale.NewDrawSeed()
				draws[i], errs[i] = []*Queue{a, b}[i%2].Draw(context.Background(), sale, seed)
			})
		}
		wg.Wait()
		for i := range draws {
			if errs[i] != nil {
				t.Fatalf("draw %d: %v", i, errs[i])
			}
			if diff := cmp.Diff(draws[0], draws[i]); diff != "" {
				t.Fatalf("draw %d differs from draw 0 (-0 +%d):\n%s", i, i, diff)
			}
		}
		if err := draws[0].Verify(); err != nil || len(draws[0].Order) != 200 {
			t.Fatalf("the draw of 200: %d in order, Verify = %v", len(draws[0].Order), err)
		}
		for i := range 200 {
			u := fmt.Sprintf("u%d", i)
			p, err := []*Queue{b, a}[i%2].Place(t.Context(), sale, u, queueT0)
			if err != nil {
				t.Fatal(err)
			}
			if got := draws[0].Order[p.Rank-1]; got != p.Ticket || p.Ahead != p.Rank-1 {
				t.Fatalf("%s: ticket %s at rank %d (%d ahead), the draw has %s there", u, p.Ticket, p.Rank, p.Ahead, got)
			}
		}
	})
	t.Run("JoinDuringDraw", func(t *testing.T) {
		// A join between the draw's read and its write goes to the back,
		// as a join after the draw does; it is not in the draw.
		sale := "mid" + newPrefix()
		for i := range 10 {
			mustJoin(t, a, sale, fmt.Sprintf("u%d", i), queueT0)
		}
		mid := NewQueue(a.client, a.prefix)
		var late flashsale.Place
		mid.between = func() { late = mustJoin(t, b, sale, "late", queueT0) }
		seed, _ := flashsale.NewDrawSeed()
		d, err := mid.Draw(t.Context(), sale, seed)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Verify(); err != nil || len(d.Tickets) != 10 || slices.Contains(d.Tickets, late.Ticket) {
			t.Fatalf("draw: %d tickets (the late one among them: %v), Verify = %v; want the 10 read",
				len(d.Tickets), slices.Contains(d.Tickets, late.Ticket), err)
		}
		p, err := a.Place(t.Context(), sale, "late", queueT0)
		if err != nil || p.Rank != 11 || p.Ahead != 10 {
			t.Fatalf("the late join: %+v, %v; want rank 11 behind the 10 drawn", p, err)
		}
		rule := flashsale.AdmitRule{For: time.Hour, Rate: 10, Left: 100}
		mustStep(t, a, sale, queueT0, rule)
		if n := mustStep(t, a, sale, queueT0.Add(time.Second), rule); n != 10 {
			t.Fatalf("admitted %d, want the 10 drawn", n)
		}
		if p, err := a.Place(t.Context(), sale, "late", queueT0); err != nil || p.State != flashsale.QueueWaiting || p.Ahead != 0 {
			t.Fatalf("the late join after the drawn were admitted: %+v, %v; want waiting, first", p, err)
		}
		if n := mustStep(t, a, sale, queueT0.Add(2*time.Second), rule); n != 1 {
			t.Fatalf("admitted %d, want the late join", n)
		}
	})
	t.Run("Clock", func(t *testing.T) {
		// The clock is the queue's: an instance started after another
		// stepped carries on its clock rather than starting one.
		sale := "clock" + newPrefix()
		for i := range 50 {
			mustJoin(t, a, sale, fmt.Sprintf("u%d", i), queueT0)
		}
		seed, _ := flashsale.NewDrawSeed()
		if _, err := a.Draw(t.Context(), sale, seed); err != nil {
			t.Fatal(err)
		}
		rule := flashsale.AdmitRule{For: time.Hour, Rate: 10, Left: 1000}
		if n := mustStep(t, a, sale, queueT0, rule); n != 0 {
			t.Fatalf("the first step admitted %d, want 0 (it starts the clock)", n)
		}
		restarted := NewQueue(a.client, a.prefix)
		if n := mustStep(t, restarted, sale, queueT0.Add(500*time.Millisecond), rule); n != 5 {
			t.Fatalf("a new instance's first step, 500 ms on at 10 a second, admitted %d, want 5", n)
		}
		if n := mustStep(t, b, sale, queueT0.Add(time.Second), rule); n != 5 {
			t.Fatalf("another instance 500 ms later admitted %d, want 5", n)
		}
	})
	t.Run("Restore", func(t *testing.T) {
		// A queue restored from records of what it holds is unchanged,
		// its drawn places read through the draw's ranks; a join between
		// the restore's read and its write is kept (the write sees the
		// queue moved and reads again).
		sale := "restore" + newPrefix()
		joined := map[string]time.Time{}
		var users []string
		for i := range 20 {
			u := fmt.Sprintf("u%d", i)
			users = append(users, u)
			joined[u] = queueT0.Add(time.Duration(i) * time.Millisecond)
			mustJoin(t, a, sale, u, joined[u])
		}
		seed, _ := flashsale.NewDrawSeed()
		d, err := a.Draw(t.Context(), sale, seed)
		if err != nil {
			t.Fatal(err)
		}
		rule := flashsale.AdmitRule{For: time.Hour, Rate: 5, Left: 100}
		mustStep(t, a, sale, queueT0, rule)
		adm, err := a.Admit(t.Context(), sale, queueT0.Add(time.Second), rule)
		if err != nil || len(adm.Admitted) != 5 {
			t.Fatalf("Admit = %+v, %v; want 5 admitted", adm, err)
		}
		if err := a.Use(t.Context(), sale, adm.Admitted[0], queueT0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"late0", "late1"} {
			users = append(users, u)
			joined[u] = queueT0.Add(2 * time.Second)
			mustJoin(t, b, sale, u, joined[u])
		}
		at := queueT0.Add(3 * time.Second)
		before := map[string]flashsale.Place{}
		var recs []flashsale.PlaceRecord
		for _, u := range users {
			p, err := a.Place(t.Context(), sale, u, at)
			if err != nil {
				t.Fatal(err)
			}
			before[u] = p
			r := flashsale.PlaceRecord{UserID: u, Ticket: p.Ticket, JoinedAt: joined[u], AdmittedUntil: p.AdmittedUntil, Used: p.Used}
			if strings.HasPrefix(u, "late") {
				r.Rank = p.Rank
			}
			recs = append(recs, r)
		}
		st, _ := a.Stats(t.Context(), sale, at)
		mid := NewQueue(a.client, a.prefix)
		rounds := 0
		mid.between = func() {
			if rounds++; rounds == 1 {
				mustJoin(t, b, sale, "mid", at)
			}
		}
		if err := mid.Restore(t.Context(), sale, &d, recs, at); err != nil {
			t.Fatal(err)
		}
		if rounds != 2 {
			t.Fatalf("Restore read %d times, want 2 (the join in between moved the queue)", rounds)
		}
		for _, u := range users {
			if p, err := a.Place(t.Context(), sale, u, at); err != nil || p != before[u] {
				t.Fatalf("%s: %+v before the restore, %+v, %v after", u, before[u], p, err)
			}
		}
		if p, err := a.Place(t.Context(), sale, "mid", at); err != nil || p.Rank != 23 || p.Ahead != 17 {
			t.Fatalf("the join during the restore: %+v, %v; want rank 23 behind the 17 waiting", p, err)
		}
		if got, _ := a.Stats(t.Context(), sale, at); got.Joined != st.Joined+1 || got.Waiting != st.Waiting+1 ||
			got.Admitted != st.Admitted || got.Used != st.Used || got.Expired != st.Expired {
			t.Fatalf("stats after the restore = %+v, before %+v (and one join)", got, st)
		}
	})
	t.Run("Keys", func(t *testing.T) {
		// Every key of a queue expires (refreshed by joins, the draw and
		// admissions), and Drop takes them all.
		sale := "keys" + newPrefix()
		for i := range 3 {
			mustJoin(t, a, sale, fmt.Sprintf("u%d", i), queueT0)
		}
		seed, _ := flashsale.NewDrawSeed()
		if _, err := a.Draw(t.Context(), sale, seed); err != nil {
			t.Fatal(err)
		}
		mustStep(t, a, sale, queueT0, flashsale.AdmitRule{For: time.Hour, Rate: 1, Left: 10})
		if n := mustStep(t, a, sale, queueT0.Add(time.Second), flashsale.AdmitRule{For: time.Hour, Rate: 1, Left: 10}); n != 1 {
			t.Fatalf("admitted %d, want 1", n)
		}
		keys := a.keys(sale)
		for _, k := range keys {
			ttl, err := a.client.PTTL(t.Context(), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl < QueueTTL-time.Minute || ttl > QueueTTL {
				t.Errorf("%s expires in %v, want %v", k, ttl, QueueTTL)
			}
		}
		if err := a.Drop(t.Context(), sale); err != nil {
			t.Fatal(err)
		}
		if n, err := a.client.Exists(t.Context(), keys...).Result(); err != nil || n != 0 {
			t.Fatalf("%d keys left after Drop (%v), want none", n, err)
		}
	})
}

// TestQueueFence: a Redis restarted from a snapshot brings the queue back
// as it was at the snapshot. Its places may be behind the database's (a
// guest who joined after the snapshot has no place in it, and would get a
// new one at the back), so every method refuses it with ErrQueueStale
// until a Restore brings it up to its records; then it serves again.
func TestQueueFence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	ctx := t.Context()
	rs := testenv.StartRedis(t)
	q := MustOpenEngine(t, rs.URL(), newPrefix()).Queue()
	const sale = "fenced"
	early := mustJoin(t, q, sale, "early", queueT0)
	if err := q.client.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	late := mustJoin(t, q, sale, "late", queueT0) // after the snapshot
	rs.Kill()
	rs.Start() // from the snapshot: "late" has no place in it
	at := queueT0.Add(time.Second)
	stale := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrQueueStale) {
			t.Fatalf("%s on the stale queue = %v, want ErrQueueStale", what, err)
		}
	}
	_, _, err := q.Join(ctx, sale, "late", at)
	stale("Join", err)
	_, err = q.Place(ctx, sale, "early", at)
	stale("Place", err)
	_, err = q.Admit(ctx, sale, at, flashsale.AdmitRule{Rate: 10, Left: 10})
	stale("Admit", err)
	stale("Use", q.Use(ctx, sale, "early", at))
	_, err = q.Stats(ctx, sale, at)
	stale("Stats", err)
	_, err = q.Draw(ctx, sale, strings.Repeat("ab", 32))
	stale("Draw", err)

	recs := []flashsale.PlaceRecord{
		{UserID: "early", Ticket: early.Ticket, JoinedAt: queueT0},
		{UserID: "late", Ticket: late.Ticket, JoinedAt: queueT0},
	}
	if err := q.Restore(ctx, sale, nil, recs, at); err != nil {
		t.Fatal(err)
	}
	if p, created, err := q.Join(ctx, sale, "late", at); err != nil || created || p.Ticket != late.Ticket {
		t.Fatalf("the late guest after the restore = %+v (created %v), %v; want their place, ticket %s", p, created, err, late.Ticket)
	}
	if st, err := q.Stats(ctx, sale, at); err != nil || st.Joined != 2 {
		t.Fatalf("stats after the restore = %+v, %v; want both places", st, err)
	}
}
