package http

import (
	"context"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
)

func (s *stubService) Deliveries(ctx context.Context, q flashsale.DeliveryQuery) ([]flashsale.Delivery, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.life.deliveries = q
	s.mu.Unlock()
	return []flashsale.Delivery{{Transport: "webhook", NoticeID: "o1.held", Seq: 1, Type: flashsale.NoticeOrderHeld,
		Attempt: 2, At: t0, Status: 500, Error: "receiver answered 500"}}, nil
}

func (s *stubService) NoticeStatus(ctx context.Context) ([]flashsale.NoticeTransport, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return []flashsale.NoticeTransport{{Name: "webhook", Cursor: 3, Last: 5, Behind: 2}}, nil
}

func TestNoticeRoutes(t *testing.T) {
	svc := &stubService{}
	srv := newStubServer(svc)
	w := do(t, srv, "GET", "/api/admin/events", "admin", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"behind":2`) {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	w = do(t, srv, "GET", "/api/admin/events/deliveries?transport=webhook&event_id=o1.held&failed=true&limit=5", "admin", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"event_id":"o1.held"`) {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got, want := svc.life.deliveries, (flashsale.DeliveryQuery{Transport: "webhook", NoticeID: "o1.held", Failed: true, Limit: 5}); got != want {
		t.Errorf("query = %+v, want %+v", got, want)
	}
	for _, c := range []struct{ name, query, msg string }{
		{"BadTransport", "transport=smtp", "transport must be one of"},
		{"BadFailed", "failed=maybe", "failed must be"},
		{"BadLimit", "limit=0", "limit"},
		{"Cursor", "cursor=x", "no cursor"},
		{"BinaryID", "event_id=%00", "event_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := &stubService{}
			w := do(t, newStubServer(svc), "GET", "/api/admin/events/deliveries?"+c.query, "admin", "")
			if w.Code != 400 || !strings.Contains(w.Body.String(), c.msg) || svc.calls() != 0 {
				t.Errorf("%s = %d %s (%d calls), want 400 %q", c.query, w.Code, w.Body, svc.calls(), c.msg)
			}
		})
	}
	if w := do(t, srv, "GET", "/api/admin/events", "alice", ""); w.Code != 403 && w.Code != 401 {
		t.Errorf("a user's token on the events = %d", w.Code)
	}
}
