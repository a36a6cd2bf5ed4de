package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// PlaceOrders writes a batch of reservations in one transaction, in two
// phases, so that the night counter rows, the hottest rows in the database
// (the reaper's ExpireHolds and every Transition wait for them), are locked
// only for the last few statements of the transaction rather than for all
// of it.
//
// Before anything is written, a reservation with no rooms, no nights or a
// negative first night (which the stock engine never produces) is
// ErrInvalid, and one for a sale that does not exist is ErrNotFound: both
// write nothing (no row, no key bound, the ID stays free), so one bad
// message cannot fail the batch and a redelivery gets the same answer.
//
// Phase 1, the orders and the users, no night locked:
//
//  1. insert every order as held with one multi-row INSERT. If an ID or a
//     key is taken, InnoDB rolls that statement back and the orders go in
//     one by one, in batch order: a duplicate ID is ErrDuplicate (nothing
//     changed); a duplicate idempotency key is ErrKeyConflict, and the
//     order goes in as failed without the key. Neither outcome depends on
//     stock or limits, so phase 1's inserts stand whatever happens next;
//  2. per sale, lock the batch's users' user_rooms rows with one read,
//     decide each order against the limit in (user_id, batch) order, and
//     write the users' new counts with one multi-row upsert: an order over
//     the limit is ErrLimitExceeded and updated to failed, keeping its key
//     so a retry finds it.
//
// Phase 2, the nights: the surviving orders are summed per stay (sale,
// first night, nights) and each stay takes its total with one conditional
// UPDATE, in (sale_id, first night) order. In a flash sale a batch is
// almost always one stay of one sale, so the nights are locked by a single
// statement just before the commit. The happy path costs the same handful
// of round trips however large the batch (sales, orders, users read,
// users written, one per stay, commit): 6× the orders per second of a
// round trip per order at batch 512, 3.5× at 64 (BenchmarkPlaceOrders).
//
// If every stay's UPDATE changed all its nights, every order fits and the
// result is exactly what placing them one by one would give. If one did
// not, some order is sold out, and which one depends on batch order (and a
// sold-out order must not count against its user's limit for the orders
// after it), so the batch rolls back to the end of phase 1's inserts and
// places the orders one by one, the exact way: it locks the nights of its
// sales, then per order, under a savepoint, the upsert and a conditional
// UPDATE of its nights (fewer rows than nights means ErrSoldOut, which is
// also how a stay running past the sale's last night fails); a refusal
// rolls back to the savepoint, which gives back the user's rooms and any
// night taken, and updates the order to failed. That costs four round trips
// per reservation, but only when the database refuses what the stock engine
// accepted (or, see takeUsers, when MySQL and Go disagree on which user IDs
// are equal).
//
// Lock order (old: every night of the batch's sales first, for the whole
// transaction; new): the batch's sale rows, in id order, which only other
// batches lock, so batches on one sale take turns; then the orders it
// inserts; then user_rooms rows in (sale_id, user_id) order; then nights in
// (sale_id, idx) order, at the very end. Transition and ExpireHolds take
// the same order from the order rows on (order rows, the user rows, the
// nights), so a reaper or a payment never holds a night that a batch
// holding a user row waits for, or the other way round. What remains is
// rare (a batch inserting an order a Transition is locking, or the
// one-by-one fallback, which can take a new user's row after the nights),
// and sqlstore.PlaceOrders reruns the whole transaction from the start,
// results cleared, logging a warning.
func (s *Store) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	return sqlstore.PlaceOrders(ctx, s.driver, rs, func(ctx context.Context, tx *sql.Tx, results []error) ([]flashsale.Notice, error) {
		p := placer{tx: tx, rs: rs, results: results, nowMS: time.Now().UnixMilli(), logger: s.logger}
		if err := p.run(ctx); err != nil {
			return nil, err
		}
		ns, err := p.notices(ctx)
		if err != nil {
			return nil, fmt.Errorf("notices: %w", err)
		}
		return ns, nil
	})
}

// placer carries one attempt at a PlaceOrders transaction. PlaceOrders
// makes a new one for every attempt, so a rerun after a deadlock starts clean.
type placer struct {
	tx      *sql.Tx
	rs      []flashsale.Reservation
	results []error
	terms   map[string]sqlstore.SaleTerms
	nowMS   int64
	logger  *slog.Logger
	// stocks are the nights of the sales with orders left after phase 1,
	// read as phase 2 locks them, before it takes any.
	stocks map[string]*sqlrows.Stock
}

