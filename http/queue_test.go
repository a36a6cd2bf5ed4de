package http

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/golang-jwt/jwt/v5"
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.place != "" {
		return &flashsale.QueueView{State: s.place, Position: 2, Ahead: 1}, nil
	}
	return &flashsale.QueueView{State: flashsale.QueueAdmitted, RoomsLeft: 5, AdmittedUntil: &t0}, nil
}

func (s *stubService) QueueReport(_ context.Context, saleID string) (*flashsale.QueueReport, error) {
	if err := s.record(flashsale.User{}); err != nil {
		return nil, err
	}
	return &flashsale.QueueReport{Stats: flashsale.QueueStats{Drawn: true, Joined: 10, Waiting: 7, Admitted: 2, Used: 1, SoldOut: true},
		Rate: 2.5, Commitment: "c0ffee", Seed: "5eed"}, nil
}

// QueueMoved is the stub's moved channel, made on the first ask; move
// closes it.
func (s *stubService) QueueMoved(context.Context, string) (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if s.moved == nil {
		s.moved = make(chan struct{})
	}
	return s.moved, nil
}

// move sets the place the stub reads and wakes the streams.
func (s *stubService) move(state flashsale.QueueState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.place = state
	if s.moved != nil {
		close(s.moved)
		s.moved = nil
	}
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
	for _, k := range []string{"ticket", "state", "position", "ahead", "eta_seconds", "poll_after_ms", "rooms_left"} {
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

	if w := do(t, s, "GET", "/api/admin/sales/s1/queue", "admin", ""); w.Code != http.StatusOK ||
		!strings.Contains(w.Body.String(), `{"drawn":true,"joined":10,"waiting":7,"admitted":2,"used":1,"expired":0,"sold_out":true,"admit_per_second":2.5,"commitment":"c0ffee","seed":"5eed"}`) {
		t.Fatalf("admin queue: %d %s", w.Code, w.Body)
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
		{"ReportNoAdmin", "GET", "/api/admin/sales/s1/queue", "alice", "", 403, flashsale.EForbidden},
		{"ReportNoToken", "GET", "/api/admin/sales/s1/queue", "", "", 401, flashsale.EUnauthenticated},
		{"ReportLongID", "GET", "/api/admin/sales/" + strings.Repeat("a", 129) + "/queue", "admin", "", 404, flashsale.ENotFound},
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

// TestQueueEvents: the place's stream starts with the place, and when the
// queue moves it pushes the new place at once (a guest past the stock
// reads sold_out without polling); nothing is sent while the place stays
// the same. Without a token it is 401, for a sale without a room 404.
func TestQueueEvents(t *testing.T) {
	svc := &stubService{place: flashsale.QueueWaiting}
	s := newStubServer(svc)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/api/sales/s1/queue/events", nil)
	req.Header.Set("Authorization", "Bearer "+sign(t, jwt.SigningMethodHS256, testSecret,
		jwt.MapClaims{"sub": "alice", "tier": "gold", "exp": t0.Add(time.Hour).Unix()}))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	places := make(chan flashsale.QueueView, 10)
	go func() {
		defer close(places)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var v flashsale.QueueView
				if err := json.Unmarshal([]byte(d), &v); err != nil {
					t.Errorf("data %q: %v", d, err)
					return
				}
				places <- v
			}
		}
	}()
	nextPlace := func() flashsale.QueueView {
		t.Helper()
		select {
		case v, ok := <-places:
			if !ok {
				t.Fatal("the stream ended")
			}
			return v
		case <-time.After(5 * time.Second):
			t.Fatal("no place within 5 s")
		}
		return flashsale.QueueView{}
	}
	if v := nextPlace(); v.State != flashsale.QueueWaiting || v.Position != 2 {
		t.Fatalf("first event %+v, want the waiting place", v)
	}
	svc.move(flashsale.QueueWaiting) // moved, but this place is the same: nothing sent
	svc.move(flashsale.QueueSoldOut)
	start := time.Now()
	if v := nextPlace(); v.State != flashsale.QueueSoldOut {
		t.Fatalf("after the queue sold out: %+v, want sold_out", v)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("sold_out pushed after %v, want at once", d)
	}

	wantError(t, do(t, s, "GET", "/api/sales/s1/queue/events", "", ""), 401, flashsale.EUnauthenticated)
	noRoom := &stubService{err: flashsale.Errorf(flashsale.ENotFound, "this sale has no waiting room")}
	wantError(t, do(t, newStubServer(noRoom), "GET", "/api/sales/s1/queue/events", "alice", ""), 404, flashsale.ENotFound)
}
