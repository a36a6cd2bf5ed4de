package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/amqp"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/faultproxy"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/metrics/metricstest"
	"github.com/flashsale/flashsale/mysql"
)

// The order consumer's faults (issue 7), on the distributed shape: two real
// instances, each fault made certain on one instance's own link (a proxy
// the test owns, given to that instance alone by startClusterWith), then
// the books proved as in fault_test.go.

// consumerRate caps each instance's consumer so the queue keeps a backlog:
// the instance the test breaks always has deliveries in hand.
const consumerRate = "FLASHSALE_ORDER_RATE=40"

// TestFaultConsumerKilledAfterCommit kill -9s an instance whose consumer
// committed batches to the database while none of its acks could reach the
// broker. Instance 0 talks to the broker through a proxy that is
// blackholed (acks are client-to-broker bytes, so HoldReplies would let
// them through), and instance 1's database link is down meanwhile, so every
// order row that appears during the window is instance 0's commit with its
// ack held. Then instance 0 is killed and its held bytes are discarded: the
// broker redelivers those committed messages to instance 1, which must take
// them as the duplicates they are (the order ID is the primary key).
func TestFaultConsumerKilledAfterCommit(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	dbURL := testenv.MySQLDatabase(t)
	broker0, amqpURL0 := proxied(t, testenv.URL(t, testenv.AMQP))
	db1, dbURL1 := proxied(t, dbURL)
	c := startClusterWith(t, 2, dbURL, [][]string{
		{"FLASHSALE_AMQP_URL=" + amqpURL0},
		{"FLASHSALE_DATABASE_URL=" + dbURL1},
	}, consumerRate)
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	store := ownStore(t, c)
	var (
		committed map[string]bool // instance 0's commits whose acks never reached the broker
		lostAcks  int64           // bytes instance 0 sent the broker that the cut threw away
	)
	var unseen func() []string // redelivered orders instance 1 has not written
	res := faultStorm(t, c, id, "aftercommit", faultGuests, 150, func() {
		db1.Refuse(true)
		db1.Cut()
		broker0.Blackhole(true)
		// A commit already sent before the switches lands now, not in the
		// window; from here only instance 0 can write, and nothing it sends
		// the broker arrives.
		time.Sleep(200 * time.Millisecond)
		before := orderIDs(t, store, id)
		testenv.WaitUntil(t, 15*time.Second, "instance 0 to commit 4 orders with its broker link blackholed", func() bool {
			return len(orderIDs(t, store, id)) >= len(before)+4
		})
		c.kill(t, 0)
		committed = map[string]bool{}
		for oid := range orderIDs(t, store, id) {
			if !before[oid] {
				committed[oid] = true
			}
		}
		broker0.Cut() // the broker sees the connection go and requeues its deliveries
		lostAcks, _ = broker0.Discarded()
		broker0.Blackhole(false)
		waitRequeued(t, c)
		// Instance 1 was never given these orders: seeing one in what it
		// sends its database is seeing it handle the redelivery.
		unseen = watchOrders(db1, slices.Collect(maps.Keys(committed)))
		db1.Refuse(false)
		c.start(t, 0)
		t.Logf("instance 0 committed %d orders with its acks held and was killed; %d bytes it had sent the broker were discarded", len(committed), lostAcks)
	})
	if len(committed) == 0 {
		t.Fatal("instance 0 committed nothing while its acks were held: the scenario did not happen")
	}
	if lostAcks == 0 {
		t.Fatal("nothing instance 0 sent the broker after its commits was discarded: its acks arrived, and nothing was redelivered")
	}
	for oid := range committed {
		if _, ok := res.accepted[oid]; !ok {
			t.Errorf("order %s, committed in the window, never got a 202", oid)
		}
	}
	sellRest(t, c, id, res)
	balanced(t, c, id, res)
	if u := unseen(); len(u) > 0 {
		t.Errorf("instance 1 never wrote %d of the %d redelivered orders: %v", len(u), len(committed), u)
	} else {
		t.Logf("instance 1 wrote all %d redelivered orders again, as duplicates", len(committed))
	}
}

