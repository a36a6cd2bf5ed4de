package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	"github.com/flashsale/flashsale/internal/sqlstore"
)

// The statements of one reservation. Each either changes its row(s) or
// reports zero rows; none raises an error in the normal course, because an
// error would abort the rest of the pipeline.
const (
	sqlInsertHeld = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
		nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, created_at_ms, updated_at_ms)
		VALUES ($1, $2, $3, $4, 'held', $5, $6, $7, $8, $9, $10, '', $11, $11)
		ON CONFLICT DO NOTHING`
	sqlAddUserRooms = `INSERT INTO user_rooms (sale_id, user_id, rooms) SELECT $1::text, $2::text, $3::int WHERE $3::int <= $4::int
		ON CONFLICT (sale_id, user_id) DO UPDATE SET rooms = user_rooms.rooms + EXCLUDED.rooms
		WHERE user_rooms.rooms + EXCLUDED.rooms <= $4::int`
	sqlHoldNights = `UPDATE nights SET held = held + $1
		WHERE sale_id = $2 AND idx >= $3 AND idx < $4 AND stock - held - sold >= $1`
	// sqlInsertFailed writes a refused order. Without a key it cannot clash
	// on the key, so zero rows means the ID exists: a redelivery.
	sqlInsertFailed = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
		nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, failure_reason, created_at_ms, updated_at_ms)
		VALUES ($1, $2, $3, $4, 'failed', $5, $6, $7, $8, $9, $10, '', $12, $11, $11)
		ON CONFLICT (id) DO NOTHING`
)

// sqlFailOrder writes a failed order with the sale's currency, touching no
// counter. No row means no such sale, or a unique key (the ID, the
// idempotency key) refused it; like the statements of PlaceOrders it does
// not raise an error for that.
const sqlFailOrder = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
	nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, failure_reason, created_at_ms, updated_at_ms)
	SELECT $1::text, id, $2::text, $3::text, 'failed', $4::int, $5::int, $6::int, $7::bigint, currency,
		$8::bigint, '', $9::text, $10::bigint, $10::bigint
	FROM sales WHERE id = $11
	ON CONFLICT DO NOTHING`

// FailOrder records a reservation the order path gave up on as a failed
// order with reason, taking no stock; see flashsale.Store and
// sqlstore.FailOrder. When its INSERT writes nothing, one read tells why
// (see insertFailed).
func (s *Store) FailOrder(ctx context.Context, r flashsale.Reservation, reason string) error {
	return sqlstore.FailOrder(ctx, s.driver, r, reason, insertFailed)
}

// insertFailed writes r as a failed order and reports what happened. When
// the INSERT writes nothing, one read tells why: no sale (NoSale), an
// order with the ID (IDTaken), or else the idempotency key (KeyTaken, and
// sqlrows.FailOrder writes the row again without it). ON CONFLICT waits
// for a concurrent insert of the same ID to commit, so the read sees it.
func insertFailed(ctx context.Context, tx pgx.Tx, r *flashsale.Reservation, key, reason string, at int64) (sqlrows.Inserted, error) {
	tag, err := tx.Exec(ctx, sqlFailOrder, r.OrderID, r.UserID, nullKey(key), r.FirstNight, r.Nights,
		r.Rooms, r.Amount, ms(r.HoldExpiresAt), reason, at, r.SaleID)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() == 1 {
		return sqlrows.Written, nil
	}
	var sale, order bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM sales WHERE id = $1),
		EXISTS(SELECT 1 FROM orders WHERE id = $2)`, r.SaleID, r.OrderID).Scan(&sale, &order); err != nil {
		return 0, err
	}
	switch {
	case !sale:
		return sqlrows.NoSale, nil
	case order:
		return sqlrows.IDTaken, nil
	}
	return sqlrows.KeyTaken, nil
}

// head is what a batch must do first about the previous window.
type head int

const (
	headNone    head = iota
	headRelease      // the window stood: release its savepoint
	headDiscard      // the window is undone: roll back to its savepoint
	headRefuse       // the window's first reservation was refused: roll back and write it as failed
)

