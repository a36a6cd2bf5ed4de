package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/sqlrows"
	sqlite3 "modernc.org/sqlite/lib"
)

// The statements of the order path. Every counter change is a conditional
// update whose rows-affected count is checked: the database decides, never
// a value read earlier in Go, except in PlaceOrders, whose transaction
// decides on what it read (see there) and keeps the nights' guard.
const (
	// failOrderSQL writes a failed order with the sale's currency, so no
	// row means no such sale. It touches no counter.
	failOrderSQL = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night, nights,
		rooms, amount, currency, hold_expires_at_ms, failure_reason, created_at_ms, updated_at_ms)
		SELECT ?, id, ?, ?, 'failed', ?, ?, ?, ?, currency, ?, ?, ?, ? FROM sales WHERE id = ?`
	// takeUserRoomsSQL adds rooms to a user's count unless that would pass
	// the limit (the insert case, rooms > limit, is checked before).
	takeUserRoomsSQL = `INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES (?, ?, ?)
		ON CONFLICT (sale_id, user_id) DO UPDATE SET rooms = user_rooms.rooms + excluded.rooms
		WHERE user_rooms.rooms + excluded.rooms <= ?`
	releaseUserRoomsSQL = `UPDATE user_rooms SET rooms = rooms - ? WHERE sale_id = ? AND user_id = ?`
	// holdNightsSQL must change exactly `nights` rows, or a night lacked stock.
	holdNightsSQL = `UPDATE nights SET held = held + ?
		WHERE sale_id = ? AND idx >= ? AND idx < ? AND stock - held - sold >= ?`
	sellNightsSQL = `UPDATE nights SET sold = sold + ?
		WHERE sale_id = ? AND idx >= ? AND idx < ? AND stock - held - sold >= ?`
	payNightsSQL     = `UPDATE nights SET held = held - ?, sold = sold + ? WHERE sale_id = ? AND idx >= ? AND idx < ?`
	releaseNightsSQL = `UPDATE nights SET held = held - ? WHERE sale_id = ? AND idx >= ? AND idx < ?`

	// selectOrderSQL reads the columns sqlrows.Order reads, in its order.
	selectOrderSQL = `SELECT o.id, o.sale_id, o.user_id, o.idempotency_key, o.status, o.first_night, o.nights,
		o.rooms, o.amount, o.currency, o.hold_expires_at_ms, o.payment_ref, o.failure_reason, o.created_at_ms,
		o.updated_at_ms, coalesce(n.date, ''), coalesce(n.start_time, '')
		FROM orders o LEFT JOIN nights n ON n.sale_id = o.sale_id AND n.idx = o.first_night `

	// transitionSQL moves one order between statuses (the caller checked
	// that the move is allowed) and returns what its counters need.
	transitionSQL = `UPDATE orders
		SET status = ?, payment_ref = CASE WHEN ? <> '' THEN ? ELSE payment_ref END, updated_at_ms = ?
		WHERE id = ? AND status = ?
		RETURNING sale_id, user_id, first_night, nights, rooms`
	countOrderSQL      = `SELECT count(*) FROM orders WHERE id = ?`
	selectOrderByIDSQL = selectOrderSQL + `WHERE o.id = ?`
)

// writerSQL are the statements of fixed text the writer prepares once
// (statements.fixed): PlaceOrders' reads of a sale's terms and stock and
// its hold of a stay's nights; a payment's, a cancellation's or a hold's
// end (transition), about half of whose cost was SQLite's parser
// (BenchmarkExpireHolds/PerHoldTransition); and a lone notice.
var writerSQL = [...]string{
	readTermsSQL, readStockSQL, holdNightsSQL,
	transitionSQL, countOrderSQL, selectOrderByIDSQL,
	payNightsSQL, releaseNightsSQL, releaseUserRoomsSQL, takeUserRoomsSQL, sellNightsSQL,
	insertNoticeSQL,
}

// The set-based statements of PlaceOrders: %s is a VALUES list (see
// execValues), and each is prepared on the writer for each size of chunk.
const (
	// readOrdersSQL tells, for each (i, order ID, sale, user, key) row,
	// whether the ID is taken, whether the user's key is taken, and the
	// user's rooms so far.
	readOrdersSQL = `SELECT v.column1,
		EXISTS (SELECT 1 FROM orders WHERE id = v.column2),
		EXISTS (SELECT 1 FROM orders WHERE sale_id = v.column3 AND user_id = v.column4 AND idempotency_key = v.column5),
		coalesce((SELECT rooms FROM user_rooms WHERE sale_id = v.column3 AND user_id = v.column4), 0)
		FROM (VALUES %s) AS v`
	insertOrdersSQL = `INSERT INTO orders (id, sale_id, user_id, idempotency_key, status, first_night, nights,
		rooms, amount, currency, hold_expires_at_ms, failure_reason, created_at_ms, updated_at_ms)
		VALUES %s`
	// addUserRoomsSQL adds rooms to users' counts; PlaceOrders checked the limit.
	addUserRoomsSQL = `INSERT INTO user_rooms (sale_id, user_id, rooms) VALUES %s
		ON CONFLICT (sale_id, user_id) DO UPDATE SET rooms = user_rooms.rooms + excluded.rooms`
)

// The widths of the VALUES rows of the set-based statements.
const (
	readOrdersWidth  = 5
	insertOrderWidth = 14
	addUserWidth     = 3
)

// saleTerms is what the order path needs to know about a sale. A sale
// changes (UpdateSale) only on the single writer, so what the batch's
// transaction reads holds until it commits.
type saleTerms struct {
	limit    int
	currency string
}

// PlaceOrders writes a batch of reservations in one transaction; see
// flashsale.Store. It is set-based, as the MySQL and PostgreSQL stores
// are, but simpler: its transaction runs on the one writer connection and
// holds SQLite's write lock from BEGIN IMMEDIATE, so nothing else changes
// the database while it runs and what it reads stays true. It
// reads the state the batch needs once (each sale's terms and nights, and
// in one statement whether each order's ID and key are taken and its
// user's rooms), decides every reservation in Go in batch order, each
// seeing the IDs, keys, user rooms and nights of the ones before it, and
// writes the outcome with a few statements: one multi-row INSERT of the
// orders (held, or failed with the refusal's code), one multi-row upsert
// of the users' added rooms, and one conditional UPDATE per stay (sale,
// first night, nights) with its total. That UPDATE stays the database's
// final guard: one that changes fewer nights than the stay has fails the
// batch, as the books disagree with what was read. Every statement is
// prepared on the writer, the set-based ones for each size of chunk (see
// chunks), so a batch costs no parse.
//
// Besides the documented results, a reservation for an unknown sale gets
// ErrNotFound and one with no rooms or nights ErrInvalid; neither writes a
// row.
func (s *Store) PlaceOrders(ctx context.Context, rs []flashsale.Reservation) ([]error, error) {
	results := make([]error, len(rs))
	if len(rs) == 0 {
		return results, nil
	}
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, fmt.Errorf("place orders: %w", err)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("place orders: %w", err)
	}
	defer tx.Rollback()
	p := placer{tx: tx, rs: rs, results: results, now: time.Now().UnixMilli(),
		sales: make(map[string]*saleTerms), stocks: make(map[string]*sqlrows.Stock), avail: make(map[night]int),
		added: make(map[user]int), stayRooms: make(map[stay]int)}
	// The writer has one connection, so these reuse the statements prepared
	// on it instead of parsing the SQL again.
	p.readTerms, p.readStock = tx.StmtContext(ctx, st.fixedStmt(readTermsSQL)), tx.StmtContext(ctx, st.fixedStmt(readStockSQL))
	p.holdNights = tx.StmtContext(ctx, st.fixedStmt(holdNightsSQL))
	p.stmts = st
	if err := p.run(ctx); err != nil {
		return nil, fmt.Errorf("place orders: %w", err)
	}
	if err := s.writeNotices(ctx, tx, st, sqlrows.PlaceNotices(rs, results, p.stocks, p.now)); err != nil {
		return nil, fmt.Errorf("place orders: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("place orders: commit: %w", err)
	}
	return results, nil
}

// placer carries one PlaceOrders transaction.
type placer struct {
	tx      *sql.Tx
	rs      []flashsale.Reservation
	results []error
	now     int64
	sales   map[string]*saleTerms
	stocks  map[string]*sqlrows.Stock // the outbox's view of each known sale, read before the batch
	avail   map[night]int             // the rooms each night has left as the batch takes them

	// What the batch writes, gathered in batch order.
	orderRows []any        // insertOrdersSQL's arguments
	users     []user       // the users of held orders, in batch order
	added     map[user]int // the rooms each user's held orders add
	stays     []stay       // the stays of held orders, in batch order
	stayRooms map[stay]int // the rooms each stay's held orders take

	readTerms, readStock, holdNights *sql.Stmt // bound to tx
	stmts                            *statements
}

// The keys of what the batch reads and follows: a night, a user's rooms,
// a user's idempotency key, a stay.
type (
	night struct {
		sale string
		idx  int
	}
	user    struct{ sale, id string }
	userKey struct{ sale, user, key string }
	stay    struct {
		sale          string
		first, nights int
	}
)

// orders is the state of the orders the batch has seen so far: what its
// transaction read, plus what the reservations before the current one did.
type orders struct {
	ids   map[string]bool
	keys  map[userKey]bool
	rooms map[user]int
}

func (p *placer) run(ctx context.Context) error {
	live := make([]int, 0, len(p.rs)) // the reservations with a valid stay of a known sale
	for i := range p.rs {
		r := &p.rs[i]
		if r.Rooms < 1 || r.Nights < 1 || r.FirstNight < 0 {
			p.results[i] = flashsale.ErrInvalid
			continue
		}
		terms, err := p.terms(ctx, r.SaleID)
		if err != nil {
			return fmt.Errorf("sale=%s: %w", r.SaleID, err)
		}
		if terms == nil {
			p.results[i] = flashsale.ErrNotFound
			continue
		}
		live = append(live, i)
	}
	seen, err := p.read(ctx, live)
	if err != nil {
		return fmt.Errorf("read orders: %w", err)
	}
	for _, i := range live {
		p.results[i] = p.place(&p.rs[i], seen)
	}
	return p.write(ctx)
}

// read reads the state of the orders of the reservations rs[i] for i in
// live: which IDs and keys are taken, and their users' rooms.
func (p *placer) read(ctx context.Context, live []int) (*orders, error) {
	seen := &orders{ids: make(map[string]bool), keys: make(map[userKey]bool), rooms: make(map[user]int, len(live))}
	for k := range chunks(len(live)) {
		chunk := live[:1<<k]
		live = live[len(chunk):]
		args := make([]any, 0, readOrdersWidth*len(chunk))
		for _, i := range chunk {
			r := &p.rs[i]
			args = append(args, i, r.OrderID, r.SaleID, r.UserID, nullKey(r.IdempotencyKey))
		}
		rows, err := p.tx.StmtContext(ctx, p.stmts.readOrders[k]).QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				i                 int
				idTaken, keyTaken bool
				rooms             int
			)
			if err := rows.Scan(&i, &idTaken, &keyTaken, &rooms); err != nil {
				rows.Close()
				return nil, err
			}
			r := &p.rs[i]
			if idTaken {
				seen.ids[r.OrderID] = true
			}
			if keyTaken {
				seen.keys[userKey{r.SaleID, r.UserID, r.IdempotencyKey}] = true
			}
			seen.rooms[user{r.SaleID, r.UserID}] = rooms
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return seen, nil
}

// place decides r's result from the orders seen before it, which it
// updates, and gathers what the batch writes for it.
func (p *placer) place(r *flashsale.Reservation, seen *orders) error {
	if seen.ids[r.OrderID] {
		return flashsale.ErrDuplicate
	}
	seen.ids[r.OrderID] = true
	key, u := userKey{r.SaleID, r.UserID, r.IdempotencyKey}, user{r.SaleID, r.UserID}
	if r.IdempotencyKey != "" && seen.keys[key] {
		// Recorded as failed without the key, which stays its holder's.
		p.addOrder(r, "", flashsale.ErrKeyConflict)
		return flashsale.ErrKeyConflict
	}
	// Held or refused by a guard, the order keeps its key, so a retry finds it.
	if r.IdempotencyKey != "" {
		seen.keys[key] = true
	}
	var result error
	switch {
	case seen.rooms[u]+r.Rooms > p.sales[r.SaleID].limit:
		result = flashsale.ErrLimitExceeded
	case !p.take(r):
		result = flashsale.ErrSoldOut
	default:
		seen.rooms[u] += r.Rooms
		if p.added[u] == 0 {
			p.users = append(p.users, u)
		}
		p.added[u] += r.Rooms
		st := stay{r.SaleID, r.FirstNight, r.Nights}
		if p.stayRooms[st] == 0 {
			p.stays = append(p.stays, st)
		}
		p.stayRooms[st] += r.Rooms
	}
	p.addOrder(r, r.IdempotencyKey, result)
	return result
}

// take takes r's rooms from every night of its stay if each has them, and
// reports whether it did. A night past the sale's last has none.
func (p *placer) take(r *flashsale.Reservation) bool {
	for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
		if p.avail[night{r.SaleID, i}] < r.Rooms {
			return false
		}
	}
	for i := r.FirstNight; i < r.FirstNight+r.Nights; i++ {
		p.avail[night{r.SaleID, i}] -= r.Rooms
	}
	return true
}

// addOrder gathers r's order row with key (none if empty): held if result
// is nil, else failed with result's code as the reason.
func (p *placer) addOrder(r *flashsale.Reservation, key string, result error) {
	status, reason := flashsale.OrderHeld, ""
	if result != nil {
		status, reason = flashsale.OrderFailed, flashsale.ErrorCode(result)
	}
	p.orderRows = append(p.orderRows, r.OrderID, r.SaleID, r.UserID, nullKey(key), string(status), r.FirstNight,
		r.Nights, r.Rooms, r.Amount, p.sales[r.SaleID].currency, ms(r.HoldExpiresAt), reason, p.now, p.now)
}

// write writes what the batch gathered: its orders, its users' rooms, and
// each stay's total rooms with one conditional UPDATE, the database's final
// guard.
func (p *placer) write(ctx context.Context) error {
	if err := execValues(ctx, p.tx, &p.stmts.insertOrders, insertOrdersSQL, insertOrderWidth, p.orderRows); err != nil {
		return fmt.Errorf("insert orders: %w", err)
	}
	args := make([]any, 0, addUserWidth*len(p.users))
	for _, u := range p.users {
		args = append(args, u.sale, u.id, p.added[u])
	}
	if err := execValues(ctx, p.tx, &p.stmts.addUserRooms, addUserRoomsSQL, addUserWidth, args); err != nil {
		return fmt.Errorf("user rooms: %w", err)
	}
	for _, st := range p.stays {
		rooms := p.stayRooms[st]
		res, err := p.holdNights.ExecContext(ctx, rooms, st.sale, st.first, st.first+st.nights, rooms)
		if err := changed(res, err, st.nights); err != nil {
			return fmt.Errorf("nights: sale=%s first=%d rooms=%d: %w", st.sale, st.first, rooms, err)
		}
	}
	return nil
}

// nullKey stores an empty idempotency key as NULL, which the unique key ignores.
func nullKey(k string) sql.NullString { return sql.NullString{String: k, Valid: k != ""} }

// terms returns a sale's terms, cached for the batch, or nil if the sale
// does not exist. It reads the sale's nights with them.
func (p *placer) terms(ctx context.Context, saleID string) (*saleTerms, error) {
	if t, ok := p.sales[saleID]; ok {
		return t, nil
	}
	t, err := scanTerms(p.readTerms.QueryRowContext(ctx, saleID))
	if errors.Is(err, flashsale.ErrNotFound) {
		t, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if t != nil {
		nights, err := scanNights(p.readStock.QueryContext(ctx, saleID))
		if err != nil {
			return nil, err
		}
		for _, n := range nights {
			p.avail[night{saleID, n.Idx}] = n.Available
		}
		p.stocks[saleID] = sqlrows.NewStock(t.currency, nights)
	}
	p.sales[saleID] = t
	return t, nil
}

const readTermsSQL = `SELECT per_user_limit, currency FROM sales WHERE id = ?`

func readTerms(ctx context.Context, q queryer, saleID string) (*saleTerms, error) {
	return scanTerms(q.QueryRowContext(ctx, readTermsSQL, saleID))
}

func scanTerms(row *sql.Row) (*saleTerms, error) {
	var t saleTerms
	if err := row.Scan(&t.limit, &t.currency); err != nil {
		return nil, errNoRows(err)
	}
	return &t, nil
}

// FailOrder records a reservation the order path gave up on as a failed
// order with reason, taking no stock; see flashsale.Store. Its INSERT takes
// the currency from the sale row, so an unknown sale writes nothing, and the
// constraint that refuses a row says what was taken: the primary key (an
// order with this ID exists: ErrDuplicate) or the idempotency key (the row
// is written again without it).
func (s *Store) FailOrder(ctx context.Context, r flashsale.Reservation, reason string) error {
	reason = sqlrows.FailureReason(reason)
	if err := s.failOrder(ctx, r, reason); err != nil {
		return fmt.Errorf("fail order: order=%s: %w", r.OrderID, err)
	}
	return nil
}

// failOrder writes the failed order and, when it did, its notice, read
// back as committed.
func (s *Store) failOrder(ctx context.Context, r flashsale.Reservation, reason string) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	at := time.Now().UnixMilli()
	err = sqlrows.FailOrder(&r, func(key string) (sqlrows.Inserted, error) {
		res, err := tx.ExecContext(ctx, failOrderSQL, r.OrderID, r.UserID, nullKey(key),
			r.FirstNight, r.Nights, r.Rooms, r.Amount, ms(r.HoldExpiresAt), reason, at, at, r.SaleID)
		switch constraint(err) {
		case 0:
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return sqlrows.IDTaken, nil
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return sqlrows.KeyTaken, nil
		default:
			return 0, err
		}
		if err != nil {
			return 0, err
		}
		return sqlrows.Affected(res)
	})
	if err != nil {
		return err
	}
	o, err := scanOrder(tx.QueryRowContext(ctx, selectOrderSQL+`WHERE o.id = ?`, r.OrderID))
	if err != nil {
		return err
	}
	if err := s.writeNotices(ctx, tx, nil, []flashsale.Notice{flashsale.OrderNotice(o, sqlrows.FromMS(at))}); err != nil {
		return err
	}
	return tx.Commit()
}

// Order returns one order, or ErrNotFound.
func (s *Store) Order(ctx context.Context, id string) (*flashsale.Order, error) {
	o, err := scanOrder(s.queryRow(ctx, selectOrderByIDSQL, id))
	if err != nil {
		return nil, fmt.Errorf("order: order=%s: %w", id, err)
	}
	return o, nil
}

// OrderByKey returns the order a user placed with an idempotency key, or ErrNotFound.
func (s *Store) OrderByKey(ctx context.Context, saleID, userID, key string) (*flashsale.Order, error) {
	o, err := scanOrder(s.queryRow(ctx,
		selectOrderSQL+`WHERE o.sale_id = ? AND o.user_id = ? AND o.idempotency_key = ?`, saleID, userID, key))
	if err != nil {
		return nil, fmt.Errorf("order by key: sale=%s user=%s: %w", saleID, userID, err)
	}
	return o, nil
}

// Transition moves an order between statuses with its counters, in one
// transaction; see flashsale.Store.
func (s *Store) Transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	if !from.CanBecome(to) {
		return nil, flashsale.ErrInvalid
	}
	o, err := s.transition(ctx, id, from, to, paymentRef, now)
	if err != nil {
		return nil, fmt.Errorf("transition: order=%s %s->%s: %w", id, from, to, err)
	}
	return o, nil
}

func (s *Store) transition(ctx context.Context, id string, from, to flashsale.OrderStatus, paymentRef string, now time.Time) (*flashsale.Order, error) {
	st, err := s.prepared(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()

	var (
		saleID, userID       string
		first, nights, rooms int
	)
	err = txQueryRow(ctx, tx, st, transitionSQL,
		string(to), paymentRef, paymentRef, ms(now), id, string(from)).Scan(&saleID, &userID, &first, &nights, &rooms)
	if errors.Is(err, sql.ErrNoRows) {
		var n int
		if err := txQueryRow(ctx, tx, st, countOrderSQL, id).Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, flashsale.ErrNotFound
		}
		return nil, flashsale.ErrStale
	} else if err != nil {
		return nil, err
	}

	// exec runs a counter update that must change exactly want rows;
	// otherwise the transaction fails with refused (nil: the books disagree).
	exec := func(want int, refused error, query string, args ...any) error {
		res, err := txExec(ctx, tx, st, query, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n != int64(want) {
			if refused != nil {
				return refused
			}
			return fmt.Errorf("counter update changed %d rows, want %d", n, want)
		}
		return nil
	}
	last := first + nights
	var stock *sqlrows.Stock // the retake's: the sale's nights before it
	switch {
	case from == flashsale.OrderHeld && to == flashsale.OrderPaid:
		err = exec(nights, nil, payNightsSQL, rooms, rooms, saleID, first, last)
	case from == flashsale.OrderHeld:
		err = exec(nights, nil, releaseNightsSQL, rooms, saleID, first, last)
		if err == nil {
			err = exec(1, nil, releaseUserRoomsSQL, rooms, saleID, userID)
		}
	default: // expired | cancelled -> paid: the retake, guarded like a purchase
		var terms *saleTerms
		if terms, err = readTerms(ctx, tx, saleID); err != nil {
			return nil, err
		}
		if stock, err = readStock(ctx, tx, saleID, terms.currency); err != nil {
			return nil, err
		}
		if rooms > terms.limit {
			return nil, flashsale.ErrLimitExceeded
		}
		err = exec(1, flashsale.ErrLimitExceeded, takeUserRoomsSQL, saleID, userID, rooms, terms.limit)
		if err == nil {
			err = exec(nights, flashsale.ErrSoldOut, sellNightsSQL, rooms, saleID, first, last, rooms)
		}
	}
	if err != nil {
		return nil, err
	}

	o, err := scanOrder(txQueryRow(ctx, tx, st, selectOrderByIDSQL, id))
	if err != nil {
		return nil, err
	}
	if err := s.writeNotices(ctx, tx, st, sqlrows.TransitionNotices(o, from, stock, ms(now))); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return o, nil
}

// ExpireHolds moves up to limit due holds to expired, oldest first, with
// their counters, in one transaction; see flashsale.Store. The single writer
// connection makes the transaction exclusive, so nothing can pay or cancel a
// selected order before it is updated and no order is skipped as locked.
//
// The counter changes are summed in Go per (sale, night) and per (sale,
// user) and applied as one UPDATE ... FROM (VALUES ...) each, so a batch of
// 256 holds on one night costs a handful of statements, not 256
// transactions or 512 updates. Each statement must change exactly as many
// rows as there are distinct keys, and the CHECK constraints refuse a
// counter below zero: books that disagree fail the batch instead of
// drifting.
func (s *Store) ExpireHolds(ctx context.Context, now time.Time, limit int) ([]*flashsale.Order, error) {
	if limit < 1 {
		return nil, nil
	}
	// The reaper asks every 100 ms and almost always nothing is due: answer
	// that from a reader, so the single writer stays free for the group commit.
	var due int
	err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders
		WHERE status = 'held' AND hold_expires_at_ms <= ?)`, now.UnixMilli()).Scan(&due)
	if err != nil {
		return nil, fmt.Errorf("expire holds: %w", err)
	}
	if due == 0 {
		return nil, nil
	}
	orders, err := s.expireHolds(ctx, now, limit)
	if err != nil {
		return nil, fmt.Errorf("expire holds: %w", err)
	}
	return orders, nil
}

