package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flashsale/flashsale"
)

// testQueueRecords checks the waiting rooms' records (flashsale.QueueRecords),
// what a queue lost with its process or its Redis is rebuilt from: every
// place recorded reads back with its progress, in the queue's order (the
// prequeue by join time, then the ranked by rank); recording a place
// again changes nothing unless its ticket or rank changed, which replaces
// it and its progress; the first draw stays and reads back whole; sales
// are apart; and concurrent batches lose nothing.
func testQueueRecords(t *testing.T, open OpenFunc) {
	t.Run("Places", func(t *testing.T) { testQueuePlaces(t, open) })
	t.Run("Again", func(t *testing.T) { testQueueAgain(t, open) })
	t.Run("Replace", func(t *testing.T) { testQueueReplace(t, open) })
	t.Run("Passed", func(t *testing.T) { testQueuePassed(t, open) })
	t.Run("Draw", func(t *testing.T) { testQueueDraw(t, open) })
	t.Run("BigDraw", func(t *testing.T) { testQueueBigDraw(t, open) })
	t.Run("None", func(t *testing.T) { testQueueNone(t, open) })
	t.Run("Sales", func(t *testing.T) { testQueueSales(t, open) })
	t.Run("Storm", func(t *testing.T) { testQueueStorm(t, open) })
}

// queues opens a store and returns its queue records; a store (or a
// wrapper) without them fails: every SQL store keeps them.
func queues(t *testing.T, open OpenFunc) flashsale.QueueRecords {
	t.Helper()
	q := open(t).Queues
	if q == nil {
		t.Fatal("the store keeps no queue records (Store.Queues is nil)")
	}
	return q
}

// queuePlace is a record of a place just taken: ticket t<user>, joined secs
// seconds after now (in another zone, with sub-millisecond parts).
func queuePlace(user string, rank int, secs int) flashsale.PlaceRecord {
	return flashsale.PlaceRecord{UserID: user, Ticket: "t" + user, Rank: rank,
		JoinedAt: now.Add(time.Duration(secs)*time.Second + 123456).In(cst)}
}

func mustRecordPlaces(t *testing.T, q flashsale.QueueRecords, saleID string, places ...flashsale.PlaceRecord) {
	t.Helper()
	if err := q.RecordPlaces(t.Context(), saleID, places); err != nil {
		t.Fatalf("RecordPlaces(%s, %d places): %v", saleID, len(places), err)
	}
}

func mustRecordPassed(t *testing.T, q flashsale.QueueRecords, saleID string, admitted []string, until time.Time, skipped []string) {
	t.Helper()
	if err := q.RecordPassed(t.Context(), saleID, admitted, until, skipped); err != nil {
		t.Fatalf("RecordPassed(%s, %v, %v): %v", saleID, admitted, skipped, err)
	}
}

func mustRecordUse(t *testing.T, q flashsale.QueueRecords, saleID, userID string) {
	t.Helper()
	if err := q.RecordUse(t.Context(), saleID, userID); err != nil {
		t.Fatalf("RecordUse(%s, %s): %v", saleID, userID, err)
	}
}

func mustQueueRecord(t *testing.T, q flashsale.QueueRecords, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord) {
	t.Helper()
	d, places, err := q.QueueRecord(t.Context(), saleID)
	if err != nil {
		t.Fatalf("QueueRecord(%s): %v", saleID, err)
	}
	for _, p := range places {
		for _, at := range []time.Time{p.JoinedAt, p.AdmittedUntil} {
			if !at.IsZero() && at.Location() != time.UTC {
				t.Errorf("QueueRecord(%s): %s's times are in %v, want UTC", saleID, p.UserID, at.Location())
			}
		}
	}
	return d, places
}

// checkPlaces compares the sale's recorded places with want, in order,
// times at millisecond precision.
func checkPlaces(t *testing.T, q flashsale.QueueRecords, saleID string, want ...flashsale.PlaceRecord) {
	t.Helper()
	_, got := mustQueueRecord(t, q, saleID)
	if diff := cmp.Diff(want, got, msTime, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("QueueRecord(%s) places mismatch (-want +got):\n%s", saleID, diff)
	}
}

