package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/webhook"
)

const testWebhookSecret = "events-test-secret-0123456789abcdef"

// hookEvent is an event as a receiver read it.
type hookEvent struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Order struct {
		ID            string    `json:"order_id"`
		Status        string    `json:"status"`
		HoldExpiresAt time.Time `json:"hold_expires_at"`
	} `json:"order"`
	OrderID string `json:"order_id"`
	SaleID  string `json:"sale_id"`
	got     time.Time
}

// events collects what a transport delivered, in arrival order.
type events struct {
	mu   sync.Mutex
	list []hookEvent
	bad  int
}

func (e *events) add(body []byte) error {
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		return fmt.Errorf("bad event %q: %v", body, err)
	}
	ev.got = time.Now()
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
	return nil
}

// paths returns each order's statuses in arrival order, repeats (by event
// id) dropped as a receiver would, and the sell-outs per sale.
func (e *events) paths() (map[string][]string, map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	out := map[string][]string{}
	soldOut := map[string]int{}
	for _, ev := range e.list {
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		if ev.Type == "sale.sold_out" {
			soldOut[ev.SaleID]++
			continue
		}
		out[ev.Order.ID] = append(out[ev.Order.ID], ev.Order.Status)
	}
	return out, soldOut
}

// hookServer is a webhook receiver that refuses its first refuse requests
// and checks every signature.
func hookServer(t *testing.T, refuse int) (*httptest.Server, *events) {
	ev := &events{}
	var left atomic.Int64
	left.Store(int64(refuse))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if left.Add(-1) >= 0 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		if err := webhook.Verify([]byte(testWebhookSecret), r.Header.Get(webhook.SignatureHeader), body, time.Now(), webhook.ToleranceDefault); err != nil {
			ev.mu.Lock()
			ev.bad++
			ev.mu.Unlock()
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if err := ev.add(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, ev
}

// validPath reports whether statuses is an order's life in order, from
// its first status to final: held, then paid, expired or cancelled, and an
// expired or cancelled hold paid late; or failed alone.
func validPath(statuses []string, final string) bool {
	if len(statuses) == 0 || statuses[len(statuses)-1] != final {
		return false
	}
	if statuses[0] == "failed" {
		return len(statuses) == 1
	}
	next := map[string][]string{"held": {"paid", "expired", "cancelled"}, "expired": {"paid"}, "cancelled": {"paid"}}
	if statuses[0] != "held" {
		return false
	}
	for i := 1; i < len(statuses); i++ {
		ok := false
		for _, n := range next[statuses[i-1]] {
			ok = ok || n == statuses[i]
		}
		if !ok {
			return false
		}
	}
	return true
}

// eventsStorm buys, pays and cancels from many guests at clients while
// kill (when set) kills and restarts an instance after 60 purchases. A
// third of the guests pay, a third cancel, the rest let the hold expire.
func eventsStorm(t *testing.T, clients func() []*client, saleID string, guests int, kill func()) {
	t.Helper()
	ctx := context.Background()
	var accepted atomic.Int64
	var killOnce sync.Once
	var wg sync.WaitGroup
	for g := range guests {
		wg.Go(func() {
			user := fmt.Sprintf("ev-%04d", g)
			var o orderJSON
			for try := 0; try < 50; try++ {
				cs := clients()
				c := cs[(g+try)%len(cs)]
				status, got, err := c.purchase(ctx, saleID, user, true, nil, "k")
				if err == nil && (status/100 == 2 || status == 409) {
					o = got
					break
				}
				time.Sleep(50 * time.Millisecond) // killed, or shed: retry with the same key
			}
			if o.OrderID == "" {
				return // sold out
			}
			if accepted.Add(1) == 60 && kill != nil {
				killOnce.Do(kill)
			}
			var path string
			switch g % 3 {
			case 0:
				path = "/api/orders/" + o.OrderID + "/paid"
			case 1:
				path = "/api/orders/" + o.OrderID + "/cancel"
			default:
				return
			}
			for try := 0; try < 100; try++ {
				cs := clients()
				c := cs[(g+try)%len(cs)]
				bearer := c.jwt(user)
				var body any
				if g%3 == 0 {
					bearer, body = c.admin, map[string]string{"payment_ref": "pay-" + user}
				}
				var out orderJSON
				status, err := c.do(ctx, "POST", path, bearer, body, nil, &out)
				if err == nil && (status == 200 || status == 409) {
					return // done, or the hold expired first (a late payment may still retake it)
				}
				time.Sleep(50 * time.Millisecond) // pending, killed, or shed
			}
			t.Errorf("%s: could not %s %s", user, path, o.OrderID)
		})
	}
	wg.Wait()
	t.Logf("%d purchases accepted", accepted.Load())
}

// checkEvents waits until every order of the sale has its whole life in
// the events received, in order, and the sale has soldOut sell-outs (-1:
// any number; rooms coming back and going again make several); settled
// waits for every hold to be paid, cancelled or expired first.
func checkEvents(t *testing.T, c *client, saleID string, ev *events, soldOut int, settled bool) {
	t.Helper()
	ctx := context.Background()
	var (
		page struct {
			Orders []orderJSON `json:"orders"`
		}
		soldOuts map[string]int
		missing  int
		example  string
	)
	if !testenv.Poll(90*time.Second, 200*time.Millisecond, func() bool {
		page.Orders = nil
		status, err := c.do(ctx, "GET", "/api/admin/sales/"+saleID+"/orders?limit=1000", c.admin, nil, nil, &page)
		if err != nil || status != 200 {
			t.Fatalf("orders: %d %v", status, err)
		}
		var paths map[string][]string
		paths, soldOuts = ev.paths()
		missing, example = 0, ""
		for _, o := range page.Orders {
			if settled && o.Status == "held" {
				missing++ // its hold has not expired yet
				continue
			}
			if !validPath(paths[o.OrderID], o.Status) {
				missing++
				example = fmt.Sprintf("order %s is %s, its events %v", o.OrderID, o.Status, paths[o.OrderID])
			}
		}
		return missing == 0 && (soldOut < 0 || soldOuts[saleID] == soldOut) && len(page.Orders) > 0
	}) {
		t.Fatalf("%d of %d orders lack events (e.g. %s); %d sell-outs, want %d", missing, len(page.Orders), example, soldOuts[saleID], soldOut)
	}
	final := map[string]int{}
	for _, o := range page.Orders {
		final[o.Status]++
	}
	t.Logf("%d orders (%v), each with its whole life in its events; %d sell-outs", len(page.Orders), final, soldOuts[saleID])
	if ev.bad != 0 {
		t.Errorf("%d deliveries failed the receiver's signature check", ev.bad)
	}
}

// sellOut buys every room of a new five-room sale from eight guests, none
// of whom pays or cancels: exactly one sale.sold_out.
func sellOut(t *testing.T, c *client) string {
	t.Helper()
	sale := saleJSON([]int{5}, 1, true)
	sale["hold_seconds"] = 600
	id := c.createSale(t, sale)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			status, _, err := c.purchase(context.Background(), id, fmt.Sprintf("so-%d", g), true, nil, "")
			if err != nil || (status != 202 && status != 409) {
				t.Errorf("sell-out purchase: %d %v", status, err)
			}
		})
	}
	wg.Wait()
	return id
}

