package main

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/mysql"
	"github.com/flashsale/flashsale/postgres"
)

// runAuditCmd runs `flashsale audit args...` in-process with env, as the
// binary would, and returns what it printed and the error run returned.
func runAuditCmd(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, logs bytes.Buffer
	err := run(t.Context(), append([]string{"audit"}, args...), func(k string) string { return env[k] }, &out, &logs)
	t.Logf("flashsale audit %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), logs.String())
	return out.String(), err
}

// mustExecSQL opens the database dbURL names and returns a function that
// runs one statement with ? placeholders, behind the service's back.
func mustExecSQL(tb testing.TB, dbURL string) func(query string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	if strings.HasPrefix(dbURL, "mysql://") {
		s, err := mysql.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return func(query string, args ...any) {
			tb.Helper()
			if _, err := s.DB().ExecContext(ctx, query, args...); err != nil {
				tb.Fatalf("%s: %v", query, err)
			}
		}
	}
	s, err := postgres.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return func(query string, args ...any) {
		tb.Helper()
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", "$"+strconv.Itoa(i), 1)
		}
		if _, err := s.Pool().Exec(ctx, query, args...); err != nil {
			tb.Fatalf("%s: %v", query, err)
		}
	}
}

// wantLines checks that out has a line containing every part of each want.
func wantLines(t *testing.T, out string, want ...[]string) {
	t.Helper()
next:
	for _, parts := range want {
		for _, line := range strings.Split(out, "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				continue next
			}
		}
		t.Errorf("no line with %q in:\n%s", parts, out)
	}
}

// TestAudit runs the distributed shape for real: `flashsale audit` proves a
// healthy sale balances, names each wrong that Redis and the database are
// given behind the service's back, and --repair fixes what can be fixed
// order by order; the rebuild it leaves to the serving instance then
// settles the units, and only the database's disagreement with itself
// (for an operator) remains.
func TestAudit(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("distributed audit skipped in -short")
	}
	for name, db := range distributedDatabases(t) {
		t.Run(name, func(t *testing.T) { testAudit(t, db(t)) })
	}
}

