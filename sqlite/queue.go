package sqlite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

var _ flashsale.QueueRecords = (*Store)(nil)

// The waiting rooms' records (flashsale.QueueRecords) in queue_places and
// queue_draws (migration 0012). Every write runs on the single writer, so
// two batches never interleave; a draw keeps only its seed and its sorted
// tickets, its order and commitment recomputed when read.

// RecordPlaces implements flashsale.QueueRecords: one upsert per chunk of
// maxRowsPerStatement places, in one transaction. A row whose ticket and
// rank are those recorded is left as it is (its progress kept); one with
// another ticket or rank replaces it, progress included (the record's,
// none for a place just taken). A user twice in places: the last wins.
func (s *Store) RecordPlaces(ctx context.Context, saleID string, places []flashsale.PlaceRecord) error {
	if len(places) == 0 {
		return nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record places: sale=%s: %w", saleID, err)
	}
	defer tx.Rollback()
	for chunk := range slices.Chunk(sqlrows.LastPlaces(places), maxRowsPerStatement) {
		args := make([]any, 0, 8*len(chunk))
		for _, p := range chunk {
			args = append(args, saleID, p.UserID, p.Ticket, p.Rank, ms(p.JoinedAt), sqlrows.NullMS(p.AdmittedUntil), p.Skipped, p.Used)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO queue_places
			(sale_id, user_id, ticket, place_rank, joined_at_ms, admitted_until_ms, skipped, used)
			VALUES `+placeholders(len(chunk), 8)+`
			ON CONFLICT (sale_id, user_id) DO UPDATE SET ticket = excluded.ticket, place_rank = excluded.place_rank,
				joined_at_ms = excluded.joined_at_ms, admitted_until_ms = excluded.admitted_until_ms,
				skipped = excluded.skipped, used = excluded.used
			WHERE queue_places.ticket <> excluded.ticket OR queue_places.place_rank <> excluded.place_rank`, args...); err != nil {
			return fmt.Errorf("record places: sale=%s: %w", saleID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record places: sale=%s: %w", saleID, err)
	}
	return nil
}

// RecordPassed implements flashsale.QueueRecords, in one transaction.
// Users without a record are no error: there is nothing of theirs to mark.
func (s *Store) RecordPassed(ctx context.Context, saleID string, admitted []string, until time.Time, skipped []string) error {
	if len(admitted) == 0 && len(skipped) == 0 {
		return nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record passed: sale=%s: %w", saleID, err)
	}
	defer tx.Rollback()
	for _, step := range []struct {
		users []string
		set   string
		arg   any
	}{
		{admitted, "admitted_until_ms = ?", sqlrows.NullMS(until)},
		{skipped, "skipped = ?", true},
	} {
		for chunk := range slices.Chunk(step.users, maxRowsPerStatement) {
			args := make([]any, 0, 2+len(chunk))
			args = append(args, step.arg, saleID)
			for _, u := range chunk {
				args = append(args, u)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE queue_places SET `+step.set+`
				WHERE sale_id = ? AND user_id IN (`+placeholders(len(chunk), 1)+`)`, args...); err != nil {
				return fmt.Errorf("record passed: sale=%s: %w", saleID, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record passed: sale=%s: %w", saleID, err)
	}
	return nil
}

// RecordUse implements flashsale.QueueRecords; a user without a record is
// no error.
func (s *Store) RecordUse(ctx context.Context, saleID, userID string) error {
	if _, err := s.write.ExecContext(ctx, `UPDATE queue_places SET used = 1 WHERE sale_id = ? AND user_id = ?`,
		saleID, userID); err != nil {
		return fmt.Errorf("record use: sale=%s: %w", saleID, err)
	}
	return nil
}

// RecordDraw implements flashsale.QueueRecords: the first draw recorded
// for a sale stays. A draw that does not verify (sqlrows.DrawTickets) is refused.
func (s *Store) RecordDraw(ctx context.Context, d flashsale.Draw) error {
	tickets, err := sqlrows.DrawTickets(d)
	if err != nil {
		return fmt.Errorf("record draw: sale=%s: %w", d.SaleID, err)
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO queue_draws (sale_id, seed, tickets, recorded_at_ms)
		VALUES (?, ?, ?, ?) ON CONFLICT (sale_id) DO NOTHING`, d.SaleID, d.Seed, tickets, ms(time.Now())); err != nil {
		return fmt.Errorf("record draw: sale=%s: %w", d.SaleID, err)
	}
	return nil
}

// QueueRecord implements flashsale.QueueRecords: the draw and the places
// are read in one transaction, so they are of one moment.
// The prequeue's places have rank 0, so ordering by rank puts them first
// (by join time, then user id), the ranked ones after, by rank.
func (s *Store) QueueRecord(ctx context.Context, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	d, places, err := s.queueRecord(ctx, saleID)
	if err != nil {
		return nil, nil, fmt.Errorf("queue record: sale=%s: %w", saleID, err)
	}
	return d, places, nil
}

func (s *Store) queueRecord(ctx context.Context, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	return sqlrows.ReadQueue(ctx, tx, saleID)
}
