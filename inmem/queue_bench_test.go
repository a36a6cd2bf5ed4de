package inmem_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/inmem"
)

// waiters is the size issue 24 asks one instance to hold.
const waiters = 100_000

var benchT0 = time.Date(2026, 12, 24, 20, 0, 0, 0, time.UTC)

// fullQueue is a queue with n users joined (u0…) and, if drawn, drawn.
func fullQueue(tb testing.TB, n int, drawn bool) *inmem.Queue {
	tb.Helper()
	q := inmem.NewQueue()
	ctx := context.Background()
	for i := range n {
		if _, _, err := q.Join(ctx, "s", fmt.Sprintf("u%d", i), benchT0); err != nil {
			tb.Fatal(err)
		}
	}
	if drawn {
		seed, _ := flashsale.NewDrawSeed()
		if _, err := q.Draw(ctx, "s", seed); err != nil {
			tb.Fatal(err)
		}
	}
	return q
}

// BenchmarkQueue: the embedded queue at 100 000 waiters. bytes/waiter is
// the heap one waiting guest costs (measured over the whole 100 000);
// place is a guest's read of their place, admit100 one admission step of
// 100 guests, draw the shuffle of all of them at the start.
func BenchmarkQueue(b *testing.B) {
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			q := fullQueue(b, waiters, true)
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/waiters, "bytes/waiter")
			runtime.KeepAlive(q)
		}
	})
	b.Run("join", func(b *testing.B) {
		q := inmem.NewQueue()
		i := 0
		for b.Loop() {
			if _, _, err := q.Join(ctx, "s", fmt.Sprintf("u%d", i), benchT0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("place", func(b *testing.B) {
		q := fullQueue(b, waiters, true)
		i := 0
		for b.Loop() {
			if _, err := q.Place(ctx, "s", fmt.Sprintf("u%d", i%waiters), benchT0); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("admit100", func(b *testing.B) {
		q := fullQueue(b, waiters, true)
		rule := flashsale.AdmitRule{For: time.Second / 2, IdleAfter: time.Hour, Rate: 100, Left: waiters}
		at := benchT0
		for b.Loop() {
			a, err := q.Admit(ctx, "s", at, rule)
			n := len(a.Admitted)
			if err != nil {
				b.Fatal(err)
			}
			if n < 100 {
				b.StopTimer()
				q = fullQueue(b, waiters, true)
				at = benchT0
				b.StartTimer()
			}
			at = at.Add(time.Second) // each step lapses the last one's admissions
		}
	})
	b.Run("draw", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			q := fullQueue(b, waiters, false)
			seed, _ := flashsale.NewDrawSeed()
			b.StartTimer()
			if _, err := q.Draw(ctx, "s", seed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
