package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// queueWaiters is the size issue 24 asks one instance to hold.
const queueWaiters = 100_000

// shortID names user i u<i>; ulidID with 26 characters, as long as a
// ULID (what a JWT subject may well be).
func shortID(i int) string { return "u" + strconv.Itoa(i) }
func ulidID(i int) string  { return fmt.Sprintf("user%022d", i) }

// fillQueue joins n users (u0…) to sale and, if drawn, draws the queue.
func fillQueue(tb testing.TB, q *Queue, sale string, n int, drawn bool) {
	tb.Helper()
	fillQueueWith(tb, q, sale, n, drawn, shortID)
}

// fillQueueWith is fillQueue with users named by id. The joins are the
// join script's, pipelined a thousand at a time, so that filling a queue
// takes a fraction of the benchmark (CI runs it once).
func fillQueueWith(tb testing.TB, q *Queue, sale string, n int, drawn bool, id func(int) string) {
	tb.Helper()
	ctx := context.Background()
	if err := queueJoinScript.Load(ctx, q.client).Err(); err != nil {
		tb.Fatal(err)
	}
	keys := q.keys(sale)
	for from := 0; from < n; from += 1000 {
		if _, err := q.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := from; i < min(from+1000, n); i++ {
				p.EvalSha(ctx, queueJoinScript.Hash(), keys, id(i), ms(queueT0), ulid.Make().String(), q.ttl)
			}
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
	}
	if drawn {
		seed, _ := flashsale.NewDrawSeed()
		if _, err := q.Draw(ctx, sale, seed); err != nil {
			tb.Fatal(err)
		}
	}
}

// usedMemory is the server's INFO memory used_memory.
func usedMemory(tb testing.TB, c goredis.UniversalClient) int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("INFO memory has no used_memory")
	return 0
}

// serverTime is the time the server has spent executing the queue's
// commands since its statistics were reset (INFO commandstats): scripts,
// transactions and HEXISTS, the commands a Queue sends itself (those run
// within them are counted apart as well).
func serverTime(tb testing.TB, c goredis.UniversalClient) time.Duration {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var usec int64
	for line := range strings.Lines(info) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains([]string{"cmdstat_evalsha", "cmdstat_eval", "cmdstat_exec", "cmdstat_hexists"}, name) {
			continue
		}
		for f := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				usec += n
			}
		}
	}
	return time.Duration(usec) * time.Microsecond
}

// serverTimer reports, when the benchmark ends, the time Redis spent on
// its ops (redis-ns/op): what an op costs the one Redis every instance
// shares, round trips and the client apart. Setup between ops is left out
// by running it through aside.
type serverTimer struct {
	c     goredis.UniversalClient
	aside time.Duration
}

func startServerTimer(b *testing.B, c goredis.UniversalClient) *serverTimer {
	b.Helper()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	t := &serverTimer{c: c}
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64((serverTime(b, c)-t.aside).Nanoseconds())/float64(b.N), "redis-ns/op")
		}
	})
	return t
}

// setup runs f with the benchmark's timer and the server timer stopped.
func (t *serverTimer) setup(b *testing.B, f func()) {
	b.StopTimer()
	before := serverTime(b, t.c)
	f()
	t.aside += serverTime(b, t.c) - before
	b.StartTimer()
}