func testAudit(t *testing.T, dbURL string) {
	ctx := context.Background()
	// The instance repairs nothing while the test makes its wrongs: the
	// audit under test is the command's.
	c, engine := startClusterEngine(t, 1, dbURL, "FLASHSALE_PHANTOM_INTERVAL=-1s", "FLASHSALE_AUDIT_INTERVAL=-1s")
	execSQL := mustExecSQL(t, dbURL)
	readOrders := mustOpenOrders(t, dbURL)
	env := map[string]string{
		"FLASHSALE_DATABASE_URL": dbURL,
		"FLASHSALE_REDIS_URL":    testenv.URL(t, testenv.Redis),
		"FLASHSALE_REDIS_PREFIX": c.prefix,
		"FLASHSALE_AMQP_URL":     testenv.URL(t, testenv.AMQP),
		"FLASHSALE_QUEUE_NAME":   c.queue,
		"FLASHSALE_DATA_DIR":     t.TempDir(),
		"FLASHSALE_LOG_LEVEL":    "warn",
	}
	cl := c.clients[0]
	id := cl.createSale(t, saleJSON([]int{10, 10, 10}, 2, false))
	d0, d1, d2 := testenv.Night(0), testenv.Night(1), testenv.Night(2)
	orders := map[string]string{}
	for user, body := range map[string]map[string]any{
		"audit-0": {}, "audit-2": {}, // night 0
		"audit-1": {"check_in": d1},                              // night 1
		"audit-3": {"check_in": d2}, "audit-5": {"check_in": d2}, // night 2
		"audit-4": {"nights": 3},
	} {
		status, o, err := cl.purchase(ctx, id, user, false, body, "")
		if err != nil || status != 202 {
			t.Fatalf("purchase %s: %d %v %+v", user, status, err, o.Error)
		}
		orders[user] = o.OrderID
	}
	if !testenv.Poll(30*time.Second, 50*time.Millisecond, func() bool { return len(readOrders(id)) >= len(orders) }) {
		t.Fatalf("%d of %d orders in the database", len(readOrders(id)), len(orders))
	}

	out, err := runAuditCmd(t, env, "--sale", id)
	if err != nil {
		t.Fatalf("audit of a healthy sale: %v", err)
	}
	wantLines(t, out, []string{"sale " + id + ": balanced"},
		[]string{"night " + d0 + ": stock 10, held 3, sold 0, in flight 0, engine available 7, drift +0"})
	if _, err := runAuditCmd(t, env); err != nil {
		t.Fatalf("audit of every current sale: %v", err)
	}

	// Wrongs, night by night.
	o, err := goredis.ParseURL(testenv.URL(t, testenv.Redis))
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(o)
	defer rc.Close()
	base := c.prefix + "{" + id + "}:"
	// Night 0: audit-0 released in Redis, its room given back (the engine
	// would sell it again); audit-2 expired in the database, counters and
	// all, without the engine hearing of it (the engine undersells it).
	if err := engine.Release(ctx, id, orders["audit-0"]); err != nil {
		t.Fatal(err)
	}
	execSQL(`UPDATE orders SET status = 'expired' WHERE id = ?`, orders["audit-2"])
	execSQL(`UPDATE nights SET held = held - 1 WHERE sale_id = ? AND idx = 0`, id)
	execSQL(`UPDATE user_rooms SET rooms = rooms - 1 WHERE sale_id = ? AND user_id = 'audit-2'`, id)
	// Night 1: audit-1's record says released, its room still counted.
	rec, err := rc.HGet(ctx, base+"res", orders["audit-1"]).Result()
	if err != nil || rec[0] != '1' {
		t.Fatalf("record of audit-1: %q %v", rec, err)
	}
	if err := rc.HSet(ctx, base+"res", orders["audit-1"], "0"+rec[1:]).Err(); err != nil {
		t.Fatal(err)
	}
	// Night 2: three phantom rooms; audit-3 cancelled in the database
	// without its counters; and a reservation the engine took two minutes
	// ago whose order never reached the queue, out of the outbox.
	if err := rc.HIncrBy(ctx, base+"stock", "2", 3).Err(); err != nil {
		t.Fatal(err)
	}
	execSQL(`UPDATE orders SET status = 'cancelled' WHERE id = ?`, orders["audit-3"])
	stranded := &flashsale.Reservation{
		OrderID: ulid.Make().String(), SaleID: id, UserID: "audit-stranded", FirstNight: 2, Nights: 1, Rooms: 1,
		Amount: 39900, HoldExpiresAt: time.Now().Add(-2*time.Minute + 300*time.Second).UTC().Truncate(time.Millisecond),
	}
	if _, err := engine.Reserve(ctx, stranded); err != nil {
		t.Fatal(err)
	}
	if err := engine.Confirm(ctx, id, stranded.OrderID); err != nil {
		t.Fatal(err)
	}
	var (
		score float64
		zerr  error
	)
	if !testenv.Poll(5*time.Second, 10*time.Millisecond, func() bool {
		score, zerr = rc.ZScore(ctx, base+"unconfirmed", stranded.OrderID).Result()
		return zerr == goredis.Nil
	}) {
		t.Fatalf("stranded order still in the outbox: %v %v", score, zerr)
	}

	// A grace of a minute (default 5m) makes the two-minute-old
	// reservation stranded while its hold still runs.
	out, err = runAuditCmd(t, env, "--sale", id, "--audit-grace", "1m")
	if err == nil || !strings.Contains(err.Error(), "1 of 1 sales do not balance") {
		t.Fatalf("audit of a wronged sale: %v", err)
	}
	wantLines(t, out, []string{"sale " + id + ": 7 findings"},
		[]string{"db_active_engine_inactive order " + orders["audit-0"], "released"},
		[]string{"db_active_engine_inactive order " + orders["audit-1"], "released"},
		[]string{"engine_active_db_final order " + orders["audit-2"]},
		[]string{"engine_active_db_final order " + orders["audit-3"]},
		[]string{"stranded order " + stranded.OrderID + " user audit-stranded"},
		[]string{"units_drift night " + d2, "+2"},
		[]string{"db_counters_drift night " + d2},
		[]string{"night " + d2 + ": stock 10, held 3, sold 0, in flight 0, engine available 9, drift +2"},
	)
	if strings.Contains(out, "units_drift night "+d0) || strings.Contains(out, "units_drift night "+d1) {
		t.Errorf("nights 0 and 1 balance in units before the repair:\n%s", out)
	}

	out, err = runAuditCmd(t, env, "--sale", id, "--repair", "--audit-grace", "1m")
	if err == nil {
		t.Fatal("repair left nothing for the serving instance and the operator")
	}
	wantLines(t, out,
		[]string{"repair: retake order " + orders["audit-0"] + ": done"},
		[]string{"repair: retake order " + orders["audit-1"] + ": done"},
		[]string{"repair: release order " + orders["audit-2"] + ": done"},
		// The database's counters still count audit-3's room: releasing it
		// would let the engine sell a room the database refuses.
		[]string{"repair: release order " + orders["audit-3"] + ": not done", "counters still count"},
		[]string{"repair: republish order " + stranded.OrderID + ": done"},
		[]string{"repair: rebuild: not done", "no order consumer"},
	)
	for _, line := range strings.Split(out, "\n") {
		for _, fixed := range []string{orders["audit-0"], orders["audit-2"], stranded.OrderID} {
			if strings.Contains(line, "order "+fixed) && !strings.Contains(line, "repair:") {
				t.Errorf("order %s still has a finding after the repair: %s", fixed, line)
			}
		}
	}

	// The republished order lands; the serving instance rebuilds the sale
	// (its heal loop finds the sale the repair's rebuild closed). Then only
	// the database's own finding is left, for an operator.
	if !testenv.Poll(90*time.Second, time.Second, func() bool {
		out, err = runAuditCmd(t, env, "--sale", id, "--audit-grace", "1m")
		return strings.Contains(out, "sale "+id+": 1 finding")
	}) {
		t.Fatalf("the sale did not settle after the repair: %v\n%s", err, out)
	}
	wantLines(t, out, []string{"db_counters_drift night " + d2},
		[]string{"night " + d2 + ": stock 10, held 4, sold 0, in flight 0, engine available 6, drift +0"})
	found := false
	for _, o := range readOrders(id) {
		found = found || o.ID == stranded.OrderID && o.Status == "held"
	}
	if !found {
		t.Errorf("the stranded reservation is not a held order: %+v", readOrders(id))
	}
}

