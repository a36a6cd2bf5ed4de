package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// ExpireHolds moves up to limit held orders whose hold ended at or before
// now to expired, oldest first, in one transaction with their counter
// changes, and returns them as expired.
//
// The holds of a flash sale end together, and the night counter rows are
// the hottest rows in the database: every PlaceOrders batch updates them
// (briefly, at the end of its transaction) and every payment. One
// transaction per hold would wait for them once per hold; this waits once
// per batch. The work is a constant number of statements whatever the batch
// size:
//
//  1. SELECT ... FOR UPDATE SKIP LOCKED the due orders (MariaDB 10.6+,
//     MySQL 8; sqlstore.ExpireHolds's locking read): orders a Transition is paying or cancelling right now, or
//     another instance's reaper is expiring, are skipped rather than waited
//     for, so reapers share the work and each order expires exactly once;
//  2. mark them expired (rows affected must match);
//  3. read their check-in dates and slots (a plain, non-locking read);
//  4. per sale, one UPDATE of its users' counts, summed per user;
//  5. per sale, one UPDATE of its nights, the rooms summed per night.
//
// Lock order: the orders, then the user_rooms rows in (sale_id, user_id)
// order, then the nights in (sale_id, idx) order: the order PlaceOrders and
// Transition take too, so a reaper and a batch that share a user (one
// whose hold expires while their next order is placed) queue on the user
// row instead of deadlocking. The locking read skips locked orders instead
// of waiting, so it never waits while holding a counter row. A deadlock
// that remains is rerun by the driver's InTx.
func (s *Store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]*flashsale.Order, error) {
	return sqlstore.ExpireHolds(ctx, s.driver, now, limit, expireHolds)
}

// expireHolds is steps 2 to 5 of ExpireHolds, for the orders step 1 locked.
func expireHolds(ctx context.Context, tx *sql.Tx, orders []*flashsale.Order, nowMS int64) error {
	ids := make([]any, 0, 1+len(orders))
	ids = append(ids, nowMS)
	for _, o := range orders {
		ids = append(ids, o.ID)
	}
	if err := expectRows(tx.ExecContext(ctx, `UPDATE orders SET status = 'expired', updated_at_ms = ?
		WHERE status = 'held' AND id IN `+placeholders(len(orders)), ids...))(len(orders), sqlstore.ErrCounters); err != nil {
		return fmt.Errorf("mark expired: %w", err)
	}

	nights, users := releases(orders)
	if err := fillCheckIn(ctx, tx, orders, nights); err != nil {
		return fmt.Errorf("check-in dates and slots: %w", err)
	}
	for sale := range chunkBySale(users, func(u userRelease) string { return u.sale }) {
		if err := releaseUsers(ctx, tx, sale); err != nil {
			return fmt.Errorf("release user rooms: sale=%s: %w", sale[0].sale, err)
		}
	}
	for sale := range chunkBySale(nights, func(n nightRelease) string { return n.sale }) {
		if err := releaseNights(ctx, tx, sale); err != nil {
			return fmt.Errorf("release nights: sale=%s: %w", sale[0].sale, err)
		}
	}
	return nil
}

// nightRelease is the rooms a batch gives back to one night.
type nightRelease struct {
	sale  string
	idx   int
	rooms int
}

// userRelease is the rooms a batch gives back to one user's count in a sale.
type userRelease struct {
	sale, user string
	rooms      int
}

// releases sums the rooms the orders give back per night and per user,
// sorted in lock order: users by (sale, user), nights by (sale, idx).
func releases(orders []*flashsale.Order) ([]nightRelease, []userRelease) {
	type nightKey struct {
		sale string
		idx  int
	}
	type userKey struct{ sale, user string }
	perNight := map[nightKey]int{}
	perUser := map[userKey]int{}
	for _, o := range orders {
		for i := o.FirstNight; i < o.FirstNight+o.Nights; i++ {
			perNight[nightKey{o.SaleID, i}] += o.Rooms
		}
		perUser[userKey{o.SaleID, o.UserID}] += o.Rooms
	}
	nights := make([]nightRelease, 0, len(perNight))
	for k, rooms := range perNight {
		nights = append(nights, nightRelease{k.sale, k.idx, rooms})
	}
	slices.SortFunc(nights, func(a, b nightRelease) int {
		return cmp.Or(strings.Compare(a.sale, b.sale), cmp.Compare(a.idx, b.idx))
	})
	users := make([]userRelease, 0, len(perUser))
	for k, rooms := range perUser {
		users = append(users, userRelease{k.sale, k.user, rooms})
	}
	slices.SortFunc(users, func(a, b userRelease) int {
		return cmp.Or(strings.Compare(a.sale, b.sale), strings.Compare(a.user, b.user))
	})
	return nights, users
}