// notices returns the batch's notices once it is placed. A sale none of
// whose orders reached phase 2 can only have failed orders, which want
// only its dates: those are read without a lock.
func (p *placer) notices(ctx context.Context) ([]flashsale.Notice, error) {
	var missing []string
	for i := range p.rs {
		id := p.rs[i].SaleID
		if _, ok := p.stocks[id]; !ok && p.terms[id].Known && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	more, err := readStocks(ctx, p.tx, missing, p.currency, false)
	if err != nil {
		return nil, err
	}
	if p.stocks == nil {
		p.stocks = more
	} else {
		maps.Copy(p.stocks, more)
	}
	return sqlrows.PlaceNotices(p.rs, p.results, p.stocks, p.nowMS), nil
}

func (p *placer) currency(sale string) string { return p.terms[sale].Currency }

// lockStocks locks and reads the nights of the sales of the orders live,
// in (sale_id, idx) order, for phase 2.
func (p *placer) lockStocks(ctx context.Context, live []int) error {
	var sales []string
	for _, i := range live {
		if id := p.rs[i].SaleID; !slices.Contains(sales, id) {
			sales = append(sales, id)
		}
	}
	slices.Sort(sales)
	stocks, err := readStocks(ctx, p.tx, sales, p.currency, true)
	if err != nil {
		return fmt.Errorf("lock nights: %w", err)
	}
	p.stocks = stocks
	return nil
}

func (p *placer) run(ctx context.Context) error {
	if err := p.readTerms(ctx); err != nil {
		return fmt.Errorf("sales: %w", err)
	}
	writable := make([]int, 0, len(p.rs))
	for i := range p.rs {
		if p.results[i] = sqlstore.Refuse(&p.rs[i], p.terms); p.results[i] == nil {
			writable = append(writable, i)
		}
	}
	live, err := p.insertAll(ctx, writable)
	if err != nil {
		return err
	}
	if len(live) == 0 {
		return nil
	}

	if _, err := p.tx.ExecContext(ctx, "SAVEPOINT counters"); err != nil {
		return err
	}
	if ok, err := p.takeTogether(ctx, live); err != nil || ok {
		return err
	}
	p.logger.Debug("a night refused a batch, placing its orders one by one", "orders", len(live))
	if _, err := p.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT counters"); err != nil {
		return err
	}
	return p.takeOneByOne(ctx, live)
}

// readTerms reads the limit and currency of every sale in the batch and
// locks their rows, in primary key order. Only the operator's changes
// (UpdateSale, AdjustStock: see lifecycle.go) lock a sale row too, and
// they take it before its nights as a batch does, so this only makes
// batches on the same sale take turns, as they did when
// they locked the nights first: two batches running side by side would
// deadlock on the gap locks InnoDB takes for the user_rooms upserts of new
// users (even in READ COMMITTED). A sale missing here is unknown.
func (p *placer) readTerms(ctx context.Context) error {
	p.terms = make(map[string]sqlstore.SaleTerms, 1)
	var args []any
	for i := range p.rs {
		if id := p.rs[i].SaleID; !slices.Contains(args, any(id)) {
			args = append(args, id)
		}
	}
	rows, err := p.tx.QueryContext(ctx, "SELECT id, per_user_limit, currency FROM sales WHERE id IN "+placeholders(len(args))+" FOR UPDATE", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		t := sqlstore.SaleTerms{Known: true}
		if err := rows.Scan(&id, &t.Limit, &t.Currency); err != nil {
			return err
		}
		p.terms[id] = t
	}
	return rows.Err()
}

const (
	insertOrders = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
	nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, failure_reason, created_at_ms, updated_at_ms) VALUES `
	orderRow    = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?)`
	insertOrder = insertOrders + orderRow
)

