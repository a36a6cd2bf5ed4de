package http

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/flashsale/flashsale"
)

// EMethodNotAllowed is the code of a request whose path exists but not with
// its method. It is the only code the HTTP layer adds to flashsale's: it is
// about the route table, not the domain.
const EMethodNotAllowed = "method_not_allowed"

// statuses is the one map from error codes to HTTP statuses. A code missing
// from it is answered as internal, so a new code cannot leak out as a 200.
var statuses = map[string]int{
	flashsale.EInvalid:         http.StatusBadRequest,
	flashsale.EUnauthenticated: http.StatusUnauthorized,
	flashsale.EForbidden:       http.StatusForbidden,
	flashsale.ENotEligible:     http.StatusForbidden,
	flashsale.ETokenInvalid:    http.StatusForbidden,
	flashsale.EChallengeFailed: http.StatusForbidden,
	flashsale.ENotFound:        http.StatusNotFound,
	EMethodNotAllowed:          http.StatusMethodNotAllowed,
	flashsale.ESoldOut:         http.StatusConflict,
	flashsale.ELimitExceeded:   http.StatusConflict,
	flashsale.ENotStarted:      http.StatusConflict,
	flashsale.EEnded:           http.StatusConflict,
	flashsale.EHoldExpired:     http.StatusConflict,
	flashsale.EAlreadyPaid:     http.StatusConflict,
	flashsale.EOrderCancelled:  http.StatusConflict,
	flashsale.EOrderPending:    http.StatusConflict,
	flashsale.EKeyReused:       http.StatusUnprocessableEntity,
	flashsale.EAlreadyStarted:  http.StatusConflict,
	flashsale.EPaused:          http.StatusConflict,
	flashsale.EStockInUse:      http.StatusConflict,
	// The stay rules: the stay is not sold, another may be.
	flashsale.EMinStay:           http.StatusConflict,
	flashsale.EMaxStay:           http.StatusConflict,
	flashsale.EClosedToArrival:   http.StatusConflict,
	flashsale.EClosedToDeparture: http.StatusConflict,
	flashsale.EStopSell:          http.StatusConflict,
	flashsale.EConflict:          http.StatusConflict,
	flashsale.ETooLarge:          http.StatusRequestEntityTooLarge,
	flashsale.ERateLimited:       http.StatusTooManyRequests,
	flashsale.ENotAdmitted:       http.StatusForbidden,
	flashsale.EUnavailable:       http.StatusServiceUnavailable,
	flashsale.EInternal:          http.StatusInternalServerError,
}

// ErrorStatus returns the HTTP status for an error code; unknown codes are 500.
func ErrorStatus(code string) int {
	if st, ok := statuses[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// errorJSON is the body of every error response.
type errorJSON struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// sentinelBodies holds the encoded body of each flashsale sentinel, so the
// errors a flash sale answers most (sold out, limit reached, not started)
// cost no encoding. Read-only after init, so safe to share.
var sentinelBodies = func() map[*flashsale.Error][]byte {
	m := make(map[*flashsale.Error][]byte)
	for _, e := range []*flashsale.Error{
		flashsale.ErrNotFound, flashsale.ErrSoldOut, flashsale.ErrLimitExceeded,
		flashsale.ErrNotStarted, flashsale.ErrEnded, flashsale.ErrHoldExpired,
		flashsale.ErrAlreadyStarted, flashsale.ErrTokenInvalid, flashsale.ErrChallengeFailed, flashsale.ErrNotEligible,
		flashsale.ErrNotEligibleStays, flashsale.ErrNotEligibleChannel, flashsale.ErrFactsUnavailable,
		flashsale.ErrUnavailable, flashsale.ErrInvalid, flashsale.ErrDuplicate,
		flashsale.ErrKeyConflict, flashsale.ErrStale, flashsale.ErrNotLoaded, flashsale.ErrIndeterminate,
		flashsale.ErrOrderPending, flashsale.ErrKeyReused,
		errUnauthenticated, errForbidden, errMethodNotAllowed,
	} {
		m[e] = encodeError(e.Code, e.Message)
	}
	return m
}()

func encodeError(code, message string) []byte {
	b, err := json.Marshal(errorJSON{errorDetail{Code: code, Message: message}})
	if err != nil {
		// Two strings always encode; this is unreachable.
		panic(err)
	}
	return append(b, '\n')
}

// writeError answers err with the status its code maps to. Internal errors
// are logged with their cause and answered with a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := flashsale.EInternal
	fe, ok := errors.AsType[*flashsale.Error](err)
	if !ok && flashsale.Unreachable(err) {
		// A dependency that did not answer is a 503 to retry, never a 500.
		s.log.WarnContext(r.Context(), "dependency unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
		fe, ok = flashsale.ErrUnavailable, true
	}
	if ok {
		if _, known := statuses[fe.Code]; known {
			code = fe.Code
		}
	}
	status := ErrorStatus(code)
	var body []byte
	switch {
	case code == flashsale.EInternal:
		s.log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		body = internalBody
	case sentinelBodies[fe] != nil:
		body = sentinelBodies[fe]
	default:
		body = encodeError(fe.Code, fe.Message)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = nosniff
	switch {
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable, code == flashsale.EOrderPending:
		h["Retry-After"] = retryAfter
		if wait, ok := flashsale.RetryAfter(err); ok {
			h["Retry-After"] = retryAfterSeconds(wait)
		}
	case status == http.StatusUnauthorized:
		h["Www-Authenticate"] = wwwAuthenticate
	}
	w.WriteHeader(status)
	w.Write(body)
}

// Shared header values: assigning a shared slice avoids one allocation per
// response. net/http never modifies them.
var (
	jsonContentType = []string{"application/json"}
	nosniff         = []string{"nosniff"}
	retryAfter      = []string{"1"}
	noStore         = []string{"no-store"}
	wwwAuthenticate = []string{`Bearer realm="flashsale"`}
	internalBody    = encodeError(flashsale.EInternal, "internal error")
)

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every response type is a plain struct that always encodes.
		panic(err)
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
