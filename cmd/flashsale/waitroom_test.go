package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestWaitingRoomStorm: 1 000 guests join a waiting room for 50 rooms
// over real HTTP before the start, then each follows their place on its
// stream and buys when admitted. The draw published after the start
// verifies against the commitment published before it; the guests who
// got a room are exactly the first 50 of its order; none is oversold;
// the admitted hear it on the stream at once (the rooms are gone seconds
// after the start, not at a heartbeat); and every other guest is told
// sold_out on the stream, pushed (within 3 s of the last room being
// taken here; design.md's 1 s is measured by the load tool).
func TestWaitingRoomStorm(t *testing.T) {
	_, c := MustRunMain(t, func(c *app.Config) {
		c.Limits = funnel.Limits{} // every guest is on one address here
		c.StreamsPerClient = 0
		// The storm's point is the draw and the pushes, not 1 000 joins
		// answered within the 1 s default on two cores shared with the
		// other suites under the race detector (CI: 29 of them were not).
		c.RequestTimeout = 5 * time.Second
	})
	waitingRoomStorm(t, []*client{c}, 1000, 50, 5*time.Second)
}

// TestWaitingRoomDistributed is the storm on the distributed shape: two
// instances on one Redis, RabbitMQ and MariaDB, each guest joining,
// following their place and buying through one of them (alternately).
// One queue for both: the draw either publishes verifies, the buyers are
// exactly its first 50, sold_out is pushed to every other guest.
func TestWaitingRoomDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	cl := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_LIMIT_PURCHASE_USER=off",
		"FLASHSALE_EVENTS_PER_CLIENT=0", "FLASHSALE_LOG_LEVEL=error",
		"FLASHSALE_REQUEST_TIMEOUT=5s") // as TestWaitingRoomStorm's
	waitingRoomStorm(t, cl.clients, 1000, 50, 5*time.Second)
}

// joinBeforeStart joins user to saleID's waiting room at cl, decoding the place
// into v. A join answered 503 (its place not saved in time) is tried again
// every 500 ms while the start is more than a second away, as the page
// does: CI starved the place log's writer under a thousand joins at once
// ("record a place: context deadline exceeded"). It returns the last
// answer and how many 503s it tried again; 200 after one means the place
// had been saved after all.
func joinBeforeStart(ctx context.Context, cl *client, saleID, user string, start time.Time, v *flashsale.QueueView) (status, retried int, err error) {
	for {
		status, err = cl.do(ctx, "POST", "/api/sales/"+saleID+"/queue", cl.jwt(user), nil, nil, v)
		if err != nil || status != http.StatusServiceUnavailable || time.Until(start) <= time.Second {
			return status, retried, err
		}
		retried++
		time.Sleep(500 * time.Millisecond)
	}
}