// insertAll inserts the orders rs[i] for i in idx as held and returns the
// ones that went in as held. The usual batch is written by one multi-row
// INSERT. If any ID or key is already taken (a redelivery, a key reused),
// InnoDB rolls that statement back whole, and the orders are inserted one
// by one to tell which.
func (p *placer) insertAll(ctx context.Context, idx []int) ([]int, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	var q strings.Builder
	q.Grow(len(insertOrders) + len(idx)*(len(orderRow)+2))
	q.WriteString(insertOrders)
	args := make([]any, 0, 14*len(idx))
	for n, i := range idx {
		if n > 0 {
			q.WriteString(", ")
		}
		q.WriteString(orderRow)
		args = p.orderArgs(args, &p.rs[i], flashsale.OrderHeld, p.rs[i].IdempotencyKey, "")
	}
	_, err := p.tx.ExecContext(ctx, q.String(), args...)
	if err == nil {
		return idx, nil
	}
	if !isDuplicate(err) {
		return nil, fmt.Errorf("insert orders: %w", err)
	}
	live := make([]int, 0, len(idx))
	for _, i := range idx {
		r := &p.rs[i]
		result, err := p.insert(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("order=%s: %w", r.OrderID, err)
		}
		if p.results[i] = result; result == nil {
			live = append(live, i)
		}
	}
	return live, nil
}

// orderArgs appends the arguments of orderRow for r, with the reason it
// failed (empty unless status is failed).
func (p *placer) orderArgs(args []any, r *flashsale.Reservation, status flashsale.OrderStatus, key, reason string) []any {
	return append(args, r.OrderID, r.SaleID, r.UserID, nullKey(key), string(status),
		r.FirstNight, r.Nights, r.Rooms, r.Amount, p.terms[r.SaleID].Currency, ms(r.HoldExpiresAt), reason, p.nowMS, p.nowMS)
}

// insert writes one order as held. It returns ErrDuplicate if the ID
// exists (nothing written) and ErrKeyConflict if the key is taken (the order
// written as failed without the key); any other error aborts the batch.
func (p *placer) insert(ctx context.Context, r *flashsale.Reservation) (outcome, err error) {
	write := func(status flashsale.OrderStatus, key, reason string) error {
		_, err := p.tx.ExecContext(ctx, insertOrder, p.orderArgs(nil, r, status, key, reason)...)
		return err
	}
	err = write(flashsale.OrderHeld, r.IdempotencyKey, "")
	if !isDuplicate(err) {
		return nil, err
	}
	// Which unique key? InnoDB rolled back only the failed statement, so look.
	var exists bool
	if err := p.tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM orders WHERE id = ?)", r.OrderID).Scan(&exists); err != nil {
		return nil, err
	}
	if exists {
		return flashsale.ErrDuplicate, nil
	}
	if err := write(flashsale.OrderFailed, "", flashsale.ErrorCode(flashsale.ErrKeyConflict)); err != nil {
		return nil, err
	}
	return flashsale.ErrKeyConflict, nil
}