// testQueuePlaces: the prequeue (rank 0) comes first, by join time then
// user id, then the ranked places by rank, whatever order they were
// recorded in, across batches.
func testQueuePlaces(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	u5, u4, u3 := queuePlace("u5", 2, 10), queuePlace("u4", 1, 11), queuePlace("u3", 0, 3)
	u2, u1, u0 := queuePlace("u2", 0, 1), queuePlace("u1", 0, 1), queuePlace("u0", 0, 2)
	mustRecordPlaces(t, q, "s1", u5, u3, u2)
	mustRecordPlaces(t, q, "s1", u4, u1, u0)
	checkPlaces(t, q, "s1", u1, u2, u0, u3, u4, u5)
}

// testQueueAgain: the same record again (a retried write, a queue
// recording what it holds after a rebuild) changes nothing, the progress
// of the place included, even with another join time.
func testQueueAgain(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	u1, u2, u3 := queuePlace("u1", 1, 1), queuePlace("u2", 2, 2), queuePlace("u3", 3, 3)
	mustRecordPlaces(t, q, "s1", u1, u2, u3)
	until := now.Add(time.Minute + 456789).In(cst)
	mustRecordPassed(t, q, "s1", []string{"u1"}, until, []string{"u2"})
	mustRecordUse(t, q, "s1", "u1")

	later1, later2 := u1, u2
	later1.JoinedAt, later2.JoinedAt = now.Add(time.Hour), now.Add(time.Hour)
	mustRecordPlaces(t, q, "s1", u1, u2, u3)
	mustRecordPlaces(t, q, "s1", later1, later2)

	u1.AdmittedUntil, u1.Used = until, true
	u2.Skipped = true
	checkPlaces(t, q, "s1", u1, u2, u3)
}

// testQueueReplace: a place taken again (another ticket: back of the
// queue after it expired) or ranked anew (the draw ranked the prequeue)
// replaces the record, its progress and join time with it.
func testQueueReplace(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	u1, u2, u3, u4 := queuePlace("u1", 1, 1), queuePlace("u2", 0, 2), queuePlace("u3", 3, 3), queuePlace("u4", 5, 4)
	mustRecordPlaces(t, q, "s1", u1, u2, u3, u4)
	mustRecordPassed(t, q, "s1", []string{"u1", "u2", "u4"}, now.Add(time.Minute), []string{"u3"})
	mustRecordUse(t, q, "s1", "u2")
	mustRecordUse(t, q, "s1", "u4")

	again1 := queuePlace("u1", 7, 20)
	again1.Ticket = "t-u1-again"
	ranked2 := queuePlace("u2", 2, 30)
	ranked3 := queuePlace("u3", 4, 3)
	ticket4 := queuePlace("u4", 5, 40)
	ticket4.Ticket = "t-u4-again"
	mustRecordPlaces(t, q, "s1", again1, ranked2, ranked3, ticket4)
	checkPlaces(t, q, "s1", ranked2, ranked3, ticket4, again1)
}

// testQueuePassed: the steps after a place is taken are visible, for the
// users named only; one without a record is no error; a user twice in a
// batch counts once, the last record winning.
func testQueuePassed(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	var places []flashsale.PlaceRecord
	for i := range 6 {
		places = append(places, queuePlace(fmt.Sprintf("u%d", i), i+1, i))
	}
	first := places[5]
	first.Ticket = "t-first"
	mustRecordPlaces(t, q, "s1", slices.Concat([]flashsale.PlaceRecord{first}, places)...)

	at := now.Add(30*time.Second + 999999).In(cst)
	mustRecordPassed(t, q, "s1", []string{"u0", "u1", "nobody"}, at, []string{"u2", "ghost"})
	mustRecordPassed(t, q, "s1", nil, at, []string{"u3"})
	mustRecordPassed(t, q, "s1", []string{"u4"}, at.Add(time.Second), nil)
	mustRecordPassed(t, q, "s1", nil, at, nil)
	mustRecordUse(t, q, "s1", "u1")
	mustRecordUse(t, q, "s1", "nobody")
	mustRecordUse(t, q, "other", "u1")

	want := slices.Clone(places)
	want[0].AdmittedUntil = at
	want[1].AdmittedUntil, want[1].Used = at, true
	want[2].Skipped = true
	want[3].Skipped = true
	want[4].AdmittedUntil = at.Add(time.Second)
	checkPlaces(t, q, "s1", want...)
}

// queueSeed returns a valid seed (64 lowercase hex characters) made of b.
func queueSeed(b string) string { return strings.Repeat(b, 64/len(b)) }

