package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/flashsale/flashsale"
)

// TestFenceModel (issue 21, f) checks the fencing protocol against a model
// of plain maps, on the real engine and Redis: guests reserve (a 202
// publishes the order to the queue), consumers write queued orders to the
// database, Redis is rolled back to any state it had before (or lost),
// the instance restarts (a new Engine: its sold-out flags gone), and the
// rebuild drains the queue and loads the database's view. The model never
// sees a unit sold twice (a 202 while the database and the queue already
// hold the stock, which the database would refuse: a 202 ended failed),
// and whenever the engine answers, it answers exactly the truth.
//
// A rollback restores every key of the sale as DUMPed at an earlier step,
// and then does what a restart or a failover does to the restored stamp:
// the Redis process that now holds it is another one. So the test runs
// in one process; it forges only the run_id, not the state.
func TestFenceModel(t *testing.T) {
	url := redisURL(t)
	rapid.Check(t, func(rt *rapid.T) {
		prefix := newPrefix()
		m := &fenceModel{rt: rt, url: url, prefix: prefix, e: openModelEngine(rt, url, prefix)}
		defer func() {
			deleteKeys(t, m.e, prefix)
			m.e.Close()
		}()
		m.snap = newSale(100, rapid.IntRange(1, 6).Draw(rt, "stock"))
		if err := m.e.Load(context.Background(), m.snap, time.Time{}); err != nil {
			rt.Fatal(err)
		}
		m.dumps = [][]dumped{m.dump()}
		rt.Repeat(map[string]func(*rapid.T){
			"reserve":  m.reserve,
			"consume":  m.consume,
			"save":     m.save,
			"rollback": m.rollback,
			"lose":     m.lose,
			"restart":  m.restart,
			"rebuild":  m.rebuild,
			"":         m.check,
		})
	})
}

type fenceModel struct {
	rt     *rapid.T
	url    string
	prefix string
	e      *Engine
	snap   *flashsale.StockSnapshot
	users  int

	queue []flashsale.Reservation // 202s not yet in the database
	db    []flashsale.Reservation // the truth
	dumps [][]dumped              // Redis states saved at earlier steps
}

type dumped struct {
	key  string
	data string // "" when the key did not exist
}

func openModelEngine(rt *rapid.T, url, prefix string) *Engine {
	e, err := Open(context.Background(), url, Options{Prefix: prefix, Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		rt.Fatal(err)
	}
	return e
}

func (m *fenceModel) stock() int { return m.snap.Sale.Nights[0].Stock }

// reserve: a guest buys one room. A 202 is a promise: the database and the
// queue must have had room for it.
func (m *fenceModel) reserve(rt *rapid.T) {
	m.users++
	r := newReservation(m.snap, fmt.Sprintf("u%d", m.users), 0, 1, 1)
	_, err := m.e.Reserve(context.Background(), r)
	switch {
	case err == nil:
		if taken := len(m.db) + len(m.queue); taken >= m.stock() {
			rt.Fatalf("a 202 for %s with %d of %d rooms already in the database and the queue: sold twice, it would end failed", r.OrderID, taken, m.stock())
		}
		m.queue = append(m.queue, *r)
	case errors.Is(err, flashsale.ErrSoldOut), errors.Is(err, flashsale.ErrNotLoaded):
	default:
		rt.Fatalf("reserve: %v", err)
	}
}

// consume writes the oldest queued order to the database.
func (m *fenceModel) consume(rt *rapid.T) {
	if len(m.queue) == 0 {
		rt.Skip("the queue is empty")
	}
	m.db = append(m.db, m.queue[0])
	m.queue = m.queue[1:]
}

// save remembers Redis as it is now (a snapshot, an AOF's prefix, what a
// replica has received).
func (m *fenceModel) save(rt *rapid.T) {
	m.dumps = append(m.dumps, m.dump())
}

// rollback puts Redis back to a saved state, held by another process.
func (m *fenceModel) rollback(rt *rapid.T) {
	i := rapid.IntRange(0, len(m.dumps)-1).Draw(rt, "state")
	ctx := context.Background()
	for _, d := range m.dumps[i] {
		m.e.client.Del(ctx, d.key)
		if d.data != "" {
			if err := m.e.client.Restore(ctx, d.key, 0, d.data).Err(); err != nil {
				rt.Fatal(err)
			}
		}
	}
	m.forgeProcess(rt)
}

// lose is Redis back empty, or flushed.
func (m *fenceModel) lose(rt *rapid.T) {
	ctx := context.Background()
	for _, d := range m.dump() {
		m.e.client.Del(ctx, d.key)
	}
}

// forgeProcess makes the restored stamp another process's, as a restart or
// a failover would.
func (m *fenceModel) forgeProcess(rt *rapid.T) {
	meta := m.e.saleKeys(m.snap.Sale.ID).meta
	if n, _ := m.e.client.Exists(context.Background(), meta).Result(); n == 1 {
		if err := m.e.client.HSet(context.Background(), meta, "node", rand.Text()).Err(); err != nil {
			rt.Fatal(err)
		}
	}
}

// restart is a new instance: a new engine, nothing in memory.
func (m *fenceModel) restart(rt *rapid.T) {
	m.e.Close()
	m.e = openModelEngine(rt, m.url, m.prefix)
}

// rebuild is the fenced rebuild, run when the engine says not loaded:
// every consumer drains the queue, then the database's view is loaded.
func (m *fenceModel) rebuild(rt *rapid.T) {
	if _, err := m.e.Available(context.Background(), m.snap.Sale.ID); !errors.Is(err, flashsale.ErrNotLoaded) {
		rt.Skip("the sale is loaded: the heal loop does not rebuild it")
	}
	m.db = append(m.db, m.queue...)
	m.queue = nil
	snap := &flashsale.StockSnapshot{Sale: m.snap.Sale, Reservations: m.db,
		Nights: []flashsale.NightStock{{Date: m.snap.Nights[0].Date, Stock: m.stock(), Available: m.stock() - len(m.db)}}}
	if err := m.e.Load(context.Background(), snap, time.Time{}); err != nil {
		rt.Fatal(err)
	}
}

// check: whenever the engine answers, it answers the truth.
func (m *fenceModel) check(rt *rapid.T) {
	avail, err := m.e.Available(context.Background(), m.snap.Sale.ID)
	if errors.Is(err, flashsale.ErrNotLoaded) {
		return
	}
	if err != nil {
		rt.Fatal(err)
	}
	if want := m.stock() - len(m.db) - len(m.queue); avail[0] != want {
		rt.Fatalf("the engine says %d available, the truth is %d (stock %d, %d in the database, %d queued)",
			avail[0], want, m.stock(), len(m.db), len(m.queue))
	}
}

// dump reads every key of the sale.
func (m *fenceModel) dump() []dumped {
	k := m.e.saleKeys(m.snap.Sale.ID)
	var out []dumped
	for _, key := range []string{k.meta, k.stock, k.users, k.keys, k.res, k.unconfirmed} {
		data, err := m.e.client.Dump(context.Background(), key).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			m.rt.Fatal(err)
		}
		out = append(out, dumped{key: key, data: data})
	}
	return out
}