func (s *Store) expireHolds(ctx context.Context, now time.Time, limit int) ([]*flashsale.Order, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()

	// The (status, hold_expires_at_ms) index serves the scan.
	rows, err := tx.QueryContext(ctx, selectOrderSQL+`WHERE o.status = ? AND o.hold_expires_at_ms <= ?
		ORDER BY o.hold_expires_at_ms, o.id LIMIT ?`, string(flashsale.OrderHeld), ms(now), limit)
	if err != nil {
		return nil, err
	}
	var orders []*flashsale.Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		orders = append(orders, o)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(orders) == 0 {
		return nil, nil
	}

	type nightKey struct {
		sale string
		idx  int
	}
	type userKey struct{ sale, user string }
	nights := make(map[nightKey]int)
	users := make(map[userKey]int)
	ids := make([]any, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, o.ID)
		for i := o.FirstNight; i < o.FirstNight+o.Nights; i++ {
			nights[nightKey{o.SaleID, i}] += o.Rooms
		}
		users[userKey{o.SaleID, o.UserID}] += o.Rooms
	}

	at := ms(now)
	for chunk := range slices.Chunk(ids, maxRowsPerStatement) {
		args := append([]any{string(flashsale.OrderExpired), at, string(flashsale.OrderHeld)}, chunk...)
		if err := execRows(ctx, tx, len(chunk), `UPDATE orders SET status = ?, updated_at_ms = ?
			WHERE status = ? AND id IN (`+placeholders(len(chunk), 1)+`)`, args...); err != nil {
			return nil, fmt.Errorf("orders: %w", err)
		}
	}
	nightArgs := make([]any, 0, 3*len(nights))
	for k, rooms := range nights {
		nightArgs = append(nightArgs, k.sale, k.idx, rooms)
	}
	if err := execValues(ctx, tx, nil, `UPDATE nights SET held = held - d.column3 FROM (VALUES %s) AS d
		WHERE nights.sale_id = d.column1 AND nights.idx = d.column2`, 3, nightArgs); err != nil {
		return nil, fmt.Errorf("nights: %w", err)
	}
	userArgs := make([]any, 0, 3*len(users))
	for k, rooms := range users {
		userArgs = append(userArgs, k.sale, k.user, rooms)
	}
	if err := execValues(ctx, tx, nil, `UPDATE user_rooms SET rooms = rooms - d.column3 FROM (VALUES %s) AS d
		WHERE user_rooms.sale_id = d.column1 AND user_rooms.user_id = d.column2`, 3, userArgs); err != nil {
		return nil, fmt.Errorf("user rooms: %w", err)
	}
	updated := sqlrows.FromMS(at)
	for _, o := range orders {
		o.Status, o.UpdatedAt = flashsale.OrderExpired, updated
	}
	if err := s.writeNotices(ctx, tx, nil, sqlrows.ExpireNotices(orders, at)); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return orders, nil
}