// queueDraw returns the whole draw of seedHex over tickets, as a queue makes it.
func queueDraw(t *testing.T, saleID, seedHex string, tickets ...string) flashsale.Draw {
	t.Helper()
	d := flashsale.Draw{SaleID: saleID, Seed: seedHex, Tickets: slices.Sorted(slices.Values(tickets))}
	var err error
	if d.Commitment, err = flashsale.DrawCommitment(saleID, seedHex); err != nil {
		t.Fatal(err)
	}
	if d.Order, err = flashsale.DrawOrder(seedHex, tickets); err != nil {
		t.Fatal(err)
	}
	return d
}

// testQueueDraw: the first draw recorded stays, read back with its order
// and commitment (recomputed or kept: they must be the seed's); a draw
// that does not verify is refused; a draw of nobody is one too.
func testQueueDraw(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	ctx := t.Context()
	first := queueDraw(t, "s1", queueSeed("0a"), "tc", "ta", "tb", "td")
	if err := q.RecordDraw(ctx, first); err != nil {
		t.Fatalf("RecordDraw: %v", err)
	}
	if err := q.RecordDraw(ctx, queueDraw(t, "s1", queueSeed("b7"), "tx", "ty")); err != nil {
		t.Fatalf("RecordDraw, a second draw: %v", err)
	}
	got, _ := mustQueueRecord(t, q, "s1")
	if diff := cmp.Diff(&first, got); diff != "" {
		t.Errorf("QueueRecord draw mismatch (-want +got):\n%s", diff)
	}
	if got != nil {
		if err := got.Verify(); err != nil {
			t.Errorf("the recorded draw does not verify: %v", err)
		}
	}

	// Only the tickets and the seed are needed: an unsorted list, with
	// no order or commitment given, is the same draw.
	bare := flashsale.Draw{SaleID: "s2", Seed: queueSeed("c4"), Tickets: []string{"t3", "t1", "t2"}}
	if err := q.RecordDraw(ctx, bare); err != nil {
		t.Fatalf("RecordDraw, tickets only: %v", err)
	}
	if got, _ := mustQueueRecord(t, q, "s2"); !cmp.Equal(got, ptr(queueDraw(t, "s2", queueSeed("c4"), "t1", "t2", "t3"))) {
		t.Errorf("QueueRecord(s2) draw = %+v, want the seed's draw of t1..t3", got)
	}

	empty := queueDraw(t, "s3", queueSeed("5e"))
	if err := q.RecordDraw(ctx, empty); err != nil {
		t.Fatalf("RecordDraw, nobody in the prequeue: %v", err)
	}
	if got, _ := mustQueueRecord(t, q, "s3"); !cmp.Equal(got, &empty, cmpopts.EquateEmpty()) {
		t.Errorf("QueueRecord(s3) draw = %+v, want %+v", got, empty)
	}

	wrongCommitment := queueDraw(t, "s4", queueSeed("11"), "t1", "t2")
	wrongCommitment.Commitment = first.Commitment
	wrongOrder := queueDraw(t, "s4", queueSeed("11"), "t1", "t2")
	slices.Reverse(wrongOrder.Order)
	for name, d := range map[string]flashsale.Draw{
		"bad seed":             {SaleID: "s4", Seed: "xyz", Tickets: []string{"t1"}},
		"repeated ticket":      {SaleID: "s4", Seed: queueSeed("11"), Tickets: []string{"t1", "t1"}},
		"ticket with space":    {SaleID: "s4", Seed: queueSeed("11"), Tickets: []string{"t 1"}},
		"another's commitment": wrongCommitment,
		"wrong order":          wrongOrder,
		"no sale":              {Seed: queueSeed("11"), Tickets: []string{"t1"}},
	} {
		if err := q.RecordDraw(ctx, d); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Errorf("RecordDraw, %s: %v, want %s", name, err, flashsale.EInvalid)
		}
	}
	if got, _ := mustQueueRecord(t, q, "s4"); got != nil {
		t.Errorf("QueueRecord(s4) draw = %+v after refused draws, want none", got)
	}
}

func ptr[T any](v T) *T { return &v }

