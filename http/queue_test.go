package http

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
)

// The stub's waiting room: the first join of a user creates their place.

func (s *stubService) JoinQueue(_ context.Context, u flashsale.User, req flashsale.JoinRequest) (*flashsale.QueueView, bool, error) {
	if err := s.record(u); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joined == nil {
		s.joined = map[string]bool{}
	}
	created := !s.joined[u.ID]
	s.joined[u.ID] = true
	return &flashsale.QueueView{State: flashsale.QueueWaiting, Position: 3, Ahead: 2, ETASeconds: 2, PollAfterMS: 1000, RoomsLeft: 5}, created, nil
}

func (s *stubService) QueueStatus(_ context.Context, u flashsale.User, saleID string) (*flashsale.QueueView, error) {
	if err := s.record(u); err != nil {
		return nil, err
	}
	return &flashsale.QueueView{State: flashsale.QueueAdmitted, RoomsLeft: 5, AdmittedUntil: &t0}, nil
}

func (s *stubService) QueueDraw(_ context.Context, saleID string) (*flashsale.Draw, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return &flashsale.Draw{SaleID: saleID, Commitment: "c0ffee"}, nil
}

// TestQueueRoutes: joining answers 201 then 200 with the same body shape
// (the field names clients are written to), reading the place and the
// draw 200; bad input is 400 and reaches no service call, a guest without
// a token is 401, a sale without a waiting room 404, a guest not admitted
// 403 not_admitted.
func TestQueueRoutes(t *testing.T) {
	svc := &stubService{}
	s := newStubServer(svc)
	w := do(t, s, "POST", "/api/sales/s1/queue", "alice", "")
	if w.Code != http.StatusCreated {
		t.Fatalf("first join: %d %s", w.Code, w.Body)
	}
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"state", "position", "ahead", "eta_seconds", "poll_after_ms", "rooms_left"} {
		if _, ok := v[k]; !ok {
			t.Errorf("join answer lacks %q: %s", k, w.Body)
		}
	}
	if _, ok := v["admitted_until"]; ok {
		t.Errorf("a waiting guest's answer has admitted_until: %s", w.Body)
	}
	if w := do(t, s, "POST", "/api/sales/s1/queue", "alice", "{}"); w.Code != http.StatusOK {
		t.Fatalf("second join: %d %s, want 200", w.Code, w.Body)
	}
	if w := do(t, s, "GET", "/api/sales/s1/queue", "alice", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"admitted_until"`) {
		t.Fatalf("status: %d %s", w.Code, w.Body)
	}
	if w := do(t, s, "GET", "/api/sales/s1/queue/draw", "", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"commitment":"c0ffee"`) {
		t.Fatalf("draw: %d %s", w.Code, w.Body)
	}

	bad := []struct {
		name, method, path, auth, body string
		status                         int
		code                           string
	}{
		{"JoinNoToken", "POST", "/api/sales/s1/queue", "", "", 401, flashsale.EUnauthenticated},
		{"StatusNoToken", "GET", "/api/sales/s1/queue", "", "", 401, flashsale.EUnauthenticated},
		{"JoinField", "POST", "/api/sales/s1/queue", "alice", `{"position":1}`, 400, flashsale.EInvalid},
		{"JoinNotJSON", "POST", "/api/sales/s1/queue", "alice", `position=1`, 400, flashsale.EInvalid},
		{"JoinArray", "POST", "/api/sales/s1/queue", "alice", `[]`, 400, flashsale.EInvalid},
		{"JoinTrailing", "POST", "/api/sales/s1/queue", "alice", `{}{}`, 400, flashsale.EInvalid},
		{"JoinOnlyChallenge", "POST", "/api/sales/s1/queue", "alice", `{"challenge":"c"}`, 400, flashsale.EInvalid},
		{"JoinEmptySolution", "POST", "/api/sales/s1/queue", "alice", `{"challenge":"c","solution":""}`, 400, flashsale.EInvalid},
		{"JoinLongID", "POST", "/api/sales/" + strings.Repeat("a", 129) + "/queue", "alice", "", 404, flashsale.ENotFound},
		{"StatusLongID", "GET", "/api/sales/" + strings.Repeat("a", 300) + "/queue", "alice", "", 404, flashsale.ENotFound},
		{"DrawLongID", "GET", "/api/sales/" + strings.Repeat("a", 129) + "/queue/draw", "", "", 404, flashsale.ENotFound},
		{"DrawPost", "POST", "/api/sales/s1/queue/draw", "alice", "", 405, EMethodNotAllowed},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := svc.calls()
			w := do(t, s, tc.method, tc.path, tc.auth, tc.body)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), `"`+tc.code+`"`) {
				t.Fatalf("%d %s, want %d %s", w.Code, w.Body, tc.status, tc.code)
			}
			if svc.calls() != before {
				t.Fatal("bad input reached the service")
			}
		})
	}

	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{flashsale.Errorf(flashsale.ENotFound, "this sale has no waiting room"), 404, flashsale.ENotFound},
		{flashsale.ErrNotAdmitted, 403, flashsale.ENotAdmitted},
		{flashsale.ErrSoldOut, 409, flashsale.ESoldOut},
	} {
		svc := &stubService{err: tc.err}
		w := do(t, newStubServer(svc), "POST", "/api/sales/s1/queue", "alice", "")
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `"`+tc.code+`"`) {
			t.Fatalf("service error %v: %d %s, want %d %s", tc.err, w.Code, w.Body, tc.status, tc.code)
		}
	}
}

// FuzzJoinQueue: whatever the path's sale ID and the body, a join is
// answered with JSON: 201/200 for a good one, a 4xx error otherwise,
// never a 5xx.
func FuzzJoinQueue(f *testing.F) {
	for _, c := range [][2]string{{"s1", ""}, {"s1", "{}"}, {"", "{}"}, {"../s1", ""}, {"s1", `{"a":1}`}, {"s1", "\xff"},
		{"%00", "null"}, {strings.Repeat("a", 200), "[]"}, {"s1", `{}{}`}} {
		f.Add(c[0], c[1])
	}
	s := newStubServer(&stubService{})
	f.Fuzz(func(t *testing.T, id, body string) {
		w := do(t, s, "POST", "/api/sales/"+url.PathEscape(id)+"/queue", "alice", body)
		switch {
		case w.Code == http.StatusMovedPermanently || w.Code == http.StatusTemporaryRedirect || w.Code == http.StatusPermanentRedirect:
			// The mux cleans "." and ".." segments with a redirect.
		case w.Code >= 500, w.Code < 200, w.Code >= 300 && w.Code < 400:
			t.Fatalf("%q %q: %d %s", id, body, w.Code, w.Body)
		case !json.Valid(w.Body.Bytes()):
			t.Fatalf("%q %q: %d, not JSON: %q", id, body, w.Code, w.Body)
		}
	})
}
