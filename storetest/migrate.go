package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Migrator is a store whose schema it applies itself.
type Migrator interface {
	Migrate(ctx context.Context) error
	Close() error
}

// RunMigrate checks what every instance relies on at start: several of
// them migrating one empty database at once all succeed and apply each
// migration once, and migrating again changes nothing. open opens a new
// handle on that database; applied counts the migrations it records, which
// must come to want.
func RunMigrate(t *testing.T, open func(ctx context.Context) (Migrator, error), applied func(ctx context.Context, m Migrator) (int, error), want int) {
	ctx := t.Context()
	const instances = 4
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Go(func() {
			m, err := open(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer m.Close()
			errs[i] = m.Migrate(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	m, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Migrate(ctx); err != nil {
		t.Fatalf("Migrate on a migrated database: %v", err)
	}
	if got, err := applied(ctx, m); err != nil || got != want {
		t.Errorf("migrations recorded = %d, %v, want %d", got, err, want)
	}
}

// RunMigrateOverSales checks the latest migrations on a database that
// holds a sale from before them, as an upgrade finds one: the sale, created
// on s (migrated) with an order holding a room, reads back as it was
// written once previous has taken the database back to the schema of the
// release before them (their DDL undone, their records gone) and Migrate
// has applied them again, and still sells. A sale from before the waiting
// room (0011) has none; one from before the stay rules (0013) has none on
// any night; one from before kinds (0014) is a stay (kind "") whose nights
// have no time and no minutes.
func RunMigrateOverSales[S ServerStore](t *testing.T, s S, previous func(ctx context.Context, s S) error) {
	ctx := t.Context()
	sale := mustCreateSale(t, s.Roles(), newSale("s1", 1, 5, 6))
	placeWant(t, s.Roles(), []error{nil}, res("o1", "s1", "u1", "k1", 0, 2, 1))
	before := mustOrder(t, s.Roles(), "o1")
	if err := previous(ctx, s); err != nil {
		t.Fatalf("back to the schema before the latest migrations: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over a sale: %v", err)
	}
	got := mustSale(t, s.Roles(), sale.ID)
	if got.WaitingRoom != nil {
		t.Errorf("a sale from before the waiting room has one: %+v", got.WaitingRoom)
	}
	if got.Kind != "" {
		t.Errorf("a sale from before kinds reads back of kind %q, want \"\" (a stay)", got.Kind)
	}
	for _, n := range got.Nights {
		if n.StayRules.Set() {
			t.Errorf("a sale from before the stay rules has some on %s: %+v", n.Date, n.StayRules)
		}
		if n.Time != "" || n.Minutes != 0 {
			t.Errorf("a night from before kinds, %s, has time %q, minutes %d", n.Date, n.Time, n.Minutes)
		}
	}
	checkSale(t, s.Roles(), sale)
	checkSnapshotSale(t, s.Roles(), sale)
	if diff := cmp.Diff(before, mustOrder(t, s.Roles(), "o1"), msTime); diff != "" {
		t.Errorf("Order(o1) after Migrate mismatch (-before +after):\n%s", diff)
	}
	placeWant(t, s.Roles(), []error{nil}, res("o2", "s1", "u2", "k2", 1, 1, 1))
	checkNights(t, s.Roles(), sale, hs{held: 1}, hs{held: 2})
}
