package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// TestLogsRequestID follows one purchase by its request id in the
// distributed shape: the X-Request-ID sent with the purchase is on the
// funnel's line when it is queued and on the consumer's line when the
// order row is written, beside the order id, and every line the instance
// writes is JSON (FLASHSALE_LOG_FORMAT=json: one stream, one format).
func TestLogsRequestID(t *testing.T) {
	c := startCluster(t, 1, testenv.MySQLDatabase(t), "FLASHSALE_LOG_FORMAT=json", "FLASHSALE_LOG_LEVEL=debug")
	id := c.clients[0].createSale(t, saleJSON([]int{5}, 1, false))
	mark := c.logs[0].Len()

	const reqID = "req-abc123"
	cl := c.clients[0]
	var o orderJSON
	status, err := cl.do(context.Background(), "POST", "/api/sales/"+id+"/purchase", cl.jwt("guest-1"),
		map[string]any{}, map[string]string{"X-Request-ID": reqID, "Idempotency-Key": "k1"}, &o)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("purchase: %d %v", status, err)
	}

	type line struct {
		Msg       string `json:"msg"`
		OrderID   string `json:"order_id"`
		RequestID string `json:"request_id"`
	}
	want := map[string]bool{"order queued": false, "order held": false}
	if !testenv.Poll(15*time.Second, 50*time.Millisecond, func() bool {
		for _, s := range c.logs[0].Since(mark) {
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("not a JSON line: %q", s)
			}
			if _, ok := want[l.Msg]; ok && l.OrderID == o.OrderID && l.RequestID == reqID {
				want[l.Msg] = true
			}
		}
		return want["order queued"] && want["order held"]
	}) {
		t.Fatalf("order %s: lines with request_id %s found: %v", o.OrderID, reqID, want)
	}
}