// maxRowsPerStatement bounds the rows one statement carries, keeping its
// bound parameters (at most 14 per row, an order's) far below
// SQLITE_MAX_VARIABLE_NUMBER (32766 in modernc.org/sqlite).
const maxRowsPerStatement = 1 << (sizes - 1)

// sizes is how many sizes of chunk (see chunks) there are: 1 to 512 rows.
const sizes = 10

// chunks yields the chunks n rows go in as the k of their 1<<k rows,
// largest first: powers of two up to maxRowsPerStatement, so that 300 rows
// are 256, 32, 8 and 4. The statements of PlaceOrders are prepared once
// for each size, so a batch of any size costs no parse.
func chunks(n int) iter.Seq[int] {
	return func(yield func(int) bool) {
		for n > 0 {
			k := bits.Len(uint(min(n, maxRowsPerStatement))) - 1
			if !yield(k) {
				return
			}
			n -= 1 << k
		}
	}
}

// execValues runs query, whose %s is replaced by a VALUES list of rows of
// width arguments taken from args, in chunks (see chunks). prepared, when
// set, holds query prepared on tx's connection for each size of chunk.
// Every row must change exactly one row, so each chunk must change as many
// rows as it carries.
func execValues(ctx context.Context, tx *sql.Tx, prepared *[sizes]*sql.Stmt, query string, width int, args []any) error {
	for k := range chunks(len(args) / width) {
		chunk := args[:width<<k]
		args = args[len(chunk):]
		var (
			res sql.Result
			err error
		)
		if prepared != nil {
			res, err = tx.StmtContext(ctx, prepared[k]).ExecContext(ctx, chunk...)
		} else {
			res, err = tx.ExecContext(ctx, fmt.Sprintf(query, placeholders(1<<k, width)), chunk...)
		}
		if err := changed(res, err, 1<<k); err != nil {
			return err
		}
	}
	return nil
}