// waitingRoomStorm runs the storm through cs (guest i on cs[i%len(cs)]):
// a sale starting lead from now, guests join before it, follow, buy.
func waitingRoomStorm(t *testing.T, cs []*client, guests, rooms int, lead time.Duration) {
	ctx := t.Context()
	c := cs[0]
	on := func(i int) *client { return cs[i%len(cs)] }
	start := time.Now().Add(lead).Truncate(time.Second)
	sale := saleJSON([]int{rooms}, 1, true)
	sale["starts_at"] = start.Format(time.RFC3339)
	sale["waiting_room"] = map[string]any{"prequeue_minutes": 5, "admit_per_second": 100, "admission_seconds": 30}
	id := c.createSale(t, sale)
	user := func(i int) string { return fmt.Sprintf("wr%04d", i) }

	// Everyone joins before the start. A join whose place could not be
	// saved in time is answered 503 and tried again, as the page does: CI
	// starved the place log's writer under 1 000 joins at once (with the
	// race detector and the other suites on two cores), and 846 of them
	// outran the request deadline.
	var wg sync.WaitGroup
	var retried atomic.Int64
	tickets := make([]string, guests)
	for i := range guests {
		wg.Go(func() {
			var v flashsale.QueueView
			st, tries, err := joinBeforeStart(ctx, on(i), id, user(i), start, &v)
			retried.Add(int64(tries))
			if err != nil || st != http.StatusCreated && st != http.StatusOK {
				t.Errorf("%s joins: %d %v", user(i), st, err)
			}
			tickets[i] = v.Ticket
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d joins tried again after a 503", retried.Load())
	var before flashsale.Draw
	st, err := c.do(ctx, "GET", "/api/sales/"+id+"/queue/draw", "", nil, nil, &before)
	if time.Now().After(start) {
		t.Fatalf("the joins took past the start (%v late): the test's timing is off", time.Since(start))
	}
	if err != nil || st != 200 || before.Commitment == "" || before.Seed != "" {
		t.Fatalf("draw before the start: %d %v; commitment %q, seed %q", st, err, before.Commitment, before.Seed)
	}

	// Each guest follows their stream: admitted, they buy; sold out, they
	// note when they heard it.
	type outcome struct {
		bought  bool
		soldOut time.Time
		at      time.Time // the purchase's 202
	}
	outcomes := make([]outcome, guests)
	streams := &http.Client{Transport: &http.Transport{}}
	defer streams.CloseIdleConnections()
	for i := range guests {
		wg.Go(func() {
			outcomes[i] = followPlace(ctx, t, on(i), streams, id, user(i))
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var d flashsale.Draw
	for i, ci := range cs { // every instance publishes the one draw
		var di flashsale.Draw
		if st, err := ci.do(ctx, "GET", "/api/sales/"+id+"/queue/draw", "", nil, nil, &di); err != nil || st != 200 {
			t.Fatalf("draw from instance %d: %d %v", i, st, err)
		}
		if err := di.Verify(); err != nil || di.Commitment != before.Commitment || len(di.Order) != guests {
			t.Fatalf("the draw instance %d published: %v; commitment %s, before the start %s; %d in order", i, err, di.Commitment, before.Commitment, len(di.Order))
		}
		if i > 0 && !slices.Equal(di.Order, d.Order) {
			t.Fatalf("instances 0 and %d publish different orders", i)
		}
		d = di
	}
	var winners []string
	var last time.Time
	for i, o := range outcomes {
		if o.bought {
			winners = append(winners, tickets[i])
			if o.at.After(last) {
				last = o.at
			}
		}
	}
	slices.Sort(winners)
	first := slices.Clone(d.Order[:rooms])
	slices.Sort(first)
	if !slices.Equal(winners, first) {
		t.Fatalf("%d guests bought; they are not the draw's first %d", len(winners), rooms)
	}
	// Admissions are pushed too: at 100 a second the 50 rooms go in the
	// first step after the start, not at a stream's 15 s heartbeat. Every
	// stream opened after lead-before-the-start, so a heartbeat could not
	// come before 15 s - lead after it: the bound stays under that (CI,
	// the other suites, fuzzing and benchmarks beside this one: the last
	// room 6.8 s after the start, against a bound of 5 s).
	if lag, most := last.Sub(start), 15*time.Second-lead-time.Second; lag > most {
		t.Fatalf("the last room was bought %v after the start (at most %v): the admissions were not pushed", lag, most)
	}
	// sold_out is pushed too, not heard at a stream's 15 s heartbeat.
	// design.md's "within 1 s of the last room" is the load tool's to
	// measure (flashsale bench --waiting-room: its sold_out spread): CI,
	// its other suites on the same two cores, once had 17 of 950 guests
	// hear it 1.0-1.07 s after the last room, so the bound here is 3 s
	// and the worst is logged.
	var late, worst time.Duration
	over := 0
	for i, o := range outcomes {
		if !o.bought {
			if o.soldOut.IsZero() {
				t.Fatalf("%s neither bought nor heard sold_out", user(i))
			}
			lag := o.soldOut.Sub(last)
			worst = max(worst, lag)
			if lag > time.Second {
				over++
			}
			if lag > 3*time.Second {
				late = max(late, lag)
			}
		}
	}
	t.Logf("sold_out heard at most %v after the last room; %d guests after 1 s", worst, over)
	if late > 0 {
		t.Fatalf("a guest heard sold_out %v after the last room was taken: not pushed", late)
	}
	// The distributed shape writes orders from its queue: give it time.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n := c.adminSale(t, id).Nights[0]
		if n.Held+n.Sold == rooms && n.Available == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the night after the storm: %+v, want %d held or sold and none left", n, rooms)
		}
	}
}

// followPlace reads a guest's place stream until they buy (admitted) or
// hear sold_out, and says which and when.
func followPlace(ctx context.Context, t *testing.T, c *client, streams *http.Client, saleID, user string) (o struct {
	bought  bool
	soldOut time.Time
	at      time.Time
}) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.Base+"/api/sales/"+saleID+"/queue/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.jwt(user))
	resp, err := streams.Do(req)
	if err != nil {
		t.Errorf("%s: stream: %v", user, err)
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: stream: %d", user, resp.StatusCode)
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var v flashsale.QueueView
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Errorf("%s: %q: %v", user, data, err)
			return o
		}
		switch v.State {
		case flashsale.QueueSoldOut:
			o.soldOut = time.Now()
			return o
		case flashsale.QueueAdmitted:
			st, ord, err := c.purchase(ctx, saleID, user, true, nil, "")
			if err != nil || st != http.StatusAccepted && st != http.StatusOK {
				t.Errorf("%s admitted, but the purchase: %d %v %+v", user, st, err, ord.Error)
				return o
			}
			o.bought, o.at = true, time.Now()
			return o
		case flashsale.QueueExpired, flashsale.QueueClosed:
			t.Errorf("%s: %s", user, v.State)
			return o
		}
	}
	t.Errorf("%s: the stream ended without an answer: %v", user, sc.Err())
	return o
}
