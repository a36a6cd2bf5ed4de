package sqlrows

import (
	"fmt"

	"github.com/flashsale/flashsale"
)

// deleteTables are the tables a test sale's rows are deleted from, in
// this order (children first), after its events' delivery log.
var deleteTables = []struct{ table, column string }{
	{"notices", "sale_id"}, {"orders", "sale_id"}, {"user_rooms", "sale_id"},
	{"queue_places", "sale_id"}, {"queue_draws", "sale_id"},
	{"sale_changes", "sale_id"}, {"nights", "sale_id"}, {"sales", "id"},
}

// DeleteSale is the one sequence of a test sale's deletion around each
// store's SQL: lockTest locks the sale's row (the first lock, as every
// transaction that changes a sale takes it) and says whether it exists
// and is a test sale; exec runs one statement with the sale's ID as its
// one argument, written with placeholder ("?" or "$1").
func DeleteSale(placeholder string, lockTest func() (found, test bool, err error), exec func(query string) error) error {
	found, test, err := lockTest()
	switch {
	case err != nil:
		return err
	case !found:
		return flashsale.ErrNotFound
	case !test:
		return flashsale.ErrNotTestSale
	}
	if err := exec(`DELETE FROM deliveries WHERE notice_id IN (SELECT id FROM notices WHERE sale_id = ` + placeholder + `)`); err != nil {
		return fmt.Errorf("deliveries: %w", err)
	}
	for _, t := range deleteTables {
		if err := exec(`DELETE FROM ` + t.table + ` WHERE ` + t.column + ` = ` + placeholder); err != nil {
			return fmt.Errorf("%s: %w", t.table, err)
		}
	}
	return nil
}
