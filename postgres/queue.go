package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
)

var _ flashsale.QueueRecords = (*Store)(nil)

// The waiting rooms' records (flashsale.QueueRecords) in queue_places and
// queue_draws (migration 0012). A draw keeps only its seed and its sorted
// tickets, its order and commitment recomputed when read. Each write is
// one statement, whatever its size (the rows go as arrays, unnested);
// the places' go in user order (sqlrows.LastPlaces), so two batches rarely
// deadlock, and the driver's InTx reruns the one PostgreSQL aborts.

// sqlRecordPlaces upserts the places given as arrays: a row whose ticket
// and rank are those recorded is left as it is (its progress kept); one
// with another ticket or rank replaces it, progress included.
const sqlRecordPlaces = `INSERT INTO queue_places
	(sale_id, user_id, ticket, place_rank, joined_at_ms, admitted_until_ms, skipped, used)
	SELECT $1, v.user_id, v.ticket, v.place_rank, v.joined_at_ms, NULLIF(v.admitted_until_ms, 0), v.skipped, v.used
	FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[], $6::bigint[], $7::bool[], $8::bool[])
		WITH ORDINALITY AS v(user_id, ticket, place_rank, joined_at_ms, admitted_until_ms, skipped, used, n)
	ORDER BY v.n
	ON CONFLICT (sale_id, user_id) DO UPDATE SET ticket = excluded.ticket, place_rank = excluded.place_rank,
		joined_at_ms = excluded.joined_at_ms, admitted_until_ms = excluded.admitted_until_ms,
		skipped = excluded.skipped, used = excluded.used
	WHERE queue_places.ticket <> excluded.ticket OR queue_places.place_rank <> excluded.place_rank`

// RecordPlaces implements flashsale.QueueRecords in one statement (see
// sqlRecordPlaces). A user twice in places: the last wins.
func (s *Store) RecordPlaces(ctx context.Context, saleID string, places []flashsale.PlaceRecord) error {
	if len(places) == 0 {
		return nil
	}
	places = sqlrows.LastPlaces(places)
	var (
		users, tickets = make([]string, len(places)), make([]string, len(places))
		ranks          = make([]int32, len(places))
		joined, until  = make([]int64, len(places)), make([]int64, len(places))
		skipped, used  = make([]bool, len(places)), make([]bool, len(places))
	)
	for i, p := range places {
		users[i], tickets[i], ranks[i] = p.UserID, p.Ticket, int32(p.Rank)
		joined[i], until[i], skipped[i], used[i] = ms(p.JoinedAt), ms(p.AdmittedUntil), p.Skipped, p.Used
	}
	err := s.driver.InTx(ctx, "record_places", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sqlRecordPlaces, saleID, users, tickets, ranks, joined, until, skipped, used)
		return err
	})
	if err != nil {
		return fmt.Errorf("record places: sale=%s: %w", saleID, err)
	}
	return nil
}

// RecordPassed implements flashsale.QueueRecords in one statement. Users
// without a record are no error: there is nothing of theirs to mark.
func (s *Store) RecordPassed(ctx context.Context, saleID string, admitted []string, until time.Time, skipped []string) error {
	if len(admitted) == 0 && len(skipped) == 0 {
		return nil
	}
	var untilMS *int64
	if !until.IsZero() {
		v := ms(until)
		untilMS = &v
	}
	err := s.driver.InTx(ctx, "record_passed", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE queue_places SET
				admitted_until_ms = CASE WHEN user_id = ANY($2::text[]) THEN $3::bigint ELSE admitted_until_ms END,
				skipped = skipped OR user_id = ANY($4::text[])
			WHERE sale_id = $1 AND (user_id = ANY($2::text[]) OR user_id = ANY($4::text[]))`,
			saleID, nonNil(admitted), untilMS, nonNil(skipped))
		return err
	})
	if err != nil {
		return fmt.Errorf("record passed: sale=%s: %w", saleID, err)
	}
	return nil
}

// nonNil is users, or an empty list for none: an array, never NULL.
func nonNil(users []string) []string {
	if users == nil {
		return []string{}
	}
	return users
}

// RecordUse implements flashsale.QueueRecords; a user without a record is
// no error.
func (s *Store) RecordUse(ctx context.Context, saleID, userID string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE queue_places SET used = TRUE WHERE sale_id = $1 AND user_id = $2`,
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
	if _, err := s.pool.Exec(ctx, `INSERT INTO queue_draws (sale_id, seed, tickets, recorded_at_ms)
		VALUES ($1, $2, $3, `+nowMS+`) ON CONFLICT (sale_id) DO NOTHING`, d.SaleID, d.Seed, tickets); err != nil {
		return fmt.Errorf("record draw: sale=%s: %w", d.SaleID, err)
	}
	return nil
}

// QueueRecord implements flashsale.QueueRecords: the draw and the places
// are read in one REPEATABLE READ transaction, so they are of one moment.
// The prequeue's places have rank 0, so ordering by rank puts them first
// (by join time, then user id), the ranked ones after, by rank.
// user_id sorts bytewise (COLLATE "C"), whatever the database's collation.
func (s *Store) QueueRecord(ctx context.Context, saleID string) (d *flashsale.Draw, places []flashsale.PlaceRecord, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var seed, tickets string
		switch err := tx.QueryRow(ctx, `SELECT seed, tickets FROM queue_draws WHERE sale_id = $1`, saleID).Scan(&seed, &tickets); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			if d, err = sqlrows.DrawOf(saleID, seed, tickets); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT user_id, ticket, place_rank, joined_at_ms, coalesce(admitted_until_ms, 0), skipped, used
			FROM queue_places WHERE sale_id = $1
			ORDER BY place_rank, joined_at_ms, user_id COLLATE "C"`, saleID)
		if err != nil {
			return err
		}
		places, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (flashsale.PlaceRecord, error) {
			var (
				p               flashsale.PlaceRecord
				rank            int32
				joinedAt, until int64
			)
			err := row.Scan(&p.UserID, &p.Ticket, &rank, &joinedAt, &until, &p.Skipped, &p.Used)
			p.Rank, p.JoinedAt, p.AdmittedUntil = int(rank), sqlrows.FromMS(joinedAt), sqlrows.FromMS(until)
			return p, err
		})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("queue record: sale=%s: %w", saleID, err)
	}
	if len(places) == 0 {
		places = nil
	}
	return d, places, nil
}
