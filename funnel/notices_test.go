package funnel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/webhook"
)

// receiver is a webhook endpoint that refuses its first refuse requests
// (500), then records every event it verified, in arrival order.
type receiver struct {
	mu     sync.Mutex
	refuse int
	seen   []receivedEvent
	bad    int
}

type receivedEvent struct {
	ID, Type, OrderID, Status string
}

var hookSecret = []byte("test-webhook-secret-0123")

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.refuse > 0 {
		rc.refuse--
		http.Error(w, "not yet", http.StatusInternalServerError)
		return
	}
	if err := webhook.Verify(hookSecret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), webhook.ToleranceDefault); err != nil {
		rc.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var e struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		Order struct {
			ID     string `json:"order_id"`
			Status string `json:"status"`
		} `json:"order"`
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.ID != r.Header.Get(webhook.EventIDHeader) {
		rc.bad++
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	oid := e.Order.ID
	if oid == "" {
		oid = e.OrderID
	}
	rc.seen = append(rc.seen, receivedEvent{ID: e.ID, Type: e.Type, OrderID: oid, Status: e.Order.Status})
	w.WriteHeader(http.StatusNoContent)
}

// byOrder returns each order's event types in arrival order, duplicates
// (by ID) dropped as a receiver would.
func (rc *receiver) byOrder() (map[string][]string, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]bool{}
	out := map[string][]string{}
	var soldOut []string
	for _, e := range rc.seen {
		if seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		if e.Type == string(flashsale.NoticeSaleSoldOut) {
			soldOut = append(soldOut, e.OrderID)
			continue
		}
		out[e.OrderID] = append(out[e.OrderID], e.Type)
	}
	return out, soldOut
}

// TestNoticesWebhook: a receiver that refuses its first deliveries still
// gets every order's events, in order, and the sell-out once; the
// delivery log shows the refusals.
func TestNoticesWebhook(t *testing.T) {
	rc := &receiver{refuse: 3}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	sink, err := webhook.New(srv.URL, hookSecret, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := newClock()
	store := mustSQLite(t, filepath.Join(t.TempDir(), "fs.db"))
	defer store.Close()
	writer := inmem.NewWriter(store, inmem.WriterConfig{}, nil)
	defer writer.Close()
	testenv.Load(t) // a load a timed test waits out (testenv.Alone)
	svc := funnel.New(funnel.Config{Store: store.Roles(), Engine: inmem.NewEngine().Roles(), Writer: writer, Secret: []byte("s"),
		Now: c.Now, ReapInterval: 20 * time.Millisecond, NoticePoll: 10 * time.Millisecond, Sinks: []flashsale.NoticeSink{sink}})
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	e := &env{svc: svc, store: store.Roles(), clock: c}
	s := e.sale(t, nil, 3)
	var orders []*flashsale.Order
	for _, u := range []flashsale.User{alice, bob, carol} {
		o, err := e.buy(t, u, flashsale.PurchaseRequest{SaleID: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o)
	}
	if _, err := svc.MarkPaid(ctx, orders[0].ID, "pay-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(ctx, bob, orders[1].ID); err != nil {
		t.Fatal(err)
	}
	c.Advance(31 * time.Second) // carol's hold expires; the reaper runs every 20 ms
	want := map[string][]string{
		orders[0].ID: {"order.held", "order.paid"},
		orders[1].ID: {"order.held", "order.cancelled"},
		orders[2].ID: {"order.held", "order.expired"},
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, soldOut := rc.byOrder()
		if len(soldOut) == 1 && soldOut[0] == orders[2].ID && mapsEqual(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events: got %v and sold-out %v, want %v and the sell-out by %s", got, soldOut, want, orders[2].ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rc.bad != 0 {
		t.Errorf("%d deliveries failed the receiver's signature or body check", rc.bad)
	}
	failed, err := svc.Deliveries(ctx, flashsale.DeliveryQuery{Failed: true})
	if err != nil || len(failed) != 3 {
		t.Errorf("failed deliveries = %+v, %v; want the receiver's three refusals", failed, err)
	}
	for _, d := range failed {
		if d.Status != 500 || d.OK || d.Error == "" || d.Transport != "webhook" {
			t.Errorf("failed delivery %+v", d)
		}
	}
	// The cursor moves once the batch is delivered, just after the
	// receiver has the last event.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := svc.NoticeStatus(ctx)
		if err == nil && len(st) == 1 && st[0].Behind == 0 && st[0].Last == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NoticeStatus = %+v, %v; want webhook 7 of 7", st, err)
		}
	}
}

func mapsEqual(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
