package sqlrows

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
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

// ReadQueue is QueueRecord's reads in tx (SQLite and MySQL, whose
// placeholders are '?'): the sale's draw, or nil, and its places in rank
// order, the prequeue's (rank 0) first by join.
func ReadQueue(ctx context.Context, tx *sql.Tx, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	var d *flashsale.Draw
	var seed, tickets string
	switch err := tx.QueryRowContext(ctx, `SELECT seed, tickets FROM queue_draws WHERE sale_id = ?`, saleID).Scan(&seed, &tickets); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, nil, err
	default:
		if d, err = DrawOf(saleID, seed, tickets); err != nil {
			return nil, nil, err
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT user_id, ticket, place_rank, joined_at_ms, admitted_until_ms, skipped, used
		FROM queue_places WHERE sale_id = ?
		ORDER BY place_rank, joined_at_ms, user_id`, saleID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var places []flashsale.PlaceRecord
	for rows.Next() {
		var (
			p        flashsale.PlaceRecord
			joinedAt int64
			until    sql.NullInt64
		)
		if err := rows.Scan(&p.UserID, &p.Ticket, &p.Rank, &joinedAt, &until, &p.Skipped, &p.Used); err != nil {
			return nil, nil, err
		}
		p.JoinedAt, p.AdmittedUntil = FromMS(joinedAt), FromMS(until.Int64)
		places = append(places, p)
	}
	return d, places, rows.Err()
}