// failOrder writes a failed order with the sale's currency, so no row means
// no such sale. It touches no counter.
const failOrder = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
	nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, failure_reason, created_at_ms, updated_at_ms)
	SELECT ?, id, ?, ?, 'failed', ?, ?, ?, ?, currency, ?, '', ?, ?, ? FROM sales WHERE id = ?`

// FailOrder records a reservation the order path gave up on as a failed
// order with reason, taking no stock; see flashsale.Store. Its INSERT takes
// the currency from the sale row, so an unknown sale writes nothing. A
// unique key that refuses the row is the ID (ErrDuplicate) if an order with
// it exists, or else the idempotency key, and the row is written again
// without it. In READ COMMITTED the INSERT reads the sale row without
// locking it, so it does not queue behind a PlaceOrders batch that holds it.
func (s *Store) FailOrder(ctx context.Context, r flashsale.Reservation, reason string) error {
	return sqlstore.FailOrder(ctx, s.driver, r, reason, insertFailed)
}

// insertFailed writes r as a failed order (see FailOrder) and reports what
// happened.
func insertFailed(ctx context.Context, tx *sql.Tx, r *flashsale.Reservation, key, reason string, at int64) (sqlrows.Inserted, error) {
	res, err := tx.ExecContext(ctx, failOrder, r.OrderID, r.UserID, nullKey(key), r.FirstNight, r.Nights,
		r.Rooms, r.Amount, ms(r.HoldExpiresAt), reason, at, at, r.SaleID)
	if isDuplicate(err) {
		// Which unique key? InnoDB rolled back only the statement, so look.
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM orders WHERE id = ?)", r.OrderID).Scan(&exists); err != nil {
			return 0, err
		}
		if exists {
			return sqlrows.IDTaken, nil
		}
		return sqlrows.KeyTaken, nil
	}
	if err != nil {
		return 0, err
	}
	return sqlrows.Affected(res)
}

// takeTogether is phase 2's fast path: the users' counts one by one, then
// each stay's nights with one statement. It reports false, having possibly
// changed some nights, if a night lacked stock for its stay's total; the
// caller then rolls back to the savepoint before it.
func (p *placer) takeTogether(ctx context.Context, live []int) (bool, error) {
	byUser := slices.Clone(live)
	slices.SortStableFunc(byUser, func(a, b int) int {
		ra, rb := &p.rs[a], &p.rs[b]
		return cmp.Or(strings.Compare(ra.SaleID, rb.SaleID), strings.Compare(ra.UserID, rb.UserID))
	})
	type stay struct {
		sale          string
		first, nights int
	}
	taken, ok, err := p.takeUsers(ctx, byUser)
	if err != nil || !ok {
		return false, err
	}
	totals := map[stay]int{}
	for _, i := range taken {
		r := &p.rs[i]
		totals[stay{r.SaleID, r.FirstNight, r.Nights}] += r.Rooms
	}

	stays := slices.SortedFunc(maps.Keys(totals), func(a, b stay) int {
		return cmp.Or(strings.Compare(a.sale, b.sale), cmp.Compare(a.first, b.first), cmp.Compare(a.nights, b.nights))
	})
	if err := p.lockStocks(ctx, taken); err != nil {
		return false, err
	}
	for _, st := range stays {
		ok, err := holdNights(ctx, p.tx, st.sale, st.first, st.nights, totals[st])
		if err != nil {
			return false, fmt.Errorf("nights: sale=%s: %w", st.sale, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// takeOneByOne is phase 2's exact path: it locks the nights of the batch's
// sales, then places the orders one by one in batch order.
func (p *placer) takeOneByOne(ctx context.Context, live []int) error {
	// Read again: the savepoint undid phase 2's fast path.
	if err := p.lockStocks(ctx, live); err != nil {
		return err
	}
	for _, i := range live {
		r := &p.rs[i]
		result, err := p.takeOne(ctx, r)
		if err != nil {
			return fmt.Errorf("order=%s: %w", r.OrderID, err)
		}
		p.results[i] = result
	}
	return nil
}

// takeOne takes one held order's rooms from its user and its nights under
// a savepoint. A refusal rolls back to the savepoint and fails the order.
func (p *placer) takeOne(ctx context.Context, r *flashsale.Reservation) (outcome, err error) {
	if _, err := p.tx.ExecContext(ctx, "SAVEPOINT reservation"); err != nil {
		return nil, err
	}
	ok, err := p.takeUserRooms(ctx, r)
	if err != nil {
		return nil, err
	}
	outcome = flashsale.ErrLimitExceeded
	if ok {
		if ok, err = holdNights(ctx, p.tx, r.SaleID, r.FirstNight, r.Nights, r.Rooms); err != nil {
			return nil, err
		}
		outcome = flashsale.ErrSoldOut
	}
	if ok {
		return nil, nil
	}
	if _, err := p.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT reservation"); err != nil {
		return nil, err
	}
	if err := p.markFailed(ctx, r, outcome); err != nil {
		return nil, err
	}
	return outcome, nil
}

// takeUsers adds each order's rooms to its user's count, byUser being the
// orders in (sale_id, user_id) order, each user's in batch order, and
// returns the orders that fit. An order that would take its user past the
// sale's limit is ErrLimitExceeded and updated to failed. Per sale it locks
// the users' rows with one read and writes their new counts with one
// upsert, instead of a conditional upsert per order: the counts are
// decided here, on locked rows (a user without a row has none yet, and
// only batches, which take turns per sale, create one).
//
// Deciding in Go assumes MySQL tells users apart as Go does. The upsert's
// rows affected (1 per row inserted, 2 per row updated) says whether it
// did; if not (two IDs the column's collation calls equal), takeUsers
// reports false and the caller places the orders one by one, where MySQL
// itself checks the limit.
func (p *placer) takeUsers(ctx context.Context, byUser []int) (taken []int, ok bool, err error) {
	taken = make([]int, 0, len(byUser))
	for start := 0; start < len(byUser); {
		sale := p.rs[byUser[start]].SaleID
		end := start
		for end < len(byUser) && p.rs[byUser[end]].SaleID == sale {
			end++
		}
		orders := byUser[start:end]
		start = end

		had, err := p.lockUsers(ctx, sale, orders)
		if err != nil {
			return nil, false, fmt.Errorf("users: sale=%s: %w", sale, err)
		}
		limit := p.terms[sale].Limit
		added := map[string]int{}
		var users []string // in (user_id) order, as they were locked
		for _, i := range orders {
			r := &p.rs[i]
			if r.Rooms > limit || had[r.UserID]+added[r.UserID]+r.Rooms > limit {
				if err := p.markFailed(ctx, r, flashsale.ErrLimitExceeded); err != nil {
					return nil, false, fmt.Errorf("order=%s: %w", r.OrderID, err)
				}
				p.results[i] = flashsale.ErrLimitExceeded
				continue
			}
			if added[r.UserID] == 0 {
				users = append(users, r.UserID)
			}
			added[r.UserID] += r.Rooms
			taken = append(taken, i)
		}
		if len(users) == 0 {
			continue
		}
		var q strings.Builder
		q.WriteString("INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES (?, ?, ?)")
		args := make([]any, 0, 3*len(users))
		want := int64(0)
		for n, u := range users {
			if n > 0 {
				q.WriteString(", (?, ?, ?)")
			}
			args = append(args, sale, u, added[u])
			if _, ok := had[u]; ok {
				want += 2 // updated
			} else {
				want++ // inserted
			}
		}
		q.WriteString(" ON DUPLICATE KEY UPDATE rooms = rooms + VALUES(rooms)")
		res, err := p.tx.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return nil, false, fmt.Errorf("users: sale=%s: %w", sale, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != want {
			return nil, false, err
		}
	}
	return taken, true, nil
}

// lockUsers locks the user_rooms rows of the orders' users in one sale and
// returns their counts (absent users have none).
func (p *placer) lockUsers(ctx context.Context, sale string, orders []int) (map[string]int, error) {
	args := []any{sale}
	for n, i := range orders {
		if n == 0 || p.rs[i].UserID != p.rs[orders[n-1]].UserID {
			args = append(args, p.rs[i].UserID)
		}
	}
	rows, err := p.tx.QueryContext(ctx, "SELECT user_id, rooms FROM user_rooms WHERE sale_id = ? AND user_id IN "+
		placeholders(len(args)-1)+" ORDER BY user_id FOR UPDATE", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	rooms := make(map[string]int, len(args)-1)
	for rows.Next() {
		var u string
		var n int
		if err := rows.Scan(&u, &n); err != nil {
			return nil, err
		}
		rooms[u] = n
	}
	return rooms, rows.Err()
}

// takeUserRooms adds an order's rooms to its user's count if that stays
// within the sale's limit, and reports whether it did.
func (p *placer) takeUserRooms(ctx context.Context, r *flashsale.Reservation) (bool, error) {
	limit := p.terms[r.SaleID].Limit
	if r.Rooms > limit {
		return false, nil
	}
	// Rows affected: 1 inserted, 2 updated, 0 when the IF kept the old value
	// (clientFoundRows is off, so an unchanged row counts 0).
	res, err := p.tx.ExecContext(ctx, `INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE rooms = IF(rooms + VALUES(rooms) <= ?, rooms + VALUES(rooms), rooms)`,
		r.SaleID, r.UserID, r.Rooms, limit)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// markFailed turns an order this transaction inserted as held into a
// failed one, keeping its idempotency key, with the refusal's code as its
// reason.
func (p *placer) markFailed(ctx context.Context, r *flashsale.Reservation, refusal error) error {
	return expectRows(p.tx.ExecContext(ctx, "UPDATE orders SET status = 'failed', failure_reason = ? WHERE id = ? AND status = 'held'",
		flashsale.ErrorCode(refusal), r.OrderID))(1, sqlstore.ErrCounters)
}

// holdNights adds rooms to the held count of nights [first, first+nights)
// of a sale if every one of them has that many available, and reports
// whether it did. It may have changed some of the nights when it reports
// false; the caller rolls back to a savepoint.
func holdNights(ctx context.Context, tx *sql.Tx, sale string, first, nights, rooms int) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE nights SET held = held + ?
		WHERE sale_id = ? AND idx >= ? AND idx < ? AND stock - held - sold >= ?`,
		rooms, sale, first, first+nights, rooms)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == int64(nights), err
}