// PlaceOrders writes a batch of reservations in one transaction, pipelined.
// It first tries the whole batch at once with set-based statements (see
// together), which is how a flash sale's batches nearly always go: one
// round trip and one new version of each night row, whatever the batch's
// size. If any order is refused, it places the batch exactly, reservation
// by reservation. Each reservation is then three statements that report
// rows rather than raise errors:
//
//  1. insert the order as held, ON CONFLICT DO NOTHING: no row means the ID
//     (ErrDuplicate) or the idempotency key (ErrKeyConflict) is taken;
//  2. add the rooms to the user's count with a conditional upsert: no row
//     means ErrLimitExceeded;
//  3. take the rooms from every night with a conditional update: fewer rows
//     than nights means ErrSoldOut.
//
// The reservations go out in windows, each behind one savepoint, all in one
// round trip. If every reservation in the window succeeded, the window
// stands. If one was refused, the window rolls back to its savepoint and the
// reservations before the refused one are sent again as a window of their
// own; a refused reservation at the head of a window is then written as
// failed (keeping its key, so a retry finds it; a key clash goes in without
// the key) at the start of the next batch. Windows double after a success
// and shrink to the good prefix after a refusal, so a batch that all goes
// through costs one round trip, and a sold-out tail costs one per
// reservation. One savepoint per window rather than per reservation keeps
// the transaction's subtransactions few: past 64, every snapshot taken on
// the server while it runs has to consult pg_subtrans.
//
// A reservation with no rooms, no nights or a negative first night, which
// the stock engine never produces, is ErrInvalid, and one for a sale that
// does not exist is ErrNotFound; both write nothing (no row, no key bound,
// the ID stays free), so one bad message cannot fail the batch and a
// redelivery gets the same answer.
//
// Lock order: the batch first locks every night of its sales, sorted by
// (sale_id, idx), then orders and user_rooms rows as it goes. Transition
// locks one order, then its nights in idx order, then the user's row. So two
// batches on a sale run one after the other instead of deadlocking on the
// nights they share in different orders, and a batch never waits for a night
// while holding a user row that a Transition waits for. What remains (say a
// redelivered order that a Transition holds) is rare, and
// sqlstore.PlaceOrders reruns the transaction.
func (s *Store) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	return sqlstore.PlaceOrders(ctx, s.driver, rs, func(ctx context.Context, tx pgx.Tx, results []error) ([]flashsale.Notice, error) {
		terms, stocks, err := lockSales(ctx, tx, rs)
		if err != nil {
			return nil, err
		}
		p := placer{tx: tx, rs: rs, results: results, terms: terms, nowMS: time.Now().UnixMilli()}
		if err := p.run(ctx); err != nil {
			return nil, err
		}
		return sqlrows.PlaceNotices(rs, results, stocks, p.nowMS), nil
	})
}

