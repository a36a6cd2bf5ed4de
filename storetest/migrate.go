package storetest

import (
	"context"
	"sync"
	"testing"
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

// RunMigrateOverSales checks the last migration on a database that holds
// a sale from before it, as an upgrade finds one: the sale, created on s
// (migrated), reads back as it was written once previous has taken the
// database back to the schema before the last migration (its DDL undone,
// its record gone) and Migrate has applied it again. A sale from before
// the waiting room (0011) has none.
func RunMigrateOverSales[S ServerStore](t *testing.T, s S, previous func(ctx context.Context, s S) error) {
	ctx := t.Context()
	sale := mustCreateSale(t, s.Roles(), newSale("s1", 1, 5, 6))
	if err := previous(ctx, s); err != nil {
		t.Fatalf("back to the schema before the last migration: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over a sale: %v", err)
	}
	if got := mustSale(t, s.Roles(), sale.ID); got.WaitingRoom != nil {
		t.Errorf("a sale from before the waiting room has one: %+v", got.WaitingRoom)
	}
	checkSale(t, s.Roles(), sale)
}