// chunkBySale yields the runs of a sorted slice that share a sale.
func chunkBySale[T any](s []T, sale func(T) string) func(yield func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			n := 1
			for n < len(s) && sale(s[n]) == sale(s[0]) {
				n++
			}
			if !yield(s[:n]) {
				return
			}
			s = s[n:]
		}
	}
}

// fillCheckIn sets each order's check-in date, the date of its first night,
// and its slot (that night's start_time, a slot sale's), with one
// non-locking read of the nights the batch touches.
func fillCheckIn(ctx context.Context, tx *sql.Tx, orders []*flashsale.Order, nights []nightRelease) error {
	if len(nights) == 0 {
		return nil
	}
	var sales, idxs []any
	seenSale, seenIdx := map[string]bool{}, map[int]bool{}
	for _, n := range nights {
		if !seenSale[n.sale] {
			seenSale[n.sale] = true
			sales = append(sales, n.sale)
		}
		if !seenIdx[n.idx] {
			seenIdx[n.idx] = true
			idxs = append(idxs, n.idx)
		}
	}
	// The cross product of sales and nights is a superset, but it keeps to
	// primary key ranges; a batch almost always names one sale.
	rows, err := tx.QueryContext(ctx, `SELECT sale_id, idx, DATE_FORMAT(date, '%Y-%m-%d'), start_time FROM nights
		WHERE sale_id IN `+placeholders(len(sales))+` AND idx IN `+placeholders(len(idxs)), append(sales, idxs...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type nightKey struct {
		sale string
		idx  int
	}
	type unit struct{ date, start string }
	units := map[nightKey]unit{}
	for rows.Next() {
		var k nightKey
		var u unit
		if err := rows.Scan(&k.sale, &k.idx, &u.date, &u.start); err != nil {
			return err
		}
		units[k] = u
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, o := range orders {
		u := units[nightKey{o.SaleID, o.FirstNight}]
		o.CheckIn, o.Slot = u.date, sqlrows.Slot(u.date, u.start)
	}
	return nil
}

// releaseNights gives one sale's nights back their held rooms with one
// statement. The range scan of the primary key locks them in idx order;
// every night must still hold what its orders held.
func releaseNights(ctx context.Context, tx *sql.Tx, nights []nightRelease) error {
	keys, rooms := make([]any, len(nights)), make([]int, len(nights))
	for i, n := range nights {
		keys[i], rooms[i] = n.idx, n.rooms
	}
	return subtract(ctx, tx, "nights", "held", "idx", nights[0].sale, keys, rooms)
}

// releaseUsers lowers one sale's user counts with one statement, locking
// the rows in user order.
func releaseUsers(ctx context.Context, tx *sql.Tx, users []userRelease) error {
	keys, rooms := make([]any, len(users)), make([]int, len(users))
	for i, u := range users {
		keys[i], rooms[i] = u.user, u.rooms
	}
	return subtract(ctx, tx, "user_rooms", "rooms", "user_id", users[0].sale, keys, rooms)
}

// subtract lowers column of the rows of table whose key (within sale) is
// keys[i] by amounts[i], with one UPDATE ... CASE, and fails with
// errCounters unless every row had at least its amount.
func subtract(ctx context.Context, tx *sql.Tx, table, column, key, sale string, keys []any, amounts []int) error {
	var b strings.Builder
	b.WriteString("CASE " + key)
	whens := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		b.WriteString(" WHEN ? THEN ?")
		whens = append(whens, k, amounts[i])
	}
	b.WriteString(" END")
	by := b.String()
	args := slices.Concat(whens, []any{sale}, keys, whens)
	return expectRows(tx.ExecContext(ctx, `UPDATE `+table+` SET `+column+` = `+column+` - `+by+`
		WHERE sale_id = ? AND `+key+` IN `+placeholders(len(keys))+` AND `+column+` >= `+by, args...))(len(keys), sqlstore.ErrCounters)
}

// placeholders returns "(?, ?, ...)" with n markers.
func placeholders(n int) string {
	return "(?" + strings.Repeat(", ?", n-1) + ")"
}
