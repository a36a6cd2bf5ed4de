package storetest

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// testPruneOutbox: PruneOutbox deletes old notices only once every
// transport in use has acked them (one whose lease ended before the cut is
// gone), old delivery attempts regardless, at most limit of each a call,
// and never hands a deleted seq out again.
func testPruneOutbox(t *testing.T, open OpenFunc) {
	ctx := t.Context()
	s := open(t)
	mustCreateSale(t, s, newSale("p", 2, 5))
	placeWant(t, s, []error{nil, nil, nil}, res("o1", "p", "u1", "", 0, 1, 1), res("o2", "p", "u2", "", 0, 1, 1), res("o3", "p", "u3", "", 0, 1, 1))
	ns := outbox(t, s)
	if len(ns) != 3 {
		t.Fatalf("%d notices after three orders, want 3", len(ns))
	}
	prune := func(before time.Time, limit, wantNotices, wantDeliveries int) {
		t.Helper()
		n, d, err := s.PruneOutbox(ctx, before, limit)
		if err != nil || n != wantNotices || d != wantDeliveries {
			t.Fatalf("PruneOutbox(limit %d) = %d notices, %d deliveries, %v; want %d, %d", limit, n, d, err, wantNotices, wantDeliveries)
		}
	}
	seqs := func() (out []int64) {
		for _, n := range outbox(t, s) {
			out = append(out, n.Seq)
		}
		return out
	}
	// The reads above leased cursors for a minute; a cut an hour ahead
	// finds them gone.
	cut := time.Now().Add(time.Hour)

	// Nothing is older than a cut an hour ago.
	prune(time.Now().Add(-time.Hour), 10, 0, 0)

	// A transport in use holds back what it has not acked.
	if _, ok, err := s.ClaimNotices(ctx, "webhook", "w", cut.Add(time.Hour), 10); err != nil || !ok {
		t.Fatalf("ClaimNotices = %v, %v", ok, err)
	}
	if err := s.AckNotices(ctx, "webhook", "w", ns[0].Seq); err != nil {
		t.Fatal(err)
	}
	prune(cut, 10, 1, 0)
	if got := seqs(); len(got) != 2 || got[0] != ns[1].Seq || got[1] != ns[2].Seq {
		t.Fatalf("after pruning what the webhook acked the outbox holds seqs %v, want %d and %d", got, ns[1].Seq, ns[2].Seq)
	}

	// Delivery attempts go when old, limit at a time.
	var ds []flashsale.Delivery
	for i := range 3 {
		ds = append(ds, flashsale.Delivery{Transport: "webhook", NoticeID: ns[1].ID, Seq: ns[1].Seq, Type: ns[1].Type, Attempt: i + 1, At: now, OK: true, Status: 204})
	}
	if err := s.RecordDeliveries(ctx, ds); err != nil {
		t.Fatal(err)
	}
	prune(cut, 2, 0, 2)
	prune(cut, 2, 0, 1)
	if ds, err := s.Deliveries(ctx, flashsale.DeliveryQuery{}); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries after pruning: %d, %v", len(ds), err)
	}

	// A transport whose lease ends before the cut is gone: its cursor,
	// still before the first notice, holds nothing back.
	if _, ok, err := s.ClaimNotices(ctx, "amqp", "a", time.Now().Add(time.Minute), 10); err != nil || !ok {
		t.Fatalf("ClaimNotices(amqp) = %v, %v", ok, err)
	}
	if err := s.AckNotices(ctx, "webhook", "w", ns[2].Seq); err != nil {
		t.Fatal(err)
	}
	prune(cut, 1, 1, 0)
	prune(cut, 1, 1, 0)
	prune(cut, 1, 0, 0)
	if got := seqs(); len(got) != 0 {
		t.Fatalf("the outbox holds seqs %v, want none", got)
	}

	// A seq is never handed out again.
	placeWant(t, s, []error{nil}, res("o4", "p", "u4", "", 0, 1, 1))
	if got := seqs(); len(got) != 1 || got[0] <= ns[2].Seq {
		t.Fatalf("the next order's notice has seqs %v, want one after %d", got, ns[2].Seq)
	}
}