// TestFaultConsumerKilledBeforeCommit kill -9s an instance whose consumer
// took deliveries and never committed them; the broker requeues everything
// it held and instance 1, then the only consumer, writes it. Instance 0's
// database link goes through a proxy of its own, which holds the consumer
// short of its commit in one of two ways:
//
//   - Outage: the link is cut and new connections refused, so the consumer
//     holds its batch (and the deliveries prefetched behind it)
//     unacknowledged, waiting the outage out; it is killed once its log says
//     so.
//   - MidTransaction: the proxy catches the consumer's next COMMIT, so its
//     transaction is open on the server with its orders inserted (a dirty
//     read shows them) and never committed; it is killed there, and the cut
//     that follows makes the server roll the transaction back.
//
// It runs alone, not in parallel: beside TestFaultConsumerKilledAfterCommit
// (a run of this package, 2026-12-05) MidTransaction's instance 0 sent its
// database no COMMIT in the 15 s it was watched, and the scenario did not
// happen. The cause was not found (3 runs of the pair passed after); when
// it happens, logPipeline says where instance 0's orders stopped.
func TestFaultConsumerKilledBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	t.Run("Outage", func(t *testing.T) {
		dbURL := testenv.MySQLDatabase(t)
		db0, dbURL0 := proxied(t, dbURL)
		c := startClusterWith(t, 2, dbURL, [][]string{{"FLASHSALE_DATABASE_URL=" + dbURL0}}, consumerRate)
		id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
		var held int // the batch instance 0 said it held when it was killed
		res := faultStorm(t, c, id, "outage", faultGuests, 100, func() {
			mark := c.logs[0].Len()
			db0.Refuse(true)
			db0.Cut()
			testenv.WaitUntil(t, 15*time.Second, "instance 0 to hold a batch it cannot write", func() bool {
				held = heldBatch(c.logs[0].Since(mark))
				return held > 0
			})
			c.kill(t, 0)
			waitRequeued(t, c)
			db0.Refuse(false)
			c.start(t, 0)
			t.Logf("instance 0 killed holding a batch of %d it could not write; the broker gave what it held to instance 1", held)
		})
		if held == 0 {
			t.Fatal("instance 0 never held a batch: the scenario did not happen")
		}
		sellRest(t, c, id, res)
		balanced(t, c, id, res)
	})
	t.Run("MidTransaction", func(t *testing.T) {
		dbURL := testenv.MySQLDatabase(t)
		db0, dbURL0 := proxied(t, dbURL)
		db1, dbURL1 := proxied(t, dbURL)
		// Without a reaper or a scheduled audit, the only transactions
		// instance 0 commits mid-storm are its consumer's batches.
		c := startClusterWith(t, 2, dbURL, [][]string{
			{"FLASHSALE_DATABASE_URL=" + dbURL0, "FLASHSALE_REAP_INTERVAL=1h", "FLASHSALE_AUDIT_INTERVAL=-1s"},
			{"FLASHSALE_DATABASE_URL=" + dbURL1},
		}, consumerRate)
		id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
		db := rawMySQL(t, dbURL)
		var pending []string // orders instance 0 had inserted, uncommitted, when it was killed
		var lost int64       // bytes of its that never reached the server: the COMMIT
		var unseen func() []string
		res := faultStorm(t, c, id, "midtx", faultGuests, 100, func() {
			// Every statement before a COMMIT was answered before it was
			// sent: what the transaction did is on the server now. A COMMIT
			// of a transaction with no order of the sale in it (another of
			// instance 0's transactions; CI caught one) is let through, and
			// the next one caught, until a consumer batch's is. Instance 1
			// consumes too, and an order can move between the two (a
			// transaction that failed hands its deliveries back to the
			// broker), so an uncommitted order counts as the held
			// transaction's only if that session sent its INSERT since its
			// previous COMMIT: CI caught an order of instance 1's open
			// transaction taken for instance 0's, which could neither commit
			// nor roll back once instance 1's link was paused.
			sent := watchTransactions(db0)
			for deadline := time.Now().Add(15 * time.Second); len(pending) == 0; {
				caught := db0.HoldRequest(func(chunk []byte) bool { return bytes.Contains(chunk, []byte("\x03COMMIT")) })
				var conn int
				select {
				case conn = <-caught:
				case <-time.After(time.Until(deadline)):
					t.Error("instance 0's consumer sent no COMMIT of a batch in 15 s")
					logPipeline(t, c) // say where instance 0's orders stopped
				}
				if pending = sent(conn, uncommitted(t, db, id)); len(pending) > 0 || time.Now().After(deadline) {
					break
				}
				db0.HoldRequest(nil) // not a batch's: deliver it
			}
			unseen = watchOrders(db1, pending) // instance 1 has never been given them
			db1.Pause(true)                    // so that nobody can write them until the test has seen them gone
			c.kill(t, 0)
			db0.Cut() // the held COMMIT is thrown away and the server rolls back
			lost, _ = db0.Discarded()
			db0.HoldRequest(nil)
			if !testenv.WaitUntil(t, 15*time.Second, "the killed transaction's orders to be rolled back", func() bool {
				seen := orderRows(t, db, id, sql.LevelReadUncommitted) // committed or not
				return !slices.ContainsFunc(pending, func(oid string) bool { return seen[oid] })
			}) {
				// Say which: committed (someone wrote them) or still open.
				dirty, committed := orderRows(t, db, id, sql.LevelReadUncommitted), orderRows(t, db, id, sql.LevelReadCommitted)
				for _, oid := range pending {
					t.Logf("order %s: present %v, committed %v", oid, dirty[oid], committed[oid])
				}
			}
			db1.Pause(false)
			waitRequeued(t, c)
			c.start(t, 0)
			t.Logf("instance 0 killed with %d orders inserted uncommitted and its COMMIT held; the cut discarded %d bytes, and the orders were gone before instance 1 could write them", len(pending), lost)
		})
		if len(pending) == 0 || lost == 0 {
			t.Fatalf("instance 0 was killed with %d orders uncommitted and %d bytes held from the server: the scenario did not happen", len(pending), lost)
		}
		for _, oid := range pending {
			if _, ok := res.accepted[oid]; !ok {
				t.Errorf("order %s, rolled back with the killed transaction, never got a 202", oid)
			}
		}
		sellRest(t, c, id, res)
		balanced(t, c, id, res) // every 202 is held: the rolled-back orders were written again
		if u := unseen(); len(u) > 0 {
			t.Errorf("instance 1 never wrote %d of the %d rolled-back orders: %v", len(u), len(pending), u)
		}
	})
}