// testQueueBigDraw: a draw of 100 000 tickets of 26 characters (the
// largest prequeue the waiting room is built for) reads back whole.
func testQueueBigDraw(t *testing.T, open OpenFunc) {
	if testing.Short() {
		t.Skip("a 100 000-ticket draw in -short")
	}
	q := queues(t, open)
	tickets := make([]string, 100_000)
	for i := range tickets {
		tickets[i] = fmt.Sprintf("01JF%022d", i*7919%100_000)
	}
	d := queueDraw(t, "big", queueSeed("9f"), tickets...)
	if err := q.RecordDraw(t.Context(), d); err != nil {
		t.Fatalf("RecordDraw: %v", err)
	}
	got, _ := mustQueueRecord(t, q, "big")
	if got == nil {
		t.Fatal("QueueRecord: no draw")
	}
	if !slices.Equal(got.Tickets, d.Tickets) || !slices.Equal(got.Order, d.Order) || got.Commitment != d.Commitment {
		t.Errorf("QueueRecord: the draw of %d tickets read back as one of %d (order %d), not the same",
			len(d.Tickets), len(got.Tickets), len(got.Order))
	}
}

// testQueueNone: a sale without records has no draw and no places (nil,
// no error: a queue with nothing recorded is rebuilt empty).
func testQueueNone(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	d, places := mustQueueRecord(t, q, "nothing")
	if d != nil || len(places) != 0 {
		t.Errorf("QueueRecord of a sale without records = %+v, %+v; want nil, none", d, places)
	}
}

// testQueueSales: sales are apart: the same user in two sales has two
// places, and a step in one leaves the other's alone.
func testQueueSales(t *testing.T, open OpenFunc) {
	q := queues(t, open)
	a1, a2 := queuePlace("u1", 1, 1), queuePlace("u2", 2, 2)
	b1 := queuePlace("u1", 0, 5)
	b1.Ticket = "t-b"
	mustRecordPlaces(t, q, "a", a1, a2)
	mustRecordPlaces(t, q, "b", b1)
	mustRecordPassed(t, q, "a", []string{"u1"}, now, []string{"u2"})
	mustRecordUse(t, q, "a", "u1")
	if err := q.RecordDraw(t.Context(), queueDraw(t, "a", queueSeed("01"), "t1")); err != nil {
		t.Fatal(err)
	}
	checkPlaces(t, q, "b", b1)
	if d, _ := mustQueueRecord(t, q, "b"); d != nil {
		t.Errorf("sale b has sale a's draw: %+v", d)
	}
	a1.AdmittedUntil, a1.Used, a2.Skipped = now, true, true
	checkPlaces(t, q, "a", a1, a2)
}

// testQueueStorm: 2 000 places recorded by 16 writers at once, in batches
// of 25, each batch also carrying the same batch of the next writer and
// the writer's own batch before (the same records, written at once by two
// writers, and again later, as instances racing to record one queue do),
// while each writer marks some of its places admitted: every place reads
// back, in rank order, with its progress.
func testQueueStorm(t *testing.T, open OpenFunc) {
	const (
		writers = 16
		places  = 2000
		batch   = 25
	)
	q := queues(t, open)
	all := make([]flashsale.PlaceRecord, places)
	for i := range all {
		all[i] = queuePlace(fmt.Sprintf("u%04d", i), i+1, i%60)
	}
	admitted := func(i int) bool { return i%7 == 0 }
	// chunks[w] are writer w's batches: every writers-th place from w.
	chunks := make([][][]flashsale.PlaceRecord, writers)
	for w := range writers {
		var mine []flashsale.PlaceRecord
		for i := w; i < places; i += writers {
			mine = append(mine, all[i])
		}
		chunks[w] = slices.Collect(slices.Chunk(mine, batch))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for w := range writers {
		wg.Go(func() {
			for k, chunk := range chunks[w] {
				rs := slices.Clone(chunk)
				if next := chunks[(w+1)%writers]; k < len(next) {
					rs = append(rs, next[k]...)
				}
				if k > 0 {
					rs = append(rs, chunks[w][k-1]...)
				}
				if err := q.RecordPlaces(t.Context(), "storm", rs); err != nil {
					fail(fmt.Errorf("RecordPlaces: %w", err))
					return
				}
				var users []string
				for _, p := range chunk {
					if admitted(p.Rank - 1) {
						users = append(users, p.UserID)
					}
				}
				if err := q.RecordPassed(t.Context(), "storm", users, now.Add(time.Minute), nil); err != nil {
					fail(fmt.Errorf("RecordPassed: %w", err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(all)
	for i := range want {
		if admitted(i) {
			want[i].AdmittedUntil = now.Add(time.Minute)
		}
	}
	checkPlaces(t, q, "storm", want...)
}