// lockSales locks the nights of every sale in the batch, in primary key
// order, and reads each sale's limit and currency, in one round trip. The
// nights as it locked them, before the batch takes any, are the outbox's
// stocks (see sqlrows.PlaceNotices).
func lockSales(ctx context.Context, tx pgx.Tx, rs []flashsale.Reservation) (map[string]sqlstore.SaleTerms, map[string]*sqlrows.Stock, error) {
	terms := make(map[string]sqlstore.SaleTerms, 1)
	var ids []string
	for _, r := range rs {
		if _, ok := terms[r.SaleID]; !ok {
			terms[r.SaleID] = sqlstore.SaleTerms{}
			ids = append(ids, r.SaleID)
		}
	}
	b := &pgx.Batch{}
	b.Queue(sqlLockStocks, ids)
	b.Queue(`SELECT id, per_user_limit, currency FROM sales WHERE id = ANY($1)`, ids)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	nights, err := scanStocks(br.Query())
	if err != nil {
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	stocks := make(map[string]*sqlrows.Stock, len(ids))
	for rows.Next() {
		var id string
		t := sqlstore.SaleTerms{Known: true}
		if err := rows.Scan(&id, &t.Limit, &t.Currency); err != nil {
			return nil, nil, err
		}
		terms[id] = t
		stocks[id] = sqlrows.NewStock(t.Currency, nights[id])
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return terms, stocks, br.Close()
}

// placer carries one PlaceOrders transaction through its windows.
type placer struct {
	tx      pgx.Tx
	rs      []flashsale.Reservation
	results []error
	terms   map[string]sqlstore.SaleTerms
	nowMS   int64
}

func (p *placer) run(ctx context.Context) error {
	if ok, err := p.together(ctx); err != nil || ok {
		return err
	}
	return p.windows(ctx)
}

// Set-based statements for together: every order of the batch in one
// INSERT, every user's total of one sale in one upsert. Like the
// per-reservation statements they report rows instead of raising errors.
const (
	sqlInsertHeldAll = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night,
		nights, rooms, amount, currency, hold_expires_at_ms, payment_ref, created_at_ms, updated_at_ms)
		SELECT id, sale_id, user_id, NULLIF(key, ''), 'held', first, nights, rooms, amount, currency, hold, '', $11, $11
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::int[],
			$8::bigint[], $9::text[], $10::bigint[])
			AS t(id, sale_id, user_id, key, first, nights, rooms, amount, currency, hold)
		ON CONFLICT DO NOTHING`
	sqlAddUsersRooms = `INSERT INTO user_rooms (sale_id, user_id, rooms)
		SELECT $1::text, u, r FROM unnest($2::text[], $3::int[]) AS t(u, r) WHERE r <= $4::int
		ON CONFLICT (sale_id, user_id) DO UPDATE SET rooms = user_rooms.rooms + EXCLUDED.rooms
		WHERE user_rooms.rooms + EXCLUDED.rooms <= $4::int`
)

// together places the batch the way a flash sale's batches nearly always
// go (every order new, every user within the limit, every night with room)
// in one round trip, whatever its size: one INSERT of all the orders, one
// upsert of the users' totals per sale, one conditional UPDATE per stay,
// behind a savepoint. If any of them did less than all of its rows (an ID
// or key taken, a user over the limit, a night short), which one is to
// blame depends on batch order, so together rolls back to the savepoint
// and reports false, results untouched, for the windows to place the
// batch exactly. It also leaves the night rows one new version per stay
// rather than one per order.
func (p *placer) together(ctx context.Context) (bool, error) {
	type stay struct {
		sale          string
		first, nights int
	}
	type user struct{ sale, id string }
	var (
		ids, sales, users, keys, currencies []string
		firsts, nightss, roomss             []int32
		amounts, holds                      []int64
		stays                               = map[stay]int{}
		totals                              = map[user]int{}
		saleUsers                           = map[string][]string{}
		stayOrder                           []stay
	)
	for i := range p.rs {
		if p.refuse(i) != nil {
			continue
		}
		r := &p.rs[i]
		ids, sales, users, keys = append(ids, r.OrderID), append(sales, r.SaleID), append(users, r.UserID), append(keys, r.IdempotencyKey)
		currencies = append(currencies, p.terms[r.SaleID].Currency)
		firsts, nightss, roomss = append(firsts, int32(r.FirstNight)), append(nightss, int32(r.Nights)), append(roomss, int32(r.Rooms))
		amounts, holds = append(amounts, r.Amount), append(holds, ms(r.HoldExpiresAt))
		st := stay{r.SaleID, r.FirstNight, r.Nights}
		if _, ok := stays[st]; !ok {
			stayOrder = append(stayOrder, st)
		}
		stays[st] += r.Rooms
		u := user{r.SaleID, r.UserID}
		if _, ok := totals[u]; !ok {
			saleUsers[r.SaleID] = append(saleUsers[r.SaleID], r.UserID)
		}
		totals[u] += r.Rooms
	}
	if len(ids) == 0 {
		for i := range p.rs {
			p.results[i] = p.refuse(i)
		}
		return true, nil
	}

	b := &pgx.Batch{}
	b.Queue("SAVEPOINT together")
	b.Queue(sqlInsertHeldAll, ids, sales, users, keys, firsts, nightss, roomss, amounts, currencies, holds, p.nowMS)
	saleOrder := slices.Sorted(maps.Keys(saleUsers))
	for _, sale := range saleOrder {
		us := saleUsers[sale]
		rooms := make([]int32, len(us))
		for k, u := range us {
			rooms[k] = int32(totals[user{sale, u}])
		}
		b.Queue(sqlAddUsersRooms, sale, us, rooms, p.terms[sale].Limit)
	}
	for _, st := range stayOrder {
		b.Queue(sqlHoldNights, stays[st], st.sale, st.first, st.first+st.nights)
	}
	br := p.tx.SendBatch(ctx, b)
	ok, err := func() (bool, error) {
		if _, err := br.Exec(); err != nil { // SAVEPOINT
			return false, err
		}
		tag, err := br.Exec()
		if err != nil {
			return false, fmt.Errorf("insert orders: %w", err)
		}
		ok := tag.RowsAffected() == int64(len(ids))
		for _, sale := range saleOrder {
			tag, err := br.Exec()
			if err != nil {
				return false, fmt.Errorf("users: sale=%s: %w", sale, err)
			}
			ok = ok && tag.RowsAffected() == int64(len(saleUsers[sale]))
		}
		for _, st := range stayOrder {
			tag, err := br.Exec()
			if err != nil {
				return false, fmt.Errorf("nights: sale=%s: %w", st.sale, err)
			}
			ok = ok && tag.RowsAffected() == int64(st.nights)
		}
		return ok, nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if !ok {
		_, err := p.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT together")
		return false, err
	}
	for i := range p.rs {
		p.results[i] = p.refuse(i)
	}
	return true, nil
}

// windows places the batch reservation by reservation, in pipelined
// windows (see PlaceOrders).
func (p *placer) windows(ctx context.Context) error {
	var (
		pos     = 0         // the first reservation not yet settled
		window  = len(p.rs) // how many to send next
		todo    = headNone  // what the next batch starts with
		refused int         // the reservation headRefuse writes
		reason  error       // and why: ErrSoldOut, ErrLimitExceeded, or nil for a unique clash
	)
	for pos < len(p.rs) || todo == headRefuse {
		for pos < len(p.rs) && p.refuse(pos) != nil {
			p.results[pos] = p.refuse(pos)
			pos++
		}
		end := pos
		for end < min(pos+window, len(p.rs)) && p.refuse(end) == nil {
			end++
		}

		b := &pgx.Batch{}
		switch todo {
		case headRelease:
			b.Queue("RELEASE SAVEPOINT w")
		case headDiscard:
			b.Queue("ROLLBACK TO SAVEPOINT w")
			b.Queue("RELEASE SAVEPOINT w")
		case headRefuse:
			r := &p.rs[refused]
			key, why := r.IdempotencyKey, flashsale.ErrorCode(reason)
			if reason == nil {
				key, why = "", flashsale.ErrorCode(flashsale.ErrKeyConflict)
			}
			b.Queue("ROLLBACK TO SAVEPOINT w")
			b.Queue(sqlInsertFailed, r.OrderID, r.SaleID, r.UserID, nullKey(key), r.FirstNight, r.Nights,
				r.Rooms, r.Amount, p.terms[r.SaleID].Currency, ms(r.HoldExpiresAt), p.nowMS, why)
			b.Queue("RELEASE SAVEPOINT w")
		}
		if end > pos {
			b.Queue("SAVEPOINT w")
			for i := pos; i < end; i++ {
				r := &p.rs[i]
				t := p.terms[r.SaleID]
				b.Queue(sqlInsertHeld, r.OrderID, r.SaleID, r.UserID, nullKey(r.IdempotencyKey), r.FirstNight,
					r.Nights, r.Rooms, r.Amount, t.Currency, ms(r.HoldExpiresAt), p.nowMS)
				b.Queue(sqlAddUserRooms, r.SaleID, r.UserID, r.Rooms, t.Limit)
				b.Queue(sqlHoldNights, r.Rooms, r.SaleID, r.FirstNight, r.FirstNight+r.Nights)
			}
		}
		if b.Len() == 0 {
			continue
		}

		br := p.tx.SendBatch(ctx, b)
		err := p.readHead(br, todo, refused, reason)
		todo = headNone
		if err == nil && end > pos {
			var failed int
			failed, reason, err = p.readWindow(br, pos, end)
			switch {
			case err != nil:
			case failed < 0: // the whole window stands
				pos, window, todo = end, 2*(end-pos), headRelease
			case failed == pos: // its first was refused
				pos, window, todo, refused = failed+1, 1, headRefuse, failed
			default: // undo it and send the good prefix again on its own
				window, todo = failed-pos, headDiscard
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readHead reads the results of the statements a batch started with.
func (p *placer) readHead(br pgx.BatchResults, todo head, refused int, reason error) error {
	switch todo {
	case headRelease:
		_, err := br.Exec()
		return err
	case headDiscard:
		if _, err := br.Exec(); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	case headRefuse:
		if _, err := br.Exec(); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("order=%s: %w", p.rs[refused].OrderID, err)
		}
		switch {
		case reason != nil && tag.RowsAffected() == 0:
			return fmt.Errorf("order=%s: the order appeared while being refused", p.rs[refused].OrderID)
		case reason != nil:
			p.results[refused] = reason
		case tag.RowsAffected() == 0:
			p.results[refused] = flashsale.ErrDuplicate
		default:
			p.results[refused] = flashsale.ErrKeyConflict
		}
		_, err = br.Exec()
		return err
	}
	return nil
}

// readWindow reads a window's results. It returns the index of the first
// refused reservation and why (nil for a unique clash), or -1 if none was.
func (p *placer) readWindow(br pgx.BatchResults, pos, end int) (int, error, error) {
	if _, err := br.Exec(); err != nil { // SAVEPOINT
		return 0, nil, err
	}
	for i := pos; i < end; i++ {
		r := &p.rs[i]
		var rows [3]int64
		for k := range rows {
			tag, err := br.Exec()
			if err != nil {
				return 0, nil, fmt.Errorf("order=%s: %w", r.OrderID, err)
			}
			rows[k] = tag.RowsAffected()
		}
		switch {
		case rows[0] == 0:
			return i, nil, nil
		case rows[1] == 0:
			return i, flashsale.ErrLimitExceeded, nil
		case rows[2] != int64(r.Nights):
			return i, flashsale.ErrSoldOut, nil
		}
		p.results[i] = nil
	}
	return -1, nil, nil
}

// refuse returns why reservation i is refused before anything is written,
// or nil (see sqlstore.Refuse).
func (p *placer) refuse(i int) error { return sqlstore.Refuse(&p.rs[i], p.terms) }

// Transition moves an order from one status to another if it is still in
// from, adjusting the night and user counters in the same transaction (see
// sqlstore.Transition and moveCounters).
func (s *Store) Transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	return sqlstore.Transition(ctx, s.driver, id, from, to, paymentRef, now, moveCounters)
}

// moveCounters applies a transition to the night and user counters. A
// refusal returns an error, which rolls the whole transaction back,
// status change included. A retake returns the sale's nights as it locked
// them before taking its rooms, for the outbox to tell whether it took the
// last one; it locks every night of the sale, in idx order, before it
// updates its own, so the lock order (nights in idx order, then the user)
// holds.
func moveCounters(ctx context.Context, tx pgx.Tx, o *flashsale.Order, from, to flashsale.OrderStatus) (*sqlrows.Stock, error) {
	end := o.FirstNight + o.Nights
	switch {
	case from == flashsale.OrderHeld && to == flashsale.OrderPaid:
		return nil, expectRows(tx.Exec(ctx, `UPDATE nights SET held = held - $1, sold = sold + $1
			WHERE sale_id = $2 AND idx >= $3 AND idx < $4 AND held >= $1`,
			o.Rooms, o.SaleID, o.FirstNight, end))(o.Nights, sqlstore.ErrCounters)

	case from == flashsale.OrderHeld:
		if err := expectRows(tx.Exec(ctx, `UPDATE nights SET held = held - $1
			WHERE sale_id = $2 AND idx >= $3 AND idx < $4 AND held >= $1`,
			o.Rooms, o.SaleID, o.FirstNight, end))(o.Nights, sqlstore.ErrCounters); err != nil {
			return nil, err
		}
		return nil, expectRows(tx.Exec(ctx, `UPDATE user_rooms SET rooms = rooms - $1
			WHERE sale_id = $2 AND user_id = $3 AND rooms >= $1`,
			o.Rooms, o.SaleID, o.UserID))(1, sqlstore.ErrCounters)

	default: // expired or cancelled -> paid: take the units again, both guarded.
		nights, err := scanStocks(tx.Query(ctx, sqlLockStocks, []string{o.SaleID}))
		if err != nil {
			return nil, fmt.Errorf("lock nights: %w", err)
		}
		if err := expectRows(tx.Exec(ctx, `UPDATE nights SET sold = sold + $1
			WHERE sale_id = $2 AND idx >= $3 AND idx < $4 AND stock - held - sold >= $1`,
			o.Rooms, o.SaleID, o.FirstNight, end))(o.Nights, flashsale.ErrSoldOut); err != nil {
			return nil, err
		}
		return sqlrows.NewStock(o.Currency, nights[o.SaleID]), expectRows(tx.Exec(ctx, `INSERT INTO user_rooms (sale_id, user_id, rooms)
			SELECT $1::text, $2::text, $3::int FROM sales WHERE id = $1::text AND $3::int <= per_user_limit
			ON CONFLICT (sale_id, user_id) DO UPDATE SET rooms = user_rooms.rooms + EXCLUDED.rooms
			WHERE user_rooms.rooms + EXCLUDED.rooms <= (SELECT per_user_limit FROM sales WHERE id = $1::text)`,
			o.SaleID, o.UserID, o.Rooms))(1, flashsale.ErrLimitExceeded)
	}
}

// expectRows checks that a statement affected exactly want rows; otherwise
// it returns refusal.
func expectRows(tag pgconn.CommandTag, err error) func(want int, refusal error) error {
	return func(want int, refusal error) error {
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(want) {
			return refusal
		}
		return nil
	}
}
