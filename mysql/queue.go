package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

var _ flashsale.QueueRecords = (*Store)(nil)

// The waiting rooms' records (flashsale.QueueRecords) in queue_places and
// queue_draws (migration 0012). A draw keeps only its seed and its sorted
// tickets, its order and commitment recomputed when read. The writes lock
// place rows in user order (lastPlaces, sorted lists), so two batches
// rarely deadlock, and the driver's InTx reruns the one InnoDB picks.

// maxPlacesPerStatement bounds the rows one statement carries (8
// parameters each, interpolated into the query: about 200 bytes a row,
// far below max_allowed_packet).
const maxPlacesPerStatement = 1000

// RecordPlaces implements flashsale.QueueRecords: one upsert per chunk of
// maxPlacesPerStatement places, in one transaction. A row whose ticket and
// rank are those recorded is left as it is (its progress kept); one with
// another ticket or rank replaces it, progress included (the record's,
// none for a place just taken). A user twice in places: the last wins.
//
// MySQL evaluates an ON DUPLICATE KEY UPDATE's assignments left to right,
// each seeing the ones before, so the columns that depend on the old
// ticket and rank come first and ticket itself last.
func (s *Store) RecordPlaces(ctx context.Context, saleID string, places []flashsale.PlaceRecord) error {
	if len(places) == 0 {
		return nil
	}
	places = sqlrows.LastPlaces(places)
	err := s.driver.InTx(ctx, "record_places", func(tx *sql.Tx) error {
		for chunk := range slices.Chunk(places, maxPlacesPerStatement) {
			args := make([]any, 0, 8*len(chunk))
			for _, p := range chunk {
				args = append(args, saleID, p.UserID, p.Ticket, p.Rank, ms(p.JoinedAt), sqlrows.NullMS(p.AdmittedUntil), p.Skipped, p.Used)
			}
			const other = `(ticket <> VALUES(ticket) OR place_rank <> VALUES(place_rank))`
			if _, err := tx.ExecContext(ctx, `INSERT INTO queue_places
				(sale_id, user_id, ticket, place_rank, joined_at_ms, admitted_until_ms, skipped, used)
				VALUES `+strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", len(chunk)-1)+`(?, ?, ?, ?, ?, ?, ?, ?)
				ON DUPLICATE KEY UPDATE
					joined_at_ms = IF(`+other+`, VALUES(joined_at_ms), joined_at_ms),
					admitted_until_ms = IF(`+other+`, VALUES(admitted_until_ms), admitted_until_ms),
					skipped = IF(`+other+`, VALUES(skipped), skipped),
					used = IF(`+other+`, VALUES(used), used),
					place_rank = IF(`+other+`, VALUES(place_rank), place_rank),
					ticket = VALUES(ticket)`, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
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
	admitted, skipped = slices.Sorted(slices.Values(admitted)), slices.Sorted(slices.Values(skipped))
	err := s.driver.InTx(ctx, "record_passed", func(tx *sql.Tx) error {
		for _, step := range []struct {
			users []string
			set   string
			arg   any
		}{
			{admitted, "admitted_until_ms = ?", sqlrows.NullMS(until)},
			{skipped, "skipped = ?", true},
		} {
			for chunk := range slices.Chunk(step.users, maxPlacesPerStatement) {
				args := make([]any, 0, 2+len(chunk))
				args = append(args, step.arg, saleID)
				for _, u := range chunk {
					args = append(args, u)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE queue_places SET `+step.set+`
					WHERE sale_id = ? AND user_id IN `+placeholders(len(chunk)), args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record passed: sale=%s: %w", saleID, err)
	}
	return nil
}

// RecordUse implements flashsale.QueueRecords; a user without a record is
// no error.
func (s *Store) RecordUse(ctx context.Context, saleID, userID string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE queue_places SET used = TRUE WHERE sale_id = ? AND user_id = ?`,
		saleID, userID); err != nil {
		return fmt.Errorf("record use: sale=%s: %w", saleID, down(err))
	}
	return nil
}

// RecordDraw implements flashsale.QueueRecords: the first draw recorded
// for a sale stays (sale_id = sale_id changes nothing; unlike INSERT
// IGNORE, it turns no other error into a warning). A draw that does not
// verify (sqlrows.DrawTickets) is refused.
func (s *Store) RecordDraw(ctx context.Context, d flashsale.Draw) error {
	tickets, err := sqlrows.DrawTickets(d)
	if err != nil {
		return fmt.Errorf("record draw: sale=%s: %w", d.SaleID, err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO queue_draws (sale_id, seed, tickets, recorded_at_ms)
		VALUES (?, ?, ?, `+nowMS+`) ON DUPLICATE KEY UPDATE sale_id = sale_id`, d.SaleID, d.Seed, tickets); err != nil {
		return fmt.Errorf("record draw: sale=%s: %w", d.SaleID, down(err))
	}
	return nil
}

// QueueRecord implements flashsale.QueueRecords: the draw and the places
// are read in one REPEATABLE READ transaction, so they are of one moment.
// The prequeue's places have rank 0, so ordering by rank puts them first
// (by join time, then user id), the ranked ones after, by rank.
func (s *Store) QueueRecord(ctx context.Context, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	d, places, err := s.queueRecord(ctx, saleID)
	if err != nil {
		return nil, nil, fmt.Errorf("queue record: sale=%s: %w", saleID, down(err))
	}
	return d, places, nil
}

func (s *Store) queueRecord(ctx context.Context, saleID string) (*flashsale.Draw, []flashsale.PlaceRecord, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	d, places, err := sqlrows.ReadQueue(ctx, tx, saleID)
	if err != nil {
		return nil, nil, err
	}
	return d, places, tx.Commit()
}
