package http

import (
	"net/http"

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
