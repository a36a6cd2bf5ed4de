// Package sinktest is the conformance suite every flashsale.NoticeSink
// passes (the webhook and the AMQP events exchange). The dispatcher
// advances its cursor on what Deliver returns, so the suite checks the one
// promise that rests on: nil means the receiver has the notice, whole
// (its ID, type, body and test mark), and anything the receiver did not
// get is an error, to be retried.
package sinktest

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// Harness is one sink under test and its receiver.
type Harness struct {
	Sink flashsale.NoticeSink
	// Received returns what the receiver has got so far, in arrival order
	// (ID, Type, Payload and Test filled in).
	Received func() []flashsale.Notice
	// Down makes the receiver unreachable for the rest of the test.
	Down func()
}

// OpenFunc opens a sink and a receiver of its own, closed with tb.Cleanup.
type OpenFunc = func(tb testing.TB) Harness

// Run runs the suite; every subtest opens its own harness.
func Run(t *testing.T, open OpenFunc) {
	t.Run("Name", func(t *testing.T) { testName(t, open) })
	t.Run("Delivered", func(t *testing.T) { testDelivered(t, open) })
	t.Run("Again", func(t *testing.T) { testAgain(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("Canceled", func(t *testing.T) { testCanceled(t, open) })
	t.Run("Down", func(t *testing.T) { testDown(t, open) })
}

// receiveWait bounds how long a delivered notice may take to show up at
// the receiver (a queue's consumer is asynchronous).
const receiveWait = 10 * time.Second

// notice is the i-th event of a test's order.
func notice(i int, test bool) flashsale.Notice {
	id := fmt.Sprintf("o%06d.held", i)
	return flashsale.Notice{
		Seq: int64(i + 1), ID: id, Type: flashsale.NoticeOrderHeld, SaleID: "s1", OrderID: fmt.Sprintf("o%06d", i),
		At:      time.Now().UTC().Truncate(time.Millisecond),
		Payload: fmt.Appendf(nil, `{"id":%q,"type":"order.held","n":%d,"text":"Deluxe King · ¥9,900"}`, id, i),
		Test:    test,
	}
}

// waitReceived waits until the receiver has every notice in want, whole,
// and returns what it has.
func waitReceived(t *testing.T, h Harness, want ...flashsale.Notice) []flashsale.Notice {
	t.Helper()
	deadline := time.Now().Add(receiveWait)
	for {
		got := h.Received()
		missing := ""
		for _, w := range want {
			i := slices.IndexFunc(got, func(n flashsale.Notice) bool { return n.ID == w.ID })
			if i < 0 {
				missing = w.ID
				break
			}
			g := got[i]
			if g.Type != w.Type || !bytes.Equal(g.Payload, w.Payload) || g.Test != w.Test {
				t.Fatalf("received %s as type %q test %v body %s; sent type %q test %v body %s",
					w.ID, g.Type, g.Test, g.Payload, w.Type, w.Test, w.Payload)
			}
		}
		if missing == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %s, but the receiver does not have it after %v", missing, receiveWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testName: the name keys the transport's cursor in the database and its
// lines in the delivery log, so it is a short lowercase token that does
// not change.
func testName(t *testing.T, open OpenFunc) {
	h := open(t)
	name := h.Sink.Name()
	if !regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`).MatchString(name) {
		t.Errorf("Name() = %q, want a short lowercase token", name)
	}
	if again := h.Sink.Name(); again != name {
		t.Errorf("Name() = %q, then %q", name, again)
	}
}

func testDelivered(t *testing.T, open OpenFunc) {
	h := open(t)
	sent := []flashsale.Notice{notice(1, false), notice(2, true)}
	for _, n := range sent {
		if _, err := h.Sink.Deliver(t.Context(), n); err != nil {
			t.Fatalf("Deliver(%s): %v", n.ID, err)
		}
	}
	waitReceived(t, h, sent...)
}

// testAgain delivers one notice twice, as a dispatcher retrying after a
// lost answer does: both succeed, and the receiver has it (at least once;
// it de-duplicates by ID).
func testAgain(t *testing.T, open OpenFunc) {
	h := open(t)
	n := notice(1, false)
	for i := range 2 {
		if _, err := h.Sink.Deliver(t.Context(), n); err != nil {
			t.Fatalf("Deliver %d: %v", i+1, err)
		}
	}
	waitReceived(t, h, n)
}

// testConcurrent delivers from many goroutines at once, as the dispatcher
// does for different orders.
func testConcurrent(t *testing.T, open OpenFunc) {
	h := open(t)
	const n = 100
	sent := make([]flashsale.Notice, n)
	var wg sync.WaitGroup
	for i := range n {
		sent[i] = notice(i, i%2 == 0)
		wg.Go(func() {
			if _, err := h.Sink.Deliver(t.Context(), sent[i]); err != nil {
				t.Errorf("Deliver(%s): %v", sent[i].ID, err)
			}
		})
	}
	wg.Wait()
	waitReceived(t, h, sent...)
}

// testCanceled: a Deliver whose context has ended says so; it must not
// report a delivery it did not wait for.
func testCanceled(t *testing.T, open OpenFunc) {
	h := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := h.Sink.Deliver(ctx, notice(1, false)); err == nil {
		t.Fatal("Deliver with its context ended = nil, want an error")
	}
	// The sink still works afterwards.
	n := notice(2, false)
	if _, err := h.Sink.Deliver(t.Context(), n); err != nil {
		t.Fatalf("Deliver after a cancelled one: %v", err)
	}
	waitReceived(t, h, n)
}

// testDown: with the receiver unreachable, Deliver fails (within the
// caller's deadline) rather than report what nobody received.
func testDown(t *testing.T, open OpenFunc) {
	h := open(t)
	first := notice(1, false)
	if _, err := h.Sink.Deliver(t.Context(), first); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	waitReceived(t, h, first)
	h.Down()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	n := notice(2, false)
	if _, err := h.Sink.Deliver(ctx, n); err == nil {
		t.Fatal("Deliver with the receiver down = nil, want an error")
	}
	if slices.ContainsFunc(h.Received(), func(g flashsale.Notice) bool { return g.ID == n.ID }) {
		t.Fatal("the receiver got a notice while it was down: Down does not take it down")
	}
}