// Transition moves an order from one status to another if it is still in
// from, adjusting the night and user counters in the same transaction (see
// sqlstore.Transition and moveCounters).
func (s *Store) Transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	return sqlstore.Transition(ctx, s.driver, id, from, to, paymentRef, now, moveCounters)
}

// moveCounters applies a transition to the night and user counters. It
// takes the user's row before the nights, the lock order PlaceOrders and
// ExpireHolds share, so a transition never waits for a night while holding
// what a batch waits for. A retake returns the sale's nights as it locked
// them before taking its rooms, for the outbox to tell whether it took the
// last one; it locks every night of the sale, in idx order, before it
// updates its own, so the lock order holds.
func moveCounters(ctx context.Context, tx *sql.Tx, o *flashsale.Order, from, to flashsale.OrderStatus) (*sqlrows.Stock, error) {
	end := o.FirstNight + o.Nights
	switch {
	case from == flashsale.OrderHeld && to == flashsale.OrderPaid:
		return nil, expectRows(tx.ExecContext(ctx, `UPDATE nights SET held = held - ?, sold = sold + ?
			WHERE sale_id = ? AND idx >= ? AND idx < ? AND held >= ?`,
			o.Rooms, o.Rooms, o.SaleID, o.FirstNight, end, o.Rooms))(o.Nights, sqlstore.ErrCounters)

	case from == flashsale.OrderHeld:
		if err := expectRows(tx.ExecContext(ctx, `UPDATE user_rooms SET rooms = rooms - ?
			WHERE sale_id = ? AND user_id = ? AND rooms >= ?`,
			o.Rooms, o.SaleID, o.UserID, o.Rooms))(1, sqlstore.ErrCounters); err != nil {
			return nil, err
		}
		return nil, expectRows(tx.ExecContext(ctx, `UPDATE nights SET held = held - ?
			WHERE sale_id = ? AND idx >= ? AND idx < ? AND held >= ?`,
			o.Rooms, o.SaleID, o.FirstNight, end, o.Rooms))(o.Nights, sqlstore.ErrCounters)

	default: // expired or cancelled -> paid: take the units again, both guarded.
		return retake(ctx, tx, o)
	}
}

