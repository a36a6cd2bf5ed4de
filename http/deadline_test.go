package http

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeadlineCtx(t *testing.T) {
	t.Run("ErrWithoutDone", func(t *testing.T) {
		ctx, release := withDeadline(context.Background(), 20*time.Millisecond)
		defer release()
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
			t.Fatalf("Deadline = %v, %v", d, ok)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("Err before the deadline = %v", err)
		}
		time.Sleep(30 * time.Millisecond)
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("Done", func(t *testing.T) {
		ctx, release := withDeadline(context.Background(), 20*time.Millisecond)
		defer release()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done never closed after the deadline")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err = %v", ctx.Err())
		}
	})
	t.Run("ParentCancelled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, release := withDeadline(parent, time.Hour)
		defer release()
		derived, stop := context.WithCancel(ctx) // as database/sql would
		defer stop()
		cancel()
		select {
		case <-derived.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from it missed the parent's cancel")
		}
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err = %v, want Canceled", ctx.Err())
		}
	})
	t.Run("EarlierParentDeadline", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		ctx, release := withDeadline(parent, time.Hour)
		defer release()
		if d, _ := ctx.Deadline(); time.Until(d) > time.Second {
			t.Fatalf("Deadline %v ignores the parent's earlier one", d)
		}
	})
	t.Run("ReleaseAfterDone", func(t *testing.T) {
		// The request ends while a derived context waits: Done closes, and
		// Err must say why (a nil Err with a closed Done panics the
		// context package).
		ctx, release := withDeadline(context.Background(), time.Hour)
		derived, stop := context.WithCancel(ctx)
		defer stop()
		_ = ctx.Done() // makes the timer, as database/sql would
		release()
		select {
		case <-derived.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("release did not reach a derived context")
		}
		if ctx.Err() == nil || derived.Err() == nil {
			t.Fatalf("Err after release = %v, %v; want an error with Done closed", ctx.Err(), derived.Err())
		}
	})
	t.Run("ReleaseWithoutDone", func(t *testing.T) {
		ctx, release := withDeadline(context.Background(), time.Hour)
		release()
		if ctx.timed != context.Background() {
			t.Fatal("release made a timer nobody asked for")
		}
	})
}