// BenchmarkQueue: the Redis queue at 100 000 waiters, on a redis-server of
// its own (so its memory and its statistics are the queue's alone).
// memory reports the bytes Redis holds for each waiting guest before the
// draw (bytes/waiter) and after it (bytes/waiter-drawn, with the stored
// order and ranks), with user ids of 2 to 6 characters and of 26; join is
// one guest's join, place a read of their place, admit100 one admission
// step of 100 guests (lapsing the last step's 100), draw the shuffle of
// all of them at the start (read, DrawOrder in Go, write). redis-ns/op is
// the time Redis spent in the scripts per op (the draw's HGETALL aside).
func BenchmarkQueue(b *testing.B) {
	rs := testenv.StartRedis(b)
	q := MustOpenEngine(b, rs.URL(), newPrefix()).Queue()
	ctx := context.Background()
	sale := func() string { return "s" + rand.Text()[:8] }
	for _, ids := range []struct {
		name string
		id   func(int) string
	}{{"short-ids", shortID}, {"26-char-ids", ulidID}} {
		b.Run("memory/"+ids.name, func(b *testing.B) {
			for b.Loop() {
				memory(b, ids.id)
			}
		})
	}
	b.Run("join", func(b *testing.B) {
		b.ReportAllocs()
		startServerTimer(b, q.client)
		s, i := sale(), 0
		for b.Loop() {
			if _, _, err := q.Join(ctx, s, shortID(i), queueT0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("place", func(b *testing.B) {
		b.ReportAllocs()
		s := sale()
		fillQueue(b, q, s, queueWaiters, true)
		startServerTimer(b, q.client)
		i := 0
		for b.Loop() {
			if _, err := q.Place(ctx, s, shortID(i%queueWaiters), queueT0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("admit100", func(b *testing.B) {
		b.ReportAllocs()
		rule := flashsale.AdmitRule{For: time.Second / 2, IdleAfter: time.Hour, Rate: 100, Left: queueWaiters}
		s, at := sale(), queueT0
		fillQueue(b, q, s, queueWaiters, true)
		mustStep(b, q, s, at, rule) // starts the clock
		t := startServerTimer(b, q.client)
		for b.Loop() {
			at = at.Add(time.Second) // each step lapses the last one's admissions
			a, err := q.Admit(ctx, s, at, rule)
			if err != nil {
				b.Fatal(err)
			}
			if len(a.Admitted) < 100 {
				t.setup(b, func() {
					s, at = sale(), queueT0
					fillQueue(b, q, s, queueWaiters, true)
					mustStep(b, q, s, at, rule)
				})
			}
		}
	})
	b.Run("draw", func(b *testing.B) {
		t := startServerTimer(b, q.client)
		for b.Loop() {
			var s string
			t.setup(b, func() {
				s = sale()
				fillQueue(b, q, s, queueWaiters, false)
			})
			seed, _ := flashsale.NewDrawSeed()
			if _, err := q.Draw(ctx, s, seed); err != nil {
				b.Fatal(err)
			}
			t.setup(b, func() {
				if err := q.Drop(ctx, s); err != nil {
					b.Fatal(err)
				}
			})
		}
	})
}

// memory fills a queue with 100 000 waiters named by id on a redis-server
// of its own, draws it, and reports what Redis holds for them.
func memory(b *testing.B, id func(int) string) {
	ctx := context.Background()
	q := MustOpenEngine(b, testenv.StartRedis(b).URL(), newPrefix()).Queue()
	s := "m" + rand.Text()[:8]
	before := usedMemory(b, q.client)
	fillQueueWith(b, q, s, queueWaiters, false, id)
	joined := usedMemory(b, q.client)
	seed, _ := flashsale.NewDrawSeed()
	if _, err := q.Draw(ctx, s, seed); err != nil {
		b.Fatal(err)
	}
	drawn := usedMemory(b, q.client)
	b.ReportMetric(float64(joined-before)/queueWaiters, "bytes/waiter")
	b.ReportMetric(float64(drawn-before)/queueWaiters, "bytes/waiter-drawn")
	var keys int64
	for _, k := range q.keys(s) {
		n, _ := q.client.MemoryUsage(ctx, k, 0).Result()
		b.Logf("MEMORY USAGE %s: %d bytes", k, n)
		keys += n
	}
	b.ReportMetric(float64(keys)/queueWaiters, "key-bytes/waiter-drawn")
	if err := q.Drop(ctx, s); err != nil {
		b.Fatal(err)
	}
}