// retake is moveCounters' expired or cancelled -> paid: the units taken
// again, both guarded, the user first (lock order).
func retake(ctx context.Context, tx *sql.Tx, o *flashsale.Order) (*sqlrows.Stock, error) {
	var limit int
	if err := tx.QueryRowContext(ctx, "SELECT per_user_limit FROM sales WHERE id = ?", o.SaleID).Scan(&limit); err != nil {
		return nil, err
	}
	// A stay that is sold out is reported as such even if the limit
	// refused it too.
	var userErr error = flashsale.ErrLimitExceeded
	if o.Rooms <= limit {
		userErr = expectRows(tx.ExecContext(ctx, `INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES (?, ?, ?)
			ON DUPLICATE KEY UPDATE rooms = IF(rooms + VALUES(rooms) <= ?, rooms + VALUES(rooms), rooms)`,
			o.SaleID, o.UserID, o.Rooms, limit))(-1, flashsale.ErrLimitExceeded)
		if userErr != nil && !errors.Is(userErr, flashsale.ErrLimitExceeded) {
			return nil, userErr
		}
	}
	stocks, err := readStocks(ctx, tx, []string{o.SaleID}, func(string) string { return o.Currency }, true)
	if err != nil {
		return nil, fmt.Errorf("lock nights: %w", err)
	}
	if err := expectRows(tx.ExecContext(ctx, `UPDATE nights SET sold = sold + ?
		WHERE sale_id = ? AND idx >= ? AND idx < ? AND stock - held - sold >= ?`,
		o.Rooms, o.SaleID, o.FirstNight, o.FirstNight+o.Nights, o.Rooms))(o.Nights, flashsale.ErrSoldOut); err != nil {
		return nil, err
	}
	return stocks[o.SaleID], userErr
}

// expectRows checks a statement's rows affected: exactly want, or any
// non-zero count when want is -1. Otherwise it returns refusal, which rolls
// the transaction back.
func expectRows(res sql.Result, err error) func(want int, refusal error) error {
	return func(want int, refusal error) error {
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if (want == -1 && n == 0) || (want >= 0 && n != int64(want)) {
			return refusal
		}
		return nil
	}
}