// execRows runs a statement that must change exactly want rows.
func execRows(ctx context.Context, tx *sql.Tx, want int, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	return changed(res, err, want)
}

// changed checks that a statement that ran with err changed exactly want rows.
func changed(res sql.Result, err error, want int) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(want) {
		return fmt.Errorf("changed %d rows, want %d", n, want)
	}
	return nil
}

// placeholders returns n comma-separated groups of width question marks:
// "?, ?" for (2, 1), "(?, ?), (?, ?)" for (2, 2) and up.
func placeholders(n, width int) string {
	one := "?"
	if width > 1 {
		one = "(" + strings.Repeat("?, ", width-1) + "?)"
	}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	return b.String()
}

// Snapshot returns a sale, its counters and all of its orders, read in one
// transaction so the counters and the orders agree.
func (s *Store) Snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	snap, err := s.snapshot(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("snapshot: sale=%s: %w", saleID, err)
	}
	return snap, nil
}

func (s *Store) snapshot(ctx context.Context, saleID string) (*flashsale.StockSnapshot, error) {
	tx, err := s.read.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	snap := &flashsale.StockSnapshot{}
	if snap.Sale, err = findSale(ctx, tx, saleID); err != nil {
		return nil, err
	}
	if snap.Nights, err = nightStocks(ctx, tx, saleID); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, user_id, coalesce(idempotency_key, ''), status, first_night,
		nights, rooms, amount, hold_expires_at_ms FROM orders WHERE sale_id = ? ORDER BY id`, saleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		r := flashsale.Reservation{SaleID: saleID}
		var st string
		var hold int64
		if err := rows.Scan(&r.OrderID, &r.UserID, &r.IdempotencyKey, &st, &r.FirstNight, &r.Nights, &r.Rooms,
			&r.Amount, &hold); err != nil {
			return nil, err
		}
		r.HoldExpiresAt = sqlrows.FromMS(hold)
		r.Active = flashsale.OrderStatus(st).Active()
		snap.Reservations = append(snap.Reservations, r)
	}
	return snap, rows.Err()
}

// scanOrder reads a row of selectOrderSQL; no row is ErrNotFound.
func scanOrder(row sqlrows.Scanner) (*flashsale.Order, error) {
	o, err := sqlrows.Order(row)
	if err != nil {
		return nil, errNoRows(err)
	}
	return o, nil
}

// SaleOrders returns up to q.Limit of a sale's orders, newest first, or
// ErrNotFound for an unknown sale; orders_sale_id (sale_id, id) walks them.
func (s *Store) SaleOrders(ctx context.Context, saleID string, q flashsale.OrderQuery) ([]*flashsale.Order, error) {
	orders, err := s.saleOrders(ctx, saleID, q)
	if err != nil {
		return nil, fmt.Errorf("sale orders: sale=%s: %w", saleID, err)
	}
	return orders, nil
}

func (s *Store) saleOrders(ctx context.Context, saleID string, q flashsale.OrderQuery) ([]*flashsale.Order, error) {
	f := sqlrows.NewFilter(false)
	if err := f.Orders(saleID, q); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, selectOrderSQL+f.Where()+` ORDER BY o.id DESC LIMIT `+
		f.Arg(sqlrows.PageLimit(q.Limit)), f.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	orders, err := sqlrows.Orders(rows)
	if err == nil && len(orders) == 0 {
		err = saleExists(ctx, s.read, saleID)
	}
	return orders, err
}
