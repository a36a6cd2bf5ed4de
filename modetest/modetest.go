// Package modetest is the conformance suite every flashsale.ModeBoard
// passes: the MySQL and the PostgreSQL stores run the same tests. Each test
// needs a board of its own (a fresh database): the mode is one row.
package modetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// Run runs the suite.
func Run(t *testing.T, newBoard func(tb testing.TB) flashsale.ModeBoard) {
	t.Run("Fresh", func(t *testing.T) { testFresh(t, newBoard(t)) })
	t.Run("Move", func(t *testing.T) { testMove(t, newBoard(t)) })
	t.Run("Parts", func(t *testing.T) { testParts(t, newBoard(t)) })
	t.Run("MoveRace", func(t *testing.T) { testMoveRace(t, newBoard(t)) })
}

var engine0 = flashsale.SellMode{Phase: flashsale.PhaseEngine}

func beat(tb testing.TB, b flashsale.ModeBoard, p flashsale.SellPart, lease time.Duration) flashsale.SellMode {
	tb.Helper()
	m, err := b.Beat(context.Background(), p, lease)
	if err != nil {
		tb.Fatalf("Beat(%+v) = %v", p, err)
	}
	return m
}

func move(tb testing.TB, b flashsale.ModeBoard, from, to flashsale.SellMode) bool {
	tb.Helper()
	ok, err := b.Move(context.Background(), from, to)
	if err != nil {
		tb.Fatalf("Move(%v, %v) = %v", from, to, err)
	}
	return ok
}

// testFresh: a new board sells from the engine, at epoch 0, with no parts.
func testFresh(t *testing.T, b flashsale.ModeBoard) {
	parts, _, err := b.Parts(t.Context())
	if err != nil || len(parts) != 0 {
		t.Fatalf("Parts() = %v, %v, want none", parts, err)
	}
	if m := beat(t, b, flashsale.SellPart{Instance: "a", Mode: engine0, Selling: flashsale.SellingEngine}, time.Second); m != engine0 {
		t.Fatalf("mode = %+v, want %+v", m, engine0)
	}
}

// testMove: a move happens once, from the mode it names; every beat after
// it reads the new mode.
func testMove(t *testing.T, b flashsale.ModeBoard) {
	stopping := flashsale.SellMode{Phase: flashsale.PhaseStopping, Epoch: 1}
	if !move(t, b, engine0, stopping) {
		t.Fatal("first Move refused")
	}
	if move(t, b, engine0, stopping) {
		t.Fatal("Move from a mode the board left succeeded")
	}
	if move(t, b, flashsale.SellMode{Phase: flashsale.PhaseStopping, Epoch: 2}, engine0) {
		t.Fatal("Move from the right phase but another epoch succeeded")
	}
	if m := beat(t, b, flashsale.SellPart{Instance: "a", Mode: engine0, Selling: flashsale.SellingEngine}, time.Second); m != stopping {
		t.Fatalf("mode after Move = %+v, want %+v", m, stopping)
	}
	db := flashsale.SellMode{Phase: flashsale.PhaseDB, Epoch: 1}
	if !move(t, b, stopping, db) {
		t.Fatal("second Move refused")
	}
	if m := beat(t, b, flashsale.SellPart{Instance: "a", Mode: stopping, Selling: flashsale.SellingNone}, time.Second); m != db {
		t.Fatalf("mode = %+v, want %+v", m, db)
	}
}

// testParts: a part is what its instance last said, until its lease from
// the database's clock.
func testParts(t *testing.T, b flashsale.ModeBoard) {
	stopping := flashsale.SellMode{Phase: flashsale.PhaseStopping, Epoch: 3}
	beat(t, b, flashsale.SellPart{Instance: "a", Mode: engine0, Selling: flashsale.SellingEngine}, time.Minute)
	beat(t, b, flashsale.SellPart{Instance: "b", Mode: engine0, Selling: flashsale.SellingEngine}, time.Minute)
	beat(t, b, flashsale.SellPart{Instance: "a", Mode: stopping, Selling: flashsale.SellingNone}, 2*time.Second)
	parts, now, err := b.Parts(t.Context())
	if err != nil || len(parts) != 2 {
		t.Fatalf("Parts() = %v, %v, want 2", parts, err)
	}
	byName := map[string]flashsale.SellPart{}
	for _, p := range parts {
		byName[p.Instance] = p
	}
	a, bp := byName["a"], byName["b"]
	if a.Mode != stopping || a.Selling != flashsale.SellingNone {
		t.Errorf("a = %+v, want its last report (stopping 3, none)", a)
	}
	if bp.Mode != engine0 || bp.Selling != flashsale.SellingEngine {
		t.Errorf("b = %+v, want engine 0, engine", bp)
	}
	if d := a.Expires.Sub(now); d < time.Second || d > 2*time.Second {
		t.Errorf("a expires %v after the database's now, want about 2s (its last lease)", d)
	}
	if d := bp.Expires.Sub(now); d < 50*time.Second || d > time.Minute {
		t.Errorf("b expires %v after the database's now, want about 1m", d)
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Errorf("the database's now is %v from this clock", d)
	}
}

// testMoveRace: beats race a move; every beat that began after the move
// returned reads the new mode, and at most one of two racing moves from
// the same mode wins.
func testMoveRace(t *testing.T, b flashsale.ModeBoard) {
	to := flashsale.SellMode{Phase: flashsale.PhaseStopping, Epoch: 1}
	var (
		wg    sync.WaitGroup
		moved = make(chan struct{})
		wins  = make(chan bool, 2)
	)
	for i := range 8 {
		wg.Go(func() {
			p := flashsale.SellPart{Instance: fmt.Sprint("i", i), Mode: engine0, Selling: flashsale.SellingEngine}
			for {
				select {
				case <-moved:
					if m := beat(t, b, p, time.Second); m != to {
						t.Errorf("beat after the move read %+v", m)
					}
					return
				default:
					beat(t, b, p, time.Second)
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			ok, err := b.Move(context.Background(), engine0, to)
			if err != nil {
				t.Errorf("Move = %v", err)
			}
			wins <- ok
		})
	}
	won := 0
	for range 2 {
		if <-wins {
			won++
		}
	}
	close(moved)
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d of two racing moves won, want 1", won)
	}
}
