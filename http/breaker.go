package http

import (
	"io"
	"net/http"

	"github.com/flashsale/flashsale"
)

// breakerBody is an operator's override of the stock engine's breaker.
type breakerBody struct {
	Force flashsale.BreakerForce `json:"force"`
}

// decodeBreaker decodes {"force": "open" | "closed" | "auto"}.
func decodeBreaker(r io.Reader) (breakerBody, error) {
	var b breakerBody
	if err := decodeBody(r, &b, false); err != nil {
		return breakerBody{}, err
	}
	if err := b.Force.Valid(); err != nil {
		return breakerBody{}, err
	}
	return b, nil
}

func (s *Server) handleBreaker(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.Breaker(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// handleForceBreaker pins the breaker: of every instance in the
// distributed shape (the switch is kept in the database and each instance
// follows it within ForcePollDefault), of this one where there is no
// database to share it through.
func (s *Server) handleForceBreaker(w http.ResponseWriter, r *http.Request) {
	b, err := decodeBreaker(r.Body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.svc.ForceBreaker(r.Context(), b.Force)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.WarnContext(r.Context(), "breaker override", "force", b.Force, "state", st.State)
	writeJSON(w, http.StatusOK, st)
}
