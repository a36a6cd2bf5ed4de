package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestFaultRedisStalledDBMode is the breaker's db mode under a Redis that
// stops answering mid-storm for 12 seconds (every byte held at a proxy)
// and then comes back with everything it had, stale by then. The breakers
// open, every instance stops selling from Redis, the queue (a backlog:
// orders are written at 20/s) drains into the database, and the sale goes
// on from the database's conditional update, held orders at once, until it
// sells out there. When Redis answers again the deployment rebuilds it
// from the database and sells from it again: a cancelled room sells once
// more, through Redis, and nothing else does.
//
// What would break: selling from the database before the queue drained
// (the queued 202s would find their rooms sold: failed after a 202), or
// going back to Redis without the rebuild (its stale count would sell
// rooms the database sold: failed after a 202 again).
func TestFaultRedisStalledDBMode(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite skipped in -short")
	}
	proxy, redisURL := proxied(t, testenv.URL(t, testenv.Redis))
	c := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_REDIS_URL="+redisURL,
		"FLASHSALE_BREAKER_MODE=db", "FLASHSALE_ORDER_RATE=20")
	id := c.clients[0].createSale(t, saleJSON([]int{faultStock}, 1, true))
	var (
		mu       sync.Mutex
		direct   int // purchases answered held from the database while Redis was out
		switched time.Duration
		returned time.Duration
		probes   = map[string]string{} // order id -> user, merged into the storm's after it
		cancel   string                // a probe's order, cancelled once Redis is back
	)
	buy := func(i int, user string) (int, orderJSON) {
		status, o, err := c.clients[i%2].purchase(context.Background(), id, user, true, nil, "key-"+user)
		if err != nil {
			return 0, o
		}
		if status == http.StatusAccepted {
			mu.Lock()
			probes[o.OrderID] = user
			mu.Unlock()
		}
		return status, o
	}
	res := faultStorm(t, c, id, "dbmode", faultGuests, 100, func() {
		proxy.Pause(true)
		stalled := time.Now()
		t.Logf("Redis stalled with %d orders written", countOrders(t, c, id))
		// Probes buy from the database, 16 at a time, until it is sold
		// out there: fast enough to sell it out while the queue would
		// still be draining.
		var (
			soldOut atomic.Bool
			next    atomic.Int64
			wg      sync.WaitGroup
		)
		for range 16 {
			wg.Go(func() {
				for time.Since(stalled) < 12*time.Second {
					if soldOut.Load() {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					i := int(next.Add(1))
					switch status, o := buy(i, fmt.Sprintf("probe-db-%05d", i)); {
					case status == http.StatusAccepted && o.Status == "held":
						mu.Lock()
						if direct == 0 {
							switched = time.Since(stalled)
						}
						direct++
						cancel = o.OrderID
						mu.Unlock()
					case status == http.StatusAccepted:
						t.Errorf("a purchase while Redis is stalled answered %q", o.Status)
					case status == http.StatusConflict && o.Error.Code == "sold_out":
						soldOut.Store(true)
					case status != 0 && status != http.StatusServiceUnavailable:
						t.Errorf("a purchase while Redis is stalled: %d %s", status, o.Error.Code)
					default:
						time.Sleep(20 * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		if !soldOut.Load() {
			t.Errorf("the sale did not sell out from the database in 12 s (%d sold from it)", direct)
		}
		proxy.Pause(false)
		back := time.Now()
		// Sold out in the database: once Redis is rebuilt it says so too.
		// Then one cancelled room sells again, from Redis.
		for i := 0; ; i++ {
			if time.Since(back) > time.Minute {
				t.Errorf("Redis not sold out a minute after it came back")
				return
			}
			status, o := buy(i, fmt.Sprintf("probe-back-%05d", i))
			if status == http.StatusAccepted {
				t.Errorf("a room sold after the database sold out: order %s %s", o.OrderID, o.Status)
				return
			}
			if status == http.StatusConflict && o.Error.Code == "sold_out" && selling(t, c.clients[0]) == "engine" {
				returned = time.Since(back)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var co orderJSON
		if status, err := c.clients[0].do(context.Background(), "POST", "/api/orders/"+cancel+"/cancel",
			c.clients[0].jwt(probes[cancel]), nil, nil, &co); err != nil || status != http.StatusOK || co.Status != "cancelled" {
			t.Errorf("cancel %s: %d %v %+v", cancel, status, err, co)
		}
		delete(probes, cancel)
	})
	t.Logf("Redis stalled 12 s: first purchase from the database %v after the stall, %d sold from it; selling from Redis again %v after it came back",
		switched.Round(time.Millisecond), direct, returned.Round(time.Millisecond))
	if direct == 0 {
		t.Fatal("nothing was sold from the database while Redis was stalled")
	}
	for oid, user := range probes {
		res.accepted[oid] = user
	}
	rest := len(res.accepted)
	sellRest(t, c, id, res)
	if got := len(res.accepted) - rest; got != 1 {
		t.Errorf("%d rooms sold after the cancel, want the one cancelled", got)
	}
	balanced(t, c, id, res)
}

// selling is what an instance says it sells from.
func selling(t *testing.T, cl *client) string {
	_, r := cl.readyz(t)
	return r.Selling
}