// watchOrders watches what a client sends its database through p for the
// order IDs in ids, and returns the ones it has not seen yet.
func watchOrders(p *faultproxy.Proxy, ids []string) (unseen func() []string) {
	var mu sync.Mutex
	left := map[string][]byte{}
	for _, id := range ids {
		left[id] = []byte(id)
	}
	p.Watch(func(_ int, chunk []byte) {
		mu.Lock()
		defer mu.Unlock()
		for id, b := range left {
			if bytes.Contains(chunk, b) {
				delete(left, id)
			}
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Collect(maps.Keys(left))
	}
}

// watchTransactions watches what a client sends its database through p,
// session by session, and returns a filter keeping the order IDs among ids
// that an INSERT of the transaction ended by conn's last COMMIT carried
// (the store interpolates its parameters, so the IDs are in the
// statement's text). Watch sees a request as it is read, before a hold
// can catch it, so a caught COMMIT's transaction is known.
func watchTransactions(p *faultproxy.Proxy) (sent func(conn int, ids []string) []string) {
	var mu sync.Mutex
	open := map[int][][]byte{} // INSERTs since the session's last COMMIT or ROLLBACK
	last := map[int][][]byte{} // the INSERTs of the transaction its last COMMIT ended
	p.Watch(func(conn int, chunk []byte) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case bytes.Contains(chunk, []byte("INSERT INTO orders")):
			open[conn] = append(open[conn], bytes.Clone(chunk))
		case bytes.Contains(chunk, []byte("\x03COMMIT")):
			last[conn], open[conn] = open[conn], nil
		case bytes.Contains(chunk, []byte("\x03ROLLBACK")):
			open[conn] = nil
		}
	})
	return func(conn int, ids []string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.DeleteFunc(ids, func(id string) bool {
			return !slices.ContainsFunc(last[conn], func(s []byte) bool { return bytes.Contains(s, []byte(id)) })
		})
	}
}

