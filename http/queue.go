package http

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
)

// The waiting room's endpoints (issue 24): a guest joins a sale's queue
// and reads their place; anyone reads the sale's draw, to check it.

// handleJoinQueue is POST /api/sales/{id}/queue: 201 with a new place,
// 200 with the one the guest had. Its body is the token request's: empty,
// or a solved challenge for a sale that asks for one.
func (s *Server) handleJoinQueue(w http.ResponseWriter, r *http.Request) {
	u, id, ok := s.userAndID(w, r)
	if !ok {
		return
	}
	b, err := decodeTokenRequest(r.Body) // the same body: a solved challenge, or nothing
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, created, err := s.svc.JoinQueue(r.Context(), u, flashsale.JoinRequest{SaleID: id,
		Challenge: b.Challenge, Solution: b.Solution, ClientIP: s.clientIP(r)})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, v)
}

// handleQueueStatus is GET /api/sales/{id}/queue: the guest's place.
func (s *Server) handleQueueStatus(w http.ResponseWriter, r *http.Request) {
	u, id, ok := s.userAndID(w, r)
	if !ok {
		return
	}
	v, err := s.svc.QueueStatus(r.Context(), u, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// handleQueueDraw is GET /api/sales/{id}/queue/draw: the commitment
// before the start, the whole draw after it (flashsale queue verify
// checks it).
func (s *Server) handleQueueDraw(w http.ResponseWriter, r *http.Request) {
	id, err := checkID(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := s.svc.QueueDraw(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// userAndNoBody is userAndID for an action that takes no body (an empty
// object is allowed): anything else is 400 before the service is asked.
func (s *Server) userAndNoBody(w http.ResponseWriter, r *http.Request) (flashsale.User, string, bool) {
	u, id, ok := s.userAndID(w, r)
	if !ok {
		return u, id, false
	}
	var none struct{}
	if err := decodeBody(r.Body, &none, true); err != nil {
		s.writeError(w, r, err)
		return flashsale.User{}, "", false
	}
	return u, id, true
}

// handleQueueEvents is GET /api/sales/{id}/queue/events: the guest's place
// as Server-Sent Events (the page reads it with fetch, the JWT in the
// header). The first event is the place now; the next come when the
// queue moves (an admission step moved the front, an admission lapsed,
// the queue turned sold out or open), read again then, and sent if it
// changed: a guest past the stock reads sold_out within one admission
// step of the last room being taken, not at their next poll. The place
// is also read at every heartbeat, which tells the room the guest is
// still there. A client address holds at most streamsPerClient streams,
// shared with the sale events'.
func (h *eventHub) handleQueueEvents(w http.ResponseWriter, r *http.Request) {
	s := h.s
	u, id, ok := s.readerAndID(w, r)
	if !ok {
		return
	}
	client, ok := h.admitStream(w, r)
	if !ok {
		return
	}
	defer h.release(client)
	read := func() (<-chan struct{}, []byte, error) {
		ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
		defer cancel()
		moved, err := s.svc.QueueMoved(ctx, id) // before the read: a move after it is not missed
		if err != nil {
			return nil, nil, err
		}
		v, err := s.svc.QueueStatus(ctx, u, id)
		if err != nil {
			return nil, nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, nil, err
		}
		return moved, sseMessage("place", b), nil
	}
	moved, sent, err := read()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, shutdown := h.open(w, r)
	if !h.write(rc, w, append([]byte(eventRetry), sent...)) {
		return
	}
	beat := time.NewTicker(h.heartbeat)
	defer beat.Stop()
	for {
		ping := false
		select {
		case <-moved:
		case <-beat.C:
			ping = true
		case <-r.Context().Done():
			return
		case <-shutdown:
			return
		}
		next, ev, err := read()
		if err != nil {
			return // the page reconnects, and its first read says what is wrong
		}
		moved = next
		switch {
		case !bytes.Equal(ev, sent):
			if !h.write(rc, w, ev) {
				return
			}
			sent = ev
		case ping:
			if !h.write(rc, w, []byte(": ping\n\n")) {
				return
			}
		}
	}
}

// queueReportJSON is GET /api/admin/sales/{id}/queue's answer.
type queueReportJSON struct {
	Drawn          bool    `json:"drawn"`
	Joined         int     `json:"joined"`
	Waiting        int     `json:"waiting"`
	Admitted       int     `json:"admitted"`
	Used           int     `json:"used"`
	Expired        int     `json:"expired"`
	SoldOut        bool    `json:"sold_out"`
	AdmitPerSecond float64 `json:"admit_per_second"`
	Commitment     string  `json:"commitment"`
	Seed           string  `json:"seed,omitempty"`
}

// handleQueueReport is GET /api/admin/sales/{id}/queue: the waiting room
// as its operators watch it (pause the sale to stop admissions; edit its
// waiting_room's admit_per_second to change their pace, live).
func (s *Server) handleQueueReport(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := s.svc.QueueReport(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st := q.Stats
	writeJSON(w, http.StatusOK, queueReportJSON{Drawn: st.Drawn, Joined: st.Joined, Waiting: st.Waiting, Admitted: st.Admitted,
		Used: st.Used, Expired: st.Expired, SoldOut: st.SoldOut, AdmitPerSecond: q.Rate, Commitment: q.Commitment, Seed: q.Seed})
}
