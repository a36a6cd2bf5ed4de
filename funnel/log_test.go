package funnel_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/funnel"
	"github.com/flashsale/flashsale/inmem"
)

// jsonLines decodes the JSON lines logged so far.
func jsonLines(tb testing.TB, logs *syncBuffer) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			tb.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestStateChangeLines checks each state change of an order is one info
// line with its sale, order and request ids, and that a sale's sold-out
// answers are one line however many guests are refused.
func TestStateChangeLines(t *testing.T) {
	ctx := context.Background()
	logs := &syncBuffer{}
	e := mustOpenAudit(t, nil, func(cfg *funnel.Config, _ *inmem.Writer) {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	svc, c := e.svc, e.clock
	sale := e.sale(t, func(s *flashsale.Sale) { s.PurchaseToken = false }, 3)

	buy := func(user, reqID string) (*flashsale.Order, error) {
		return svc.Purchase(flashsale.WithRequestID(ctx, reqID), flashsale.User{ID: user}, flashsale.PurchaseRequest{SaleID: sale.ID})
	}
	kept, err := buy("u1", "req-kept")
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := buy("u2", "req-cancel")
	if err != nil {
		t.Fatal(err)
	}
	paid, err := buy("u0", "req-pay")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.MarkPaid(flashsale.WithRequestID(ctx, "req-pay-2"), paid.ID, "pay-1"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u3", "u4", "u5"} {
		_, err := buy(u, "req-"+u)
		wantErr(t, err, flashsale.ErrSoldOut)
	}
	if _, err := svc.Cancel(flashsale.WithRequestID(ctx, "req-cancel-2"), flashsale.User{ID: "u2"}, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if n := svc.Reap(ctx); n != 1 {
		t.Fatalf("reaped %d, want 1", n)
	}

	type want struct{ msg, order, reqID string }
	wants := []want{
		{"sale created", "", ""},
		{"order held", kept.ID, "req-kept"},
		{"order held", paid.ID, "req-pay"},
		{"order paid", paid.ID, "req-pay-2"},
		{"order held", cancelled.ID, "req-cancel"},
		{"sale sold out", "", "req-u3"},
		{"order cancelled", cancelled.ID, "req-cancel-2"},
		{"order expired", kept.ID, ""},
	}
	count := map[want]int{}
	for _, l := range jsonLines(t, logs) {
		if l["level"] != "INFO" || l["sale_id"] != sale.ID {
			continue
		}
		order, _ := l["order_id"].(string)
		reqID, _ := l["request_id"].(string)
		count[want{l["msg"].(string), order, reqID}]++
	}
	for _, w := range wants {
		if count[w] != 1 {
			t.Errorf("%+v logged %d times, want once; lines: %v", w, count[w], count)
		}
	}
	if len(count) != len(wants) {
		t.Errorf("info lines about the sale: %v, want %v", count, wants)
	}
}