// rawMySQL opens the MariaDB database at dbURL for reads the store has no
// method for, closed when the test ends.
func rawMySQL(t *testing.T, dbURL string) *sql.DB {
	t.Helper()
	s, err := mysql.Open(context.Background(), dbURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.DB()
}

// uncommitted lists the sale's orders that a dirty read sees and a
// committed read does not: rows an open transaction inserted.
func uncommitted(t *testing.T, db *sql.DB, saleID string) []string {
	dirty, committed := orderRows(t, db, saleID, sql.LevelReadUncommitted), orderRows(t, db, saleID, sql.LevelReadCommitted)
	var out []string
	for id := range dirty {
		if !committed[id] {
			out = append(out, id)
		}
	}
	return out
}

// orderRows is the set of the sale's order rows that a read at level sees.
func orderRows(t *testing.T, db *sql.DB, saleID string, level sql.IsolationLevel) map[string]bool {
	tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: level, ReadOnly: true})
	if err != nil {
		t.Error(err)
		return nil
	}
	defer tx.Rollback()
	rows, err := tx.Query("SELECT id FROM orders WHERE sale_id = ?", saleID)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Error(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Error(err)
	}
	return ids
}

// TestFaultPoison publishes, mid-storm, straight into the order queue, two
// bodies that are not reservations and a reservation of a sale that does
// not exist: all three are dead-lettered at their first delivery, with no
// row written. A reservation of the storm's sale for a night past its last
// is refused by the database: recorded as failed, acknowledged, not
// dead-lettered. The storm's books balance around them.
func TestFaultPoison(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_ORDER_RATE=50")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	garbage := [][]byte{
		[]byte("not a reservation"),
		{1, 0, 100}, // version 1, then an order ID longer than the body
	}
	unknown := poisonReservation(testenv.Name("no-such-sale-"), 0)
	late := poisonReservation(id, 3) // the sale has one night
	res := faultStorm(t, c, id, "poison", faultGuests, 100, func() {
		for _, body := range garbage {
			publishRaw(t, c, body)
		}
		publishReservations(t, c, unknown, late)
		t.Logf("%d poison messages published into the order queue", len(garbage)+2)
	})
	sellRest(t, c, id, res)
	balancedDead(t, c, id, res, len(garbage)+1)

	store := ownStore(t, c)
	if o, err := store.Order(context.Background(), unknown.OrderID); err == nil {
		t.Errorf("order of an unknown sale written: %+v", o)
	}
	if o, err := store.Order(context.Background(), late.OrderID); err != nil || o.Status != flashsale.OrderFailed {
		t.Errorf("order past the sale's last night: %+v %v, want it recorded as failed", o, err)
	}
	// The dead letters are the poison, not an order of the storm.
	var got []string
	for _, body := range deadLetters(t, c) {
		switch {
		case bytes.Equal(body, garbage[0]):
			got = append(got, "garbage 0")
		case bytes.Equal(body, garbage[1]):
			got = append(got, "garbage 1")
		case bytes.Contains(body, []byte(unknown.OrderID)):
			got = append(got, "unknown sale")
		default:
			t.Errorf("dead letter %q is none of the poison", body)
		}
	}
	if len(got) != 3 || got[0] == got[1] || got[1] == got[2] || got[0] == got[2] {
		t.Errorf("dead letters = %v, want the two garbage bodies and the unknown sale's reservation once each", got)
	}
}

// poisonReservation is a reservation no stock engine took: one room of
// saleID from night first.
func poisonReservation(saleID string, first int) *flashsale.Reservation {
	return &flashsale.Reservation{
		OrderID: testenv.Name("poison-"), SaleID: saleID, UserID: testenv.Name("poisoner-"),
		FirstNight: first, Nights: 1, Rooms: 1, Amount: 39900,
		HoldExpiresAt: time.Now().Add(5 * time.Minute), Active: true,
	}
}