// TestAuditEmbedded: next to a serving embedded instance the command can
// only audit the database's own rules, says so, and exits non-zero when
// they are broken.
func TestAuditEmbedded(t *testing.T) {
	m, cl := MustRunMain(t, nil)
	id := cl.createSale(t, saleJSON([]int{5}, 1, false))
	status, o, err := cl.purchase(t.Context(), id, "alice", false, nil, "")
	if err != nil || status != 202 {
		t.Fatalf("purchase: %d %v", status, err)
	}
	env := map[string]string{"FLASHSALE_DATA_DIR": m.Config.DataDir, "FLASHSALE_LOG_LEVEL": "warn"}
	out, err := runAuditCmd(t, env)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, out, []string{"embedded shape", "only the database's own invariants"},
		[]string{"sale " + id + ": balanced"}, []string{"night " + testenv.Night(0) + ": stock 5, held 1, sold 0"})
	if strings.Contains(out, "engine available") {
		t.Errorf("the embedded audit shows engine figures:\n%s", out)
	}
	if _, err := runAuditCmd(t, env, "--repair"); err == nil || !strings.Contains(err.Error(), "embedded shape") {
		t.Fatalf("--repair in the embedded shape: %v", err)
	}
	if _, err := runAuditCmd(t, env, "--sale", "nope"); err == nil || !strings.Contains(err.Error(), `no sale "nope"`) {
		t.Fatalf("unknown sale: %v", err)
	}

	db, err := sql.Open("sqlite", filepath.Join(m.Config.DataDir, "flashsale.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE orders SET status = 'cancelled' WHERE id = ?`, o.OrderID); err != nil {
		t.Fatal(err)
	}
	out, err = runAuditCmd(t, env, "--sale", id)
	if err == nil {
		t.Fatal("audit passed a database whose counters disagree with its orders")
	}
	wantLines(t, out, []string{"sale " + id + ": 1 finding"}, []string{"db_counters_drift night " + testenv.Night(0), "held 1"})
}