// TestEventsKill runs purchases, payments, cancels and expiries while the
// webhook receiver refuses its first deliveries and the service is killed
// with SIGKILL and restarted: every order's events arrive, each at least
// once, in order, none lost. In the distributed shape the same arrive on
// the RabbitMQ exchange as well.
func TestEventsKill(t *testing.T) {
	t.Parallel() // waits more than it works: see TestMain
	if testing.Short() {
		t.Skip("kill test skipped in -short")
	}
	t.Run("embedded", func(t *testing.T) {
		hook, ev := hookServer(t, 5)
		bin := buildBinary(t)
		addr, dir := testenv.FreeAddr(t), t.TempDir()
		env := []string{"FLASHSALE_ADDR=" + addr, "FLASHSALE_DATA_DIR=" + dir,
			"FLASHSALE_ADMIN_TOKEN=" + testAdminToken, "FLASHSALE_JWT_SECRET=" + testJWTSecret,
			"FLASHSALE_WEBHOOK_URL=" + hook.URL, "FLASHSALE_WEBHOOK_SECRET=" + testWebhookSecret,
			"FLASHSALE_LIMIT_PURCHASE_USER=off", "FLASHSALE_LOG_LEVEL=warn"}
		var mu sync.Mutex
		var restarted time.Time
		proc := startBinary(t, bin, env...)
		waitReady(t, "http://"+addr)
		c := newClient("http://"+addr, testAdminToken, testJWTSecret)
		sale := saleJSON([]int{120}, 1, true)
		sale["hold_seconds"] = 3
		id := c.createSale(t, sale)
		kill := func() {
			mu.Lock()
			defer mu.Unlock()
			proc.Process.Kill()
			proc.Wait()
			t.Log("killed with SIGKILL; restarting")
			proc = startBinary(t, bin, env...)
			waitReady(t, "http://"+addr)
			restarted = time.Now()
		}
		eventsStorm(t, func() []*client { return []*client{c} }, id, 200, kill)
		soldID := sellOut(t, c)
		checkEvents(t, c, id, ev, -1, true)
		checkEvents(t, c, soldID, ev, 1, false)
		checkExpiryLatency(t, c, ev, restarted)
	})
	t.Run("distributed", func(t *testing.T) {
		hook, ev := hookServer(t, 5)
		cl := startCluster(t, 2, testenv.MySQLDatabase(t), "FLASHSALE_LIMIT_PURCHASE_USER=off",
			"FLASHSALE_WEBHOOK_URL="+hook.URL, "FLASHSALE_WEBHOOK_SECRET="+testWebhookSecret)
		fromQueue := bindEvents(t, cl.queue+".events")
		sale := saleJSON([]int{120}, 1, true)
		sale["hold_seconds"] = 3
		id := cl.clients[0].createSale(t, sale)
		eventsStorm(t, func() []*client { return cl.clients }, id, 200, func() {
			cl.kill(t, 0)
			t.Log("instance 0 killed with SIGKILL; restarting")
			cl.start(t, 0)
		})
		soldID := sellOut(t, cl.clients[1])
		for _, got := range []*events{ev, fromQueue} {
			checkEvents(t, cl.clients[1], id, got, -1, true)
			checkEvents(t, cl.clients[1], soldID, got, 1, false)
		}
	})
}

