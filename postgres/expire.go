package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// The statements of ExpireHolds after the locking read, sent as one
// pipelined batch. Each lock statement takes its rows in primary key order
// (the ORDER BY sits below the row locking), so that the UPDATE after it,
// whose join order the planner picks, finds them already locked.
const (
	sqlMarkExpired = `UPDATE orders SET status = 'expired', updated_at_ms = $1
		WHERE id = ANY($2) AND status = 'held'`
	// sqlLockNights also reads the nights' dates and start times, which
	// include every order's check-in date and slot.
	sqlLockNights = `SELECT n.sale_id, n.idx, to_char(n.date, 'YYYY-MM-DD'), n.start_time FROM nights n
		JOIN unnest($1::text[], $2::int[]) AS v(sale_id, idx) ON n.sale_id = v.sale_id AND n.idx = v.idx
		ORDER BY n.sale_id, n.idx FOR UPDATE OF n`
	sqlReleaseNights = `UPDATE nights n SET held = n.held - v.rooms
		FROM unnest($1::text[], $2::int[], $3::int[]) AS v(sale_id, idx, rooms)
		WHERE n.sale_id = v.sale_id AND n.idx = v.idx AND n.held >= v.rooms`
	sqlLockUsers = `SELECT count(*) FROM (SELECT 1 FROM user_rooms u
		JOIN unnest($1::text[], $2::text[]) AS v(sale_id, user_id) ON u.sale_id = v.sale_id AND u.user_id = v.user_id
		ORDER BY u.sale_id, u.user_id FOR UPDATE OF u) AS locked`
	sqlReleaseUsers = `UPDATE user_rooms u SET rooms = u.rooms - v.rooms
		FROM unnest($1::text[], $2::text[], $3::int[]) AS v(sale_id, user_id, rooms)
		WHERE u.sale_id = v.sale_id AND u.user_id = v.user_id AND u.rooms >= v.rooms`
)

// ExpireHolds moves up to limit held orders whose hold ended at or before
// now to expired, oldest first, in one transaction with their counter
// changes, and returns them as expired.
//
// The holds of a flash sale end together, and the night counter rows are
// the hottest rows in the database: the order consumer's PlaceOrders batches
// hold them for a whole batch. One transaction per hold would wait for that
// lock once per hold; this waits once per batch, and costs four round trips
// whatever its size (BEGIN, the locking read, one pipelined batch, COMMIT):
//
//  1. SELECT ... FOR UPDATE SKIP LOCKED the due orders (sqlstore.ExpireHolds's
//     locking read): orders a Transition is paying or cancelling right now,
//     or another instance's reaper is expiring, are skipped rather than
//     waited for, so reapers share the work and each order expires exactly
//     once;
//  2. mark them expired; lock and release their nights, the rooms summed
//     per night; lock and lower their users' counts, summed per user; every
//     statement's row count is checked.
//
// Lock order: the orders, then the nights in (sale_id, idx) order, then the
// user_rooms rows in (sale_id, user_id) order: the order of Transition, and
// PlaceOrders' nights-before-users. The locking read skips locked orders
// instead of waiting, so it never waits while holding a night. A deadlock
// that remains is rerun by the driver's InTx.
func (s *Store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]*flashsale.Order, error) {
	return sqlstore.ExpireHolds(ctx, s.driver, now, limit, expireHolds)
}

// expireHolds is step 2 of ExpireHolds, for the orders step 1 locked: one
// pipelined batch.
func expireHolds(ctx context.Context, tx pgx.Tx, orders []*flashsale.Order, nowMS int64) error {
	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	nights, users := releases(orders)
	b := &pgx.Batch{}
	b.Queue(sqlMarkExpired, nowMS, ids)
	b.Queue(sqlLockNights, nights.sales, nights.idxs)
	b.Queue(sqlReleaseNights, nights.sales, nights.idxs, nights.rooms)
	b.Queue(sqlLockUsers, users.sales, users.users)
	b.Queue(sqlReleaseUsers, users.sales, users.users, users.rooms)
	br := tx.SendBatch(ctx, b)
	defer br.Close()

	if err := expectRows(br.Exec())(len(ids), sqlstore.ErrCounters); err != nil {
		return fmt.Errorf("mark expired: %w", err)
	}
	type nightKey struct {
		sale string
		idx  int
	}
	type unit struct{ date, start string }
	units := map[nightKey]unit{}
	var (
		k nightKey
		u unit
	)
	rows, err := br.Query()
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&k.sale, &k.idx, &u.date, &u.start}, func() error {
			units[k] = u
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("lock nights: %w", err)
	}
	if err := expectRows(br.Exec())(len(nights.idxs), sqlstore.ErrCounters); err != nil {
		return fmt.Errorf("release nights: %w", err)
	}
	var locked int
	if err := br.QueryRow().Scan(&locked); err != nil {
		return fmt.Errorf("lock user rooms: %w", err)
	}
	if err := expectRows(br.Exec())(len(users.users), sqlstore.ErrCounters); err != nil {
		return fmt.Errorf("release user rooms: %w", err)
	}
	if err := br.Close(); err != nil {
		return err
	}
	for _, o := range orders {
		u := units[nightKey{o.SaleID, o.FirstNight}]
		o.CheckIn, o.Slot = u.date, sqlrows.Slot(u.date, u.start)
	}
	return nil
}

// nightReleases is the rooms a batch gives back per night, as the parallel
// arrays unnest takes, sorted by (sale, idx).
type nightReleases struct {
	sales []string
	idxs  []int
	rooms []int
}

// userReleases is the rooms a batch gives back per user's count in a sale,
// as parallel arrays sorted by (sale, user).
type userReleases struct {
	sales []string
	users []string
	rooms []int
}

// releases sums the rooms the orders give back per night and per user, in
// lock order.
func releases(orders []*flashsale.Order) (nightReleases, userReleases) {
	type night struct {
		sale       string
		idx, rooms int
	}
	type user struct {
		sale, user string
		rooms      int
	}
	type nightKey struct {
		sale string
		idx  int
	}
	type userKey struct{ sale, user string }
	perNight := map[nightKey]*night{}
	perUser := map[userKey]*user{}
	var ns []*night
	var us []*user
	for _, o := range orders {
		for i := o.FirstNight; i < o.FirstNight+o.Nights; i++ {
			n := perNight[nightKey{o.SaleID, i}]
			if n == nil {
				n = &night{sale: o.SaleID, idx: i}
				perNight[nightKey{o.SaleID, i}] = n
				ns = append(ns, n)
			}
			n.rooms += o.Rooms
		}
		u := perUser[userKey{o.SaleID, o.UserID}]
		if u == nil {
			u = &user{sale: o.SaleID, user: o.UserID}
			perUser[userKey{o.SaleID, o.UserID}] = u
			us = append(us, u)
		}
		u.rooms += o.Rooms
	}
	slices.SortFunc(ns, func(a, b *night) int {
		return cmp.Or(strings.Compare(a.sale, b.sale), cmp.Compare(a.idx, b.idx))
	})
	slices.SortFunc(us, func(a, b *user) int {
		return cmp.Or(strings.Compare(a.sale, b.sale), strings.Compare(a.user, b.user))
	})
	var nr nightReleases
	for _, n := range ns {
		nr.sales, nr.idxs, nr.rooms = append(nr.sales, n.sale), append(nr.idxs, n.idx), append(nr.rooms, n.rooms)
	}
	var ur userReleases
	for _, u := range us {
		ur.sales, ur.users, ur.rooms = append(ur.sales, u.sale), append(ur.users, u.user), append(ur.rooms, u.rooms)
	}
	return nr, ur
}
