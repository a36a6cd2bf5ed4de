package sqlrows

import (
	"cmp"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// What the SQL stores' waiting-room records (QueueRecords) do alike.

// NullMS stores a time as unix milliseconds, the zero time as NULL.
func NullMS(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: MS(t), Valid: !t.IsZero()}
}

// LastPlaces is places with one record per user, the last given, sorted
// by user: writers then lock rows in one order.
func LastPlaces(places []flashsale.PlaceRecord) []flashsale.PlaceRecord {
	last := make([]flashsale.PlaceRecord, len(places))
	copy(last, places)
	slices.Reverse(last)
	slices.SortStableFunc(last, func(a, b flashsale.PlaceRecord) int { return cmp.Compare(a.UserID, b.UserID) })
	return slices.CompactFunc(last, func(a, b flashsale.PlaceRecord) bool { return a.UserID == b.UserID })
}

// DrawTickets checks that d is a draw (its seed draws its order from its
// tickets, and is the one its commitment, if given, commits to) and
// returns its tickets as queue_draws keeps them: sorted, newline-joined
// (a ticket is printable ASCII, never a newline).
func DrawTickets(d flashsale.Draw) (string, error) {
	commitment, err := flashsale.DrawCommitment(d.SaleID, d.Seed)
	if err != nil {
		return "", err
	}
	if d.Commitment != "" && d.Commitment != commitment {
		return "", flashsale.ErrDrawCommitment
	}
	order, err := flashsale.DrawOrder(d.Seed, d.Tickets)
	if err != nil {
		return "", err
	}
	if d.Order != nil && !slices.Equal(d.Order, order) {
		return "", flashsale.ErrDrawOrder
	}
	return strings.Join(slices.Sorted(slices.Values(d.Tickets)), "\n"), nil
}

// DrawOf is the draw queue_draws keeps as seed and tickets, its
// commitment and order recomputed.
func DrawOf(saleID, seed, tickets string) (*flashsale.Draw, error) {
	d := &flashsale.Draw{SaleID: saleID, Seed: seed, Tickets: []string{}}
	if tickets != "" {
		d.Tickets = strings.Split(tickets, "\n")
	}
	var err error
	if d.Commitment, err = flashsale.DrawCommitment(saleID, seed); err != nil {
		return nil, fmt.Errorf("draw: %w", err)
	}
	if d.Order, err = flashsale.DrawOrder(seed, d.Tickets); err != nil {
		return nil, fmt.Errorf("draw: %w", err)
	}
	return d, nil
}