// checkExpiryLatency lets 30 two-second holds of a new sale expire and
// checks each one's order.expired event reached the receiver within a
// second of the hold's end (the reaper runs every 100 ms, the dispatcher
// looks every 100 ms). It waits first for the killed process's delivery
// lease to run out: until then nobody delivers, by design.
func checkExpiryLatency(t *testing.T, c *client, ev *events, restarted time.Time) {
	t.Helper()
	time.Sleep(time.Until(restarted.Add(funnel.NoticeLease)))
	sale := saleJSON([]int{30}, 1, true)
	sale["hold_seconds"] = 2
	id := c.createSale(t, sale)
	var wg sync.WaitGroup
	for g := range 30 {
		wg.Go(func() {
			if status, _, err := c.purchase(context.Background(), id, fmt.Sprintf("ex-%d", g), true, nil, ""); err != nil || status != 202 {
				t.Errorf("purchase: %d %v", status, err)
			}
		})
	}
	wg.Wait()
	var late []time.Duration
	if !testenv.Poll(20*time.Second, 50*time.Millisecond, func() bool {
		late = nil
		ev.mu.Lock()
		for _, e := range ev.list {
			if e.Type == "order.expired" && e.SaleID == id {
				late = append(late, e.got.Sub(e.Order.HoldExpiresAt))
			}
		}
		ev.mu.Unlock()
		return len(late) >= 30
	}) {
		t.Fatalf("%d of 30 expiry events arrived", len(late))
	}
	worst := slices.Max(late)
	t.Logf("30 expiry events, the latest %v after its hold ended", worst.Round(time.Millisecond))
	if worst > time.Second {
		t.Errorf("an expiry event came %v after its hold ended, want within 1 s", worst)
	}
}

// bindEvents binds a queue of its own to the events exchange and collects
// what arrives on it.
func bindEvents(t *testing.T, exchange string) *events {
	t.Helper()
	conn, err := amqp091.Dial(testenv.URL(t, testenv.AMQP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err == nil {
		err = ch.QueueBind(q.Name, "#", exchange, false, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	go func() {
		for m := range msgs {
			if err := ev.add(m.Body); err != nil {
				ev.mu.Lock()
				ev.bad++
				ev.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { ch.ExchangeDelete(exchange, false, false) })
	return ev
}
