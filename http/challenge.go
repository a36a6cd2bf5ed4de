package http

import (
	"io"
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
)

// Bounds on a token request's solved challenge. The service checks the
// content; these reject nonsense before it.
const (
	// MaxChallenge bounds a challenge string (a sealed value, as a token).
	MaxChallenge = MaxPurchaseToken
	// MaxSolution is the service's bound.
	MaxSolution = flashsale.MaxSolution
)

// tokenWire is the wire form of a token request: empty for a sale without
// a challenge, the puzzle and its solution for one with.
type tokenWire struct {
	Challenge string `json:"challenge"`
	Solution  string `json:"solution"`
}

// decodeTokenRequest decodes a token request body from untrusted input. An
// empty body is a request without a challenge. Errors are
// *flashsale.Error with EInvalid or ETooLarge.
func decodeTokenRequest(r io.Reader) (flashsale.TokenRequest, error) {
	var w tokenWire
	if err := decodeBody(r, &w, true); err != nil {
		return flashsale.TokenRequest{}, err
	}
	switch {
	case len(w.Challenge) > MaxChallenge:
		return flashsale.TokenRequest{}, flashsale.Errorf(flashsale.EInvalid, "challenge is longer than %d bytes", MaxChallenge)
	case len(w.Solution) > MaxSolution:
		return flashsale.TokenRequest{}, flashsale.Errorf(flashsale.EInvalid, "solution is longer than %d bytes", MaxSolution)
	case (w.Challenge == "") != (w.Solution == ""):
		return flashsale.TokenRequest{}, flashsale.Errorf(flashsale.EInvalid, "challenge and solution go together: send both or neither")
	}
	return flashsale.TokenRequest{Challenge: w.Challenge, Solution: w.Solution}, nil
}

// puzzleJSON is a challenge as the guest's page sees it.
type puzzleJSON struct {
	Challenge  string    `json:"challenge"`
	Difficulty int       `json:"difficulty"`
	ExpiresAt  time.Time `json:"expires_at"`
	Algorithm  string    `json:"algorithm"`
}

// handleChallenge hands out a proof-of-work puzzle for a sale that asks for
// one. It takes no body (an empty object is allowed).
func (s *Server) handleChallenge(w http.ResponseWriter, r *http.Request) {
	u, id, ok := s.userAndNoBody(w, r)
	if !ok {
		return
	}
	p, err := s.svc.Challenge(r.Context(), u, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, puzzleJSON{
		Challenge: p.Challenge, Difficulty: p.Difficulty, ExpiresAt: p.ExpiresAt, Algorithm: p.Algorithm,
	})
}