// publishReservations publishes rs into the cluster's order queue the way
// an instance does, confirmed.
func publishReservations(t *testing.T, c *cluster, rs ...*flashsale.Reservation) {
	ctx := context.Background()
	p, err := amqp.NewPublisher(ctx, amqp.Config{URL: testenv.URL(t, testenv.AMQP), Name: c.queue}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Error(err)
		return
	}
	defer p.Close()
	for _, r := range rs {
		if _, err := p.Write(ctx, r); err != nil {
			t.Errorf("publish %s: %v", r.OrderID, err)
		}
	}
}

// publishRaw publishes body into the cluster's order queue (the exchange
// and routing key of amqp/amqp.go), persistent and confirmed.
func publishRaw(t *testing.T, c *cluster, body []byte) {
	conn, ch, err := dialBroker(t)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	var confirm *amqp091.DeferredConfirmation
	if err = ch.Confirm(false); err == nil {
		confirm, err = ch.PublishWithDeferredConfirm(c.queue+".orders", "order", true, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, MessageId: "poison", Body: body})
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var ok bool
		if ok, err = confirm.WaitContext(ctx); err == nil && !ok {
			err = errors.New("nacked")
		}
	}
	if err != nil {
		t.Errorf("publish %q: %v", body, err)
	}
}

// deadLetters takes every message out of the cluster's dead-letter queue.
func deadLetters(t *testing.T, c *cluster) [][]byte {
	t.Helper()
	conn, ch, err := dialBroker(t)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var bodies [][]byte
	for {
		d, ok, err := ch.Get(c.queue+".orders.dead", true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return bodies
		}
		bodies = append(bodies, d.Body)
	}
}

// heldRe finds the consumer's log line for a batch it holds through a
// database outage (amqp.Consumer.write), and the batch's size.
var heldRe = regexp.MustCompile(`msg="database unreachable, holding the batch".* batch=(\d+)`)

// heldBatch is the size of the last batch these log lines say the
// consumer holds unwritten, or 0.
func heldBatch(lines []string) int {
	n := 0
	for _, l := range lines {
		if m := heldRe.FindStringSubmatch(l); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
	}
	return n
}

// waitRequeued waits until the broker has seen a killed instance's consumer
// go (one consumer left) and has given everything it requeued to the one
// that is left (nothing ready), so no restarted instance can take any of it.
func waitRequeued(t *testing.T, c *cluster) {
	testenv.WaitUntil(t, 15*time.Second, "the broker to requeue the killed consumer's deliveries to the other", func() bool {
		q, _ := c.queues(t)
		return q.Consumers == 1 && q.Messages == 0
	})
}

// ownStore opens the test's own connection to the cluster's database,
// never through a proxy, closed when the test ends.
func ownStore(t *testing.T, c *cluster) flashsale.Store {
	t.Helper()
	store, err := app.OpenStore(context.Background(), app.Config{DatabaseURL: c.dbURL, StartTimeout: time.Minute}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// orderIDs is the set of the sale's order rows.
func orderIDs(t *testing.T, store flashsale.Store, saleID string) map[string]bool {
	snap, err := store.Snapshot(context.Background(), saleID)
	if err != nil {
		t.Error(err)
		return nil
	}
	ids := make(map[string]bool, len(snap.Reservations))
	for _, r := range snap.Reservations {
		ids[r.OrderID] = true
	}
	return ids
}

// logPipeline logs each instance's count of the orders it consumed, the
// batches it wrote and the orders placed, for a test whose scenario did not
// happen: an instance that never wrote shows where its orders stopped.
func logPipeline(t *testing.T, c *cluster) {
	t.Helper()
	for i, cl := range c.clients {
		f := metricstest.Scrape(t, cl.Base+"/metrics")
		t.Logf("instance %d: %v published, %v consumed, %v consumer batches, %v orders placed, %v redelivered",
			i, f.Value("flashsale_queue_published_total"), f.Value("flashsale_queue_consumed_total"),
			f.Value("flashsale_queue_consumer_batches_total"), f.Value("flashsale_db_orders_placed_total"),
			f.Value("flashsale_queue_redelivered_total"))
	}
}
